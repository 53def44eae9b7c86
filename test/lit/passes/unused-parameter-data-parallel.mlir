// A parameter the loss never reaches, through the data-parallel training passes in their
// pipeline order (tessel-autodiff, tessel-gradient-all-reduce over dp = 2,
// tessel-bucket-gradients, tessel-optimizer): the remark at its declaration says what
// happens, and it happens. Its gradient is autodiff's explicit zero; no all-reduce and no
// bucket carries it (every rank compiles the same program, so the ranks' buckets agree and no
// rank waits for a gradient another never sends), and the optimizer leaves it untouched (no
// state, no update, no decay), as torch.optim skips a parameter whose .grad is None.
// RUN: tessel-opt %s -tessel-autodiff -tessel-gradient-all-reduce=group=2 -tessel-bucket-gradients=bucket-mb=1 -tessel-optimizer -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[W:.*]] = tessel.param "fc.weight"
// CHECK-NEXT: tessel.param "aux.weight"
// CHECK-NEXT: tessel.param "fc.weight:exp_avg" state
// CHECK-NEXT: tessel.param "fc.weight:exp_avg_sq" state
// CHECK-NOT: "aux.weight
// CHECK: %[[Z:.*]] = tessel.constant 0.000000e+00 : tensor<4x8xf32>
// CHECK-NEXT: %[[F:.*]] = tessel.all_reduce_start %{{.*}} reduce avg on @mesh grid_axes = [0] bucket 0 params ["fc.weight"] : tensor<16x8xf32>
// CHECK-NEXT: %[[G:.*]] = tessel.all_reduce_wait %[[F]]
// CHECK-NEXT: tessel.global_norm %[[G]], %[[Z]]
// CHECK-NOT: tessel.all_reduce
// CHECK: tessel.adamw %[[W]]
// CHECK-NOT: tessel.adamw
// CHECK-NOT: "aux.weight
// CHECK: return
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  // expected-remark @+1 {{parameter 'aux.weight' does not affect the loss; its gradient is zero, so it is not all-reduced and the optimizer leaves it as it is: no update, no weight decay, no optimizer state (as torch.optim skips a parameter whose .grad is None)}}
  %aux = tessel.param "aux.weight" {std = 2.000000e-02 : f64} : tensor<4x8xf32>
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %l = tessel.reduce_mean %y [0, 1] : tensor<4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
