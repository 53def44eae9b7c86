// The partial-sum rule on a tensor-parallel GPT block (tensor-parallel-gpt-block.mlir's
// model, tp = 2): the column-parallel qkv and fc projections take their bias (and the fc its
// GELU) as GEMM epilogues; the row-parallel projections, whose products are pending partial
// sums all-reduced next, stay plain matmuls with the bias and residual added after the
// all-reduce, as do the backward input gradients of qkv and fc (all-reduced too). The weight
// gradients take their bias gradients (they do not change the product).
// RUN: tessel-opt %S/tensor-parallel-gpt-block.mlir --tessel-tensor-parallel --tessel-propagate-sharding \
// RUN:   --tessel-insert-reshards --tessel-partition --tessel-reshard-to-collectives --tessel-autodiff \
// RUN:   --tessel-fuse-gemm-epilogues | FileCheck %s

// CHECK-LABEL: func.func @train_step
// Column-parallel qkv (24 of 48 features per rank) with its bias shard.
// CHECK: tessel.matmul_epilogue %{{.*}}, %{{.*}} transpose_rhs bias %{{.*}} : (tensor<4x8x16xf32>, tensor<24x16xf32>, tensor<24xf32>) -> tensor<4x8x24xf32>
// Row-parallel attention projection: plain, all-reduced, then its bias and the residual.
// CHECK: %[[A:.*]] = tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8x8xf32>, tensor<16x8xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[AR:.*]] = tessel.all_reduce %[[A]] reduce sum
// CHECK-NEXT: tessel.add %[[AR]], %
// Column-parallel fc: bias, GELU and the pre-activation gelu_grad reads.
// CHECK: %[[H:.*]]:2 = tessel.matmul_epilogue %{{.*}}, %{{.*}} transpose_rhs bias %{{.*}} gelu pre_activation : (tensor<4x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> (tensor<4x8x32xf32>, tensor<4x8x32xf32>)
// Row-parallel MLP projection: plain, all-reduced first.
// CHECK-NEXT: %[[M:.*]] = tessel.matmul %[[H]]#0, %{{.*}} transpose_rhs : (tensor<4x8x32xf32>, tensor<16x32xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[MR:.*]] = tessel.all_reduce %[[M]] reduce sum
// CHECK-NEXT: tessel.add %[[MR]], %
// Backward: the fc's weight gradient with its bias gradient; its input gradient is a partial
// sum (all-reduced) and stays plain.
// CHECK: tessel.gelu_grad %[[H]]#1, %
// CHECK: %[[DX:.*]] = tessel.matmul %{{.*}}, %{{.*}} : (tensor<4x8x32xf32>, tensor<32x16xf32>) -> tensor<4x8x16xf32>
// CHECK: tessel.matmul_epilogue %{{.*}}, %{{.*}} transpose_lhs bias_gradient : (tensor<32x32xf32>, tensor<32x16xf32>) -> (tensor<32x16xf32>, tensor<32xf32>)
// CHECK-NEXT: tessel.all_reduce %[[DX]] reduce sum
// CHECK: return
