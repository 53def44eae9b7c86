// --tessel-gradient-all-reduce (passes/GradientAllReduce.cpp): every gradient result of
// @train_step is wrapped in its own all_reduce_start/wait pair (avg over the dp group) right
// before the return, which returns the reduced values; the loss stays local; autodiff's
// explicit zero gradient (a parameter the loss ignores) is not reduced.
// RUN: tessel-opt %s -split-input-file -tessel-gradient-all-reduce=group=4 -verify-diagnostics | FileCheck %s
// RUN: not tessel-opt %s -split-input-file -tessel-gradient-all-reduce=train-step=missing 2>&1 | FileCheck %s --check-prefix=MISSING

// MISSING: error: tessel-gradient-all-reduce: no @missing (run tessel-autodiff first)

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"}, tensor<16xf32> {tessel.grad = "fc.bias"}, tensor<4xf32> {tessel.grad = "unused"})
// CHECK: %[[L:.*]] = tessel.reduce_sum
// CHECK-NEXT: %[[GW:.*]] = tessel.constant 2.000000e+00 : tensor<16x8xf32>
// CHECK-NEXT: %[[GB:.*]] = tessel.constant 3.000000e+00 : tensor<16xf32>
// CHECK-NEXT: %[[Z:.*]] = tessel.constant 0.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[FW:.*]] = tessel.all_reduce_start %[[GW]] reduce avg axis "dp" group 4 bucket 0 params ["fc.weight"] : tensor<16x8xf32>
// CHECK-NEXT: %[[RW:.*]] = tessel.all_reduce_wait %[[FW]] : tensor<16x8xf32>
// CHECK-NEXT: %[[FB:.*]] = tessel.all_reduce_start %[[GB]] reduce avg axis "dp" group 4 bucket 1 params ["fc.bias"] : tensor<16xf32>
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
