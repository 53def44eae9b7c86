// RUN: tessel-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(tessel-fuse-gemm-epilogues))' | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(tessel-fuse-gemm-epilogues))' -mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// Rule: a bias add (rank-1 [N]) that is the product's only user becomes the bias epilogue;
// the fused op stands where the add was and replaces its result (a qkv projection: the
// biased value has other users, which is fine).
// CHECK-LABEL: func.func @bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<24x8xf32>, %[[B:.*]]: tensor<24xf32>)
// CHECK-NEXT: %[[Y:.*]] = tessel.matmul_epilogue %[[X]], %[[W]] transpose_rhs bias %[[B]] : (tensor<2x4x8xf32>, tensor<24x8xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
// CHECK-NEXT: %[[S:.*]] = tessel.scale %[[Y]]
// CHECK-NEXT: return %[[Y]], %[[S]]
// The fused op keeps the matmul's location (the user's line).
// LOC-LABEL: func.func @bias
// LOC: tessel.matmul_epilogue {{.*}} loc([[MLOC:#loc[0-9]*]])
// LOC: [[MLOC]] = loc("model.h":7:3)
func.func @bias(%x: tensor<2x4x8xf32>, %w: tensor<24x8xf32>, %b: tensor<24xf32>) -> (tensor<2x4x24xf32>, tensor<2x4x24xf32>) {
  %p = tessel.matmul %x, %w transpose_rhs : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32> loc("model.h":7:3)
  %y = tessel.add %p, %b : (tensor<2x4x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32> loc("model.h":8:3)
  %s = tessel.scale %y, 2.000000e+00 : tensor<2x4x24xf32>
  return %y, %s : tensor<2x4x24xf32>, tensor<2x4x24xf32>
}

// -----

// Rule: bias, then a gelu whose input gelu_grad also reads (the MLP's first layer in a
// training step): the input becomes the pre_activation result, which gelu_grad now reads.
// CHECK-LABEL: func.func @bias_gelu_pre
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<32x8xf32>, %[[B:.*]]: tensor<32xf32>, %[[D:.*]]: tensor<2x4x32xf32>)
// CHECK-NEXT: %[[H:.*]]:2 = tessel.matmul_epilogue %[[X]], %[[W]] transpose_rhs bias %[[B]] gelu pre_activation : (tensor<2x4x8xf32>, tensor<32x8xf32>, tensor<32xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>)
// CHECK-NEXT: %[[G:.*]] = tessel.gelu_grad %[[H]]#1, %[[D]]
// CHECK-NEXT: return %[[H]]#0, %[[G]]
func.func @bias_gelu_pre(%x: tensor<2x4x8xf32>, %w: tensor<32x8xf32>, %b: tensor<32xf32>, %d: tensor<2x4x32xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>) {
  %p = tessel.matmul %x, %w transpose_rhs : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %z = tessel.add %p, %b : (tensor<2x4x32xf32>, tensor<32xf32>) -> tensor<2x4x32xf32>
  %h = tessel.gelu %z : tensor<2x4x32xf32>
  %g = tessel.gelu_grad %z, %d : tensor<2x4x32xf32>
  return %h, %g : tensor<2x4x32xf32>, tensor<2x4x32xf32>
}

// -----

// Rule: a gelu alone (evaluation: no gelu_grad) needs no pre-activation.
// CHECK-LABEL: func.func @bias_gelu
// CHECK-NEXT: %[[H:.*]] = tessel.matmul_epilogue %{{.*}}, %{{.*}} transpose_rhs bias %{{.*}} gelu : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<4x12xf32>
// CHECK-NEXT: return %[[H]]
func.func @bias_gelu(%x: tensor<4x8xf32>, %w: tensor<12x8xf32>, %b: tensor<12xf32>) -> tensor<4x12xf32> {
  %p = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<12x8xf32>) -> tensor<4x12xf32>
  %z = tessel.add %b, %p : (tensor<12xf32>, tensor<4x12xf32>) -> tensor<4x12xf32>
  %h = tessel.gelu %z : tensor<4x12xf32>
  return %h : tensor<4x12xf32>
}

// -----

