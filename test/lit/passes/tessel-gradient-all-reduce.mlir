// --tessel-gradient-all-reduce (passes/GradientAllReduce.cpp): every gradient result of
// @train_step is wrapped in its own all_reduce_start/wait pair (avg over the dp group) right
// before the return, which returns the reduced values; the loss stays local; autodiff's
// explicit zero gradient (a parameter the loss ignores) is not reduced. The collectives name
// the plan's mesh, `shard.grid @mesh`: created as a 1-D grid of the dp axis when the module has
// none, otherwise found by axis name.
// RUN: tessel-opt %s -split-input-file -tessel-gradient-all-reduce=group=4 -verify-diagnostics | FileCheck %s
// RUN: not tessel-opt %s -split-input-file -tessel-gradient-all-reduce=train-step=missing 2>&1 | FileCheck %s --check-prefix=MISSING

// MISSING: error: tessel-gradient-all-reduce: there is no @missing (run tessel-autodiff first); it runs once, after tessel-autodiff and before tessel-optimizer

// CHECK: shard.grid @mesh(shape = 4) {tessel.axis_names = ["dp"]}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"}, tensor<16xf32> {tessel.grad = "fc.bias"}, tensor<4xf32> {tessel.grad = "unused"})
// CHECK: %[[L:.*]] = tessel.reduce_sum
// CHECK-NEXT: %[[GW:.*]] = tessel.constant 2.000000e+00 : tensor<16x8xf32>
// CHECK-NEXT: %[[GB:.*]] = tessel.constant 3.000000e+00 : tensor<16xf32>
// CHECK-NEXT: %[[Z:.*]] = tessel.constant 0.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[FW:.*]] = tessel.all_reduce_start %[[GW]] reduce avg on @mesh grid_axes = [0] bucket 0 params ["fc.weight"] : tensor<16x8xf32>
// CHECK-NEXT: %[[RW:.*]] = tessel.all_reduce_wait %[[FW]] : tensor<16x8xf32>
// CHECK-NEXT: %[[FB:.*]] = tessel.all_reduce_start %[[GB]] reduce avg on @mesh grid_axes = [0] bucket 1 params ["fc.bias"] : tensor<16xf32>
// CHECK-NEXT: %[[RB:.*]] = tessel.all_reduce_wait %[[FB]] : tensor<16xf32>
// CHECK-NEXT: return %[[L]], %[[RW]], %[[RB]], %[[Z]]
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"},
        tensor<16xf32> {tessel.grad = "fc.bias"}, tensor<4xf32> {tessel.grad = "unused"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %u = tessel.param "unused" init zeros : tensor<4xf32>
  %l = tessel.reduce_sum %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %gw = tessel.constant 2.0 : tensor<16x8xf32>
  %gb = tessel.constant 3.0 : tensor<16xf32>
  %gu = tessel.constant 0.0 : tensor<4xf32>
  return %l, %gw, %gb, %gu : tensor<f32>, tensor<16x8xf32>, tensor<16xf32>, tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 4) {tessel.axis_names = ["dp"]}
// Wrong stage: run twice. The gradients are already reduced; a second run would reduce
// them again (doubling the collectives).
// expected-error @+1 {{tessel-gradient-all-reduce: @train_step already reduces its gradients (tessel.all_reduce_start present); it runs once, after tessel-autodiff and before tessel-optimizer}}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "fc.bias"}) {
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<16xf32>
  %f = tessel.all_reduce_start %g reduce avg on @mesh grid_axes = [0] bucket 0 params ["fc.bias"] : tensor<16xf32>
  %r = tessel.all_reduce_wait %f : tensor<16xf32>
  return %l, %r : tensor<f32>, tensor<16xf32>
}

// -----

// Wrong stage: after the optimizer, whose clipping must see reduced gradients.
// expected-error @+1 {{tessel-gradient-all-reduce: @train_step already updates the parameters (tessel.global_norm, tessel.adamw or tessel.sgd present); it runs once, after tessel-autodiff and before tessel-optimizer}}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"}, %lr: tensor<f32> {tessel.input = "lr"},
    %mom: tensor<f32> {tessel.input = "momentum"}, %wd: tensor<f32> {tessel.input = "weight_decay"},
    %t: tensor<f32> {tessel.input = "step"}, %max: tensor<f32> {tessel.input = "max_grad_norm"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<f32> {tessel.output = "grad_norm"}) {
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %buf = tessel.param "fc.bias:momentum_buffer" state init zeros : tensor<16xf32>
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<16xf32>
  %n = tessel.global_norm %g : tensor<16xf32>
  %c = tessel.clip_coefficient %n, %max : tensor<f32>
  %gc = tessel.mul %g, %c : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %p1, %b1 = tessel.sgd %b, %gc, %buf, %lr, %mom, %wd, %t : tensor<16xf32>
  tessel.assign "fc.bias", %p1 : tensor<16xf32>
  tessel.assign "fc.bias:momentum_buffer", %b1 : tensor<16xf32>
  return %l, %n : tensor<f32>, tensor<f32>
}

// -----

// An existing 2-D mesh (pp outermost): the gradients reduce over its dp axis, index 1, and
// no second grid is created.
// CHECK: shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["pp", "dp"]}
// CHECK-NOT: shard.grid
// CHECK: tessel.all_reduce_start %{{.*}} reduce avg on @mesh grid_axes = [1] bucket 0 params ["fc.bias"] : tensor<16xf32>
shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["pp", "dp"]}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "fc.bias"}) {
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<16xf32>
  return %l, %g : tensor<f32>, tensor<16xf32>
}

// -----

// The mesh's dp axis has another size than the pass's group.
// expected-error @+1 {{tessel-gradient-all-reduce: mesh axis 'dp' has 2 ranks, but the pass was asked for 4}}
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "fc.bias"}) {
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<16xf32>
  return %l, %g : tensor<f32>, tensor<16xf32>
}

// -----

// The mesh has no dp axis.
// expected-error @+1 {{tessel-gradient-all-reduce: @mesh has no axis 'dp'}}
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "fc.bias"}) {
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<16xf32>
  return %l, %g : tensor<f32>, tensor<16xf32>
}

// -----

// @mesh is taken by something that is not a grid.
// expected-error @+1 {{tessel-gradient-all-reduce: @mesh must be a shard.grid with tessel.axis_names}}
func.func private @mesh()
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "fc.bias"}) {
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 3.0 : tensor<16xf32>
  return %l, %g : tensor<f32>, tensor<16xf32>
}
