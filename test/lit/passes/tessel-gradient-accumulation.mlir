// --tessel-gradient-accumulation (passes/GradientAccumulation.cpp) with k = 4 microsteps:
// @accumulate_step (the no-sync microstep) adds each gradient into a zero-initialised
// "<name>:grad_accum" state and returns only the loss; @train_step (the last microstep)
// returns (grad_accum + g) * 0.25 and resets grad_accum to zeros. The explicit zero gradient
// of a parameter the loss ignores is left alone.
// RUN: tessel-opt %s -split-input-file -tessel-gradient-accumulation=microsteps=4 -verify-diagnostics | FileCheck %s
// RUN: not tessel-opt %s -split-input-file -tessel-gradient-accumulation=microsteps=1 2>&1 | FileCheck %s --check-prefix=ONE

// ONE: error: tessel-gradient-accumulation: microsteps must be >= 2, got 1

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "w"}, tensor<4xf32> {tessel.grad = "unused"})
// CHECK-NEXT: tessel.param "w"
// CHECK-NEXT: tessel.param "unused"
// CHECK-NEXT: %[[A:.*]] = tessel.param "w:grad_accum" state init zeros : tensor<16xf32>
// CHECK-NEXT: %[[L:.*]] = tessel.reduce_mean
// CHECK-NEXT: %[[G:.*]] = tessel.scale %{{.*}}, 2.0
// CHECK-NEXT: %[[Z:.*]] = tessel.constant 0.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = tessel.add %[[A]], %[[G]]
// CHECK-NEXT: %[[M:.*]] = tessel.scale %[[S]], 2.500000e-01
// CHECK-NEXT: %[[ZA:.*]] = tessel.constant 0.000000e+00 : tensor<16xf32>
// CHECK-NEXT: tessel.assign "w:grad_accum", %[[ZA]]
// CHECK-NEXT: return %[[L]], %[[M]], %[[Z]]
// CHECK-LABEL: func.func @accumulate_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"})
// CHECK: %[[A2:.*]] = tessel.param "w:grad_accum" state init zeros : tensor<16xf32>
// CHECK: %[[L2:.*]] = tessel.reduce_mean
// CHECK-NEXT: %[[G2:.*]] = tessel.scale %{{.*}}, 2.0
// CHECK-NEXT: tessel.constant
// CHECK-NEXT: %[[S2:.*]] = tessel.add %[[A2]], %[[G2]]
// CHECK-NEXT: tessel.assign "w:grad_accum", %[[S2]]
// CHECK-NEXT: return %[[L2]] : tensor<f32>
func.func @train_step(%x: tensor<16xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16xf32> {tessel.grad = "w"},
        tensor<4xf32> {tessel.grad = "unused"}) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<16xf32>
  %u = tessel.param "unused" init zeros : tensor<4xf32>
  %l = tessel.reduce_mean %x [0] : tensor<16xf32> -> tensor<f32>
  %g = tessel.scale %x, 2.0 : tensor<16xf32>
  %z = tessel.constant 0.0 : tensor<4xf32>
  return %l, %g, %z : tensor<f32>, tensor<16xf32>, tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 4) {tessel.axis_names = ["dp"]}
// Wrong stage: after the all-reduce; every microstep would synchronise.
// expected-error @+1 {{tessel-gradient-accumulation: @train_step already reduces its gradients (tessel.all_reduce_start present); it runs once, after tessel-autodiff and before tessel-gradient-all-reduce and tessel-optimizer}}
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

// Wrong stage: after the optimizer; every microstep would update the parameters.
// expected-error @+1 {{tessel-gradient-accumulation: @train_step already updates the parameters (tessel.global_norm, tessel.adamw or tessel.sgd present); it runs once, after tessel-autodiff and before tessel-gradient-all-reduce and tessel-optimizer}}
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

// Wrong stage: run twice.
func.func @accumulate_step(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// expected-error @+1 {{tessel-gradient-accumulation: @accumulate_step already exists (tessel-gradient-accumulation has run); it runs once, after tessel-autodiff and before tessel-gradient-all-reduce and tessel-optimizer}}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<8xf32> {tessel.grad = "w"}) {
  %w = tessel.param "w" {std = 1.0 : f64} : tensor<8xf32>
  %y = tessel.mul %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = tessel.reduce_mean %y [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 1.0 : tensor<8xf32>
  return %l, %g : tensor<f32>, tensor<8xf32>
}