// Rule: bias, then the residual add of a tensor of the result's type (a projection back
// into the residual stream); the residual is defined after the matmul, so the fused op goes
// where the last add was.
// CHECK-LABEL: func.func @bias_residual
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[R:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT: %[[R2:.*]] = tessel.scale %[[R]]
// CHECK-NEXT: %[[Y:.*]] = tessel.matmul_epilogue %[[X]], %[[W]] transpose_rhs bias %[[B]] residual %[[R2]] : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bias_residual(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %r: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %p = tessel.matmul %x, %w transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r2 = tessel.scale %r, 2.000000e+00 : tensor<2x4x8xf32>
  %z = tessel.add %p, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y = tessel.add %r2, %z : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Rule: a residual that is the GEMM's own input (same bytes as A) is not fused; the bias is.
// CHECK-LABEL: func.func @residual_is_input
// CHECK-NEXT: %[[Z:.*]] = tessel.matmul_epilogue %{{.*}}, %{{.*}} transpose_rhs bias %{{.*}} :
// CHECK-NEXT: tessel.add %{{.*}}, %[[Z]]
func.func @residual_is_input(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %p = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = tessel.add %p, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = tessel.add %x, %z : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Rule: an intermediate with another user stays: the product read by a second op keeps its
// bias add separate; a biased value read by something other than gelu and gelu_grad keeps
// its gelu separate (the bias still fuses).
// CHECK-LABEL: func.func @other_users
// CHECK-NEXT: %[[P:.*]] = tessel.matmul %
// CHECK-NEXT: tessel.add %[[P]], %
// CHECK-NEXT: tessel.scale %[[P]]
// CHECK-NEXT: %[[Z:.*]] = tessel.matmul_epilogue %{{.*}}, %{{.*}} transpose_rhs bias %{{.*}} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: tessel.gelu %[[Z]]
// CHECK-NEXT: tessel.scale %[[Z]]
func.func @other_users(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %z = tessel.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %s = tessel.scale %p, 2.000000e+00 : tensor<4x16xf32>
  %p2 = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %z2 = tessel.add %p2, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %h2 = tessel.gelu %z2 : tensor<4x16xf32>
  %s2 = tessel.scale %z2, 2.000000e+00 : tensor<4x16xf32>
  return %z, %s, %h2, %s2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// THE PARTIAL-SUM RULE: a product that reaches a summing collective (here an all-reduce
// after the add, as a row-parallel projection's partial sum would) is never fused into,
// although the add has the bias pattern: the bias would be added once per rank. A product
// all-reduced first and biased after it (what tensor parallelism makes) is not fused either.
// CHECK-LABEL: func.func @partial_sum
// CHECK-NOT: tessel.matmul_epilogue
// CHECK: %[[P:.*]] = tessel.matmul %
// CHECK-NEXT: %[[Z:.*]] = tessel.add %[[P]], %
// CHECK-NEXT: tessel.all_reduce %[[Z]] reduce sum
// CHECK: %[[P2:.*]] = tessel.matmul %
// CHECK-NEXT: %[[A2:.*]] = tessel.all_reduce %[[P2]] reduce sum
// CHECK-NEXT: tessel.add %[[A2]], %
// CHECK-NOT: tessel.matmul_epilogue
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @partial_sum(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %z = tessel.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r = tessel.all_reduce %z reduce sum on @mesh grid_axes = [0] : tensor<4x16xf32>
  %p2 = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %a2 = tessel.all_reduce %p2 reduce sum on @mesh grid_axes = [0] : tensor<4x16xf32>
  %z2 = tessel.add %a2, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %r, %z2 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Rule (backward): the weight gradient dW = dY^T X (transpose_lhs, dY reshaped to rows) and
// the bias gradient reduce_sum of the same dY over every dimension but the last become one
// op with a bias_gradient result (cuBLASLt's BGRADA), where the later of the two was.
// CHECK-LABEL: func.func @bias_gradient
// CHECK-SAME: (%[[DY:.*]]: tensor<2x4x16xf32>, %[[X:.*]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[D2:.*]] = tessel.reshape %[[DY]] : tensor<2x4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[G:.*]]:2 = tessel.matmul_epilogue %[[D2]], %[[X]] transpose_lhs bias_gradient : (tensor<8x16xf32>, tensor<8x8xf32>) -> (tensor<16x8xf32>, tensor<16xf32>)
// CHECK-NEXT: return %[[G]]#1, %[[G]]#0
func.func @bias_gradient(%dy: tensor<2x4x16xf32>, %x: tensor<8x8xf32>) -> (tensor<16xf32>, tensor<16x8xf32>) {
  %db = tessel.reduce_sum %dy [0, 1] : tensor<2x4x16xf32> -> tensor<16xf32>
  %d2 = tessel.reshape %dy : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %dw = tessel.matmul %d2, %x transpose_lhs : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  return %db, %dw : tensor<16xf32>, tensor<16x8xf32>
}

// -----

// Rule (backward): a reduce_sum over only some rows (a position-embedding gradient) is not
// the bias gradient, and neither is a bf16 one.
// CHECK-LABEL: func.func @not_bias_gradient
// CHECK-NOT: tessel.matmul_epilogue
// CHECK: tessel.reduce_sum %{{.*}} [0]
// CHECK: tessel.matmul %{{.*}} transpose_lhs
func.func @not_bias_gradient(%dy: tensor<2x4x16xf32>, %x: tensor<8x8xf32>) -> (tensor<4x16xf32>, tensor<16x8xf32>) {
  %db = tessel.reduce_sum %dy [0] : tensor<2x4x16xf32> -> tensor<4x16xf32>
  %d2 = tessel.reshape %dy : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %dw = tessel.matmul %d2, %x transpose_lhs : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  return %db, %dw : tensor<4x16xf32>, tensor<16x8xf32>
}

// -----

// Rule: bf16 fuses the bias alone (one rounding either way); its gelu and residual stay.
// CHECK-LABEL: func.func @bf16
// CHECK-NEXT: %[[Z:.*]] = tessel.matmul_epilogue %{{.*}}, %{{.*}} transpose_rhs bias %{{.*}} : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: tessel.gelu %[[Z]]
func.func @bf16(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %p = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
  %z = tessel.add %p, %b : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
  %h = tessel.gelu %z : tensor<4x16xbf16>
  return %h : tensor<4x16xbf16>
}

// -----

// Wrong stage: the function is already fused.
// expected-error @+1 {{tessel-fuse-gemm-epilogues: @after_fuse is already fused (tessel.fused present); it runs after tessel-autodiff and before tessel-fuse}}
func.func @after_fuse(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = tessel.fused(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>, %b0: tensor<8xf32>):
    %1 = tessel.add %x0, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %2 = tessel.gelu %1 : tensor<4x8xf32>
    tessel.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}
