// tessel-fuse on the Llama block's ops: the SwiGLU gate silu(gate) * up is one elementwise
// kernel (silu and mul are row-local), a residual add feeding rms_norm fuses as it does into
// layer_norm (the add yielded too, for the residual stream), and silu_grad joins the mul that
// feeds it in the backward pass.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(tessel-fuse))' | FileCheck %s

// CHECK-LABEL: func.func @swiglu
// CHECK: %[[F:.*]] = tessel.fused(%{{.*}}, %{{.*}})
// CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<4x32xf32>, %[[U:.*]]: tensor<4x32xf32>):
// CHECK-NEXT:   %[[S:.*]] = tessel.silu %[[G]]
// CHECK-NEXT:   %[[M:.*]] = tessel.mul %[[S]], %[[U]]
// CHECK-NEXT:   tessel.yield %[[M]] : tensor<4x32xf32>
// CHECK: return %[[F]]
func.func @swiglu(%g: tensor<4x32xf32>, %u: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %s = tessel.silu %g : tensor<4x32xf32>
  %m = tessel.mul %s, %u : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  return %m : tensor<4x32xf32>
}

// -----

// CHECK-LABEL: func.func @residual_rms_norm
// CHECK: %[[F:.*]]:2 = tessel.fused
// CHECK:   tessel.add
// CHECK-NEXT:   tessel.rms_norm
// CHECK-NEXT:   tessel.yield
// CHECK: tessel.matmul %[[F]]#1
// CHECK: return %[[F]]#0
func.func @residual_rms_norm(%x: tensor<2x4x8xf32>, %y: tensor<2x4x8xf32>, %w: tensor<8xf32>,
                             %p: tensor<8x8xf32>) -> tensor<2x4x8xf32> {
  %s = tessel.add %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = tessel.rms_norm %s, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h = tessel.matmul %n, %p transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %s : tensor<2x4x8xf32>
}

// -----

// The backward of swiglu: dup = dy * silu(gate), dgate = silu_grad(gate, dy * up). dy * up reads
// only arguments, so it starts a second group (a group grows from its operands' producers),
// which silu_grad joins: two kernels, each a chain of two.
// CHECK-LABEL: func.func @swiglu_grad
// CHECK: %[[DU:.*]] = tessel.fused
// CHECK:   tessel.silu
// CHECK-NEXT:   tessel.mul
// CHECK-NEXT:   tessel.yield
// CHECK: %[[DG:.*]] = tessel.fused
// CHECK:   tessel.mul
// CHECK-NEXT:   tessel.silu_grad
// CHECK-NEXT:   tessel.yield
// CHECK: return %[[DU]], %[[DG]]
func.func @swiglu_grad(%g: tensor<4x32xf32>, %u: tensor<4x32xf32>, %dy: tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %s = tessel.silu %g : tensor<4x32xf32>
  %du = tessel.mul %dy, %s : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %ds = tessel.mul %dy, %u : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %dg = tessel.silu_grad %g, %ds : tensor<4x32xf32>
  return %du, %dg : tensor<4x32xf32>, tensor<4x32xf32>
}
