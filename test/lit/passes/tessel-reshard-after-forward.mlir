// --tessel-reshard-after-forward (passes/ReshardAfterForward.cpp) after the FSDP pipeline
// (fsdp = 2, B = 8 split into 4 rows per rank): two Linear layers without biases and the mean
// cross-entropy. The backward pass reads fc2.weight (the input gradient of fc2 is dy W2),
// so it is gathered again right before that product, and the backward product reads the
// new gather; fc1.weight's input gradient is not needed (x is an input), so the backward
// pass never reads it and it is gathered once. Each weight's gradient is reduce-scattered
// once.
// RUN: tessel-opt %s --tessel-shard-batch=parts=2 --tessel-propagate-sharding --tessel-insert-reshards \
// RUN:   --tessel-fully-shard=axis=fsdp --tessel-partition=batch-axes=fsdp --tessel-reshard-to-collectives \
// RUN:   --tessel-autodiff --tessel-gradient-all-reduce="axis=fsdp group=2" --tessel-optimizer=optimizer=sgd \
// RUN:   --canonicalize --cse --tessel-reshard-after-forward \
// RUN: | FileCheck %s --implicit-check-not=tessel.all_gather --implicit-check-not=tessel.reduce_scatter

// CHECK-LABEL: func.func @forward
// CHECK: tessel.all_gather
// CHECK: tessel.all_gather
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W1:.*]] = tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: tessel.matmul %{{.*}}, %[[W1]] transpose_rhs
// CHECK: %[[W2:.*]] = tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: tessel.matmul %{{.*}}, %[[W2]] transpose_rhs
// CHECK: tessel.cross_entropy_grad
// CHECK: %[[W2B:.*]] = tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: tessel.matmul %{{.*}}, %[[W2B]] :
// CHECK: tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [0] scatter_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: tessel.reduce_scatter %{{.*}} reduce avg on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK: tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<1xf32> -> tensor<2xf32>
// CHECK: return
shard.grid @mesh(shape = 2) {tessel.axis_names = ["fsdp"]}
func.func @forward(%x: tensor<8x4x16xf32> {tessel.input = "x"}, %t: tensor<8x4xi32> {tessel.input = "t"})
    -> (tensor<f32> {tessel.output = "loss"}) {
  %w1 = tessel.param "fc1.weight" {std = 2.000000e-02 : f64} : tensor<16x16xf32>
  %w2 = tessel.param "fc2.weight" {std = 2.000000e-02 : f64} : tensor<8x16xf32>
  %h = tessel.matmul %x, %w1 transpose_rhs : (tensor<8x4x16xf32>, tensor<16x16xf32>) -> tensor<8x4x16xf32>
  %g = tessel.gelu %h : tensor<8x4x16xf32>
  %y = tessel.matmul %g, %w2 transpose_rhs : (tensor<8x4x16xf32>, tensor<8x16xf32>) -> tensor<8x4x8xf32>
  %l = tessel.cross_entropy %y, %t : (tensor<8x4x8xf32>, tensor<8x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
