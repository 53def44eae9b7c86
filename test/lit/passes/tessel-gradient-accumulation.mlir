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
