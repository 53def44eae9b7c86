// --tessel-bucket-gradients (passes/BucketGradients.cpp): single-gradient all-reduces are
// packed, in the order the backward pass produces the gradients (not the return order), into
// buckets that close once they hold >= bucket-mb MiB; each bucket is one start/wait pair
// after the last single wait, in bucket (issue) order, listing its parameters.
// Sizes: g3 [4] 16 B, g2 [4x16] 256 B, g1 [16] 64 B, g0 [16x8] 512 B (produced in that order).
// Cap 0.0003 MiB = 314.6 bytes: {g3, g2} = 272 B < cap, + g1 = 336 B >= cap closes bucket 0;
// g0 alone is bucket 1. A cap of 1 MiB puts all four into one bucket; a cap of 1e-6 MiB
// (1 byte) gives one bucket per gradient.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-bucket-gradients=bucket-mb=0.0003 | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-bucket-gradients=bucket-mb=1 | FileCheck %s --check-prefix=ONE
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-bucket-gradients=bucket-mb=0.000001 | FileCheck %s --check-prefix=EACH
// RUN: not tessel-opt %s -split-input-file -tessel-bucket-gradients=bucket-mb=0 2>&1 | FileCheck %s --check-prefix=ZERO

// ZERO: error: tessel-bucket-gradients: bucket-mb must be > 0, got 0

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: tessel.all_reduce_start
// CHECK: %[[F0:.*]]:3 = tessel.all_reduce_start %[[G3:.*]], %[[G2:.*]], %[[G1:.*]] reduce avg on @mesh grid_axes = [0] bucket 0 params ["fc2.bias", "fc2.weight", "fc1.bias"] : tensor<4xf32>, tensor<4x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[R0:.*]]:3 = tessel.all_reduce_wait %[[F0]]#0, %[[F0]]#1, %[[F0]]#2
// CHECK-NEXT: %[[F1:.*]] = tessel.all_reduce_start %[[G0:.*]] reduce avg on @mesh grid_axes = [0] bucket 1 params ["fc1.weight"] : tensor<16x8xf32>
// CHECK-NEXT: %[[R1:.*]] = tessel.all_reduce_wait %[[F1]]
// CHECK-NEXT: return %{{.*}}, %[[R1]], %[[R0]]#2, %[[R0]]#1, %[[R0]]#0
// ONE: tessel.all_reduce_start {{.*}} bucket 0 params ["fc2.bias", "fc2.weight", "fc1.bias", "fc1.weight"]
// ONE-NOT: tessel.all_reduce_start
// EACH-COUNT-4: tessel.all_reduce_start {{.*}} params ["{{[^,]*}}"]
// EACH-NOT: tessel.all_reduce_start
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc1.weight"},
        tensor<16xf32> {tessel.grad = "fc1.bias"}, tensor<4x16xf32> {tessel.grad = "fc2.weight"},
        tensor<4xf32> {tessel.grad = "fc2.bias"}) {
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g3 = tessel.constant 4.0 : tensor<4xf32>
  %g2 = tessel.constant 3.0 : tensor<4x16xf32>
  %g1 = tessel.constant 2.0 : tensor<16xf32>
  %g0 = tessel.constant 1.0 : tensor<16x8xf32>
  %f0 = tessel.all_reduce_start %g0 reduce avg on @mesh grid_axes = [0] bucket 0 params ["fc1.weight"] : tensor<16x8xf32>
  %r0 = tessel.all_reduce_wait %f0 : tensor<16x8xf32>
  %f1 = tessel.all_reduce_start %g1 reduce avg on @mesh grid_axes = [0] bucket 1 params ["fc1.bias"] : tensor<16xf32>
  %r1 = tessel.all_reduce_wait %f1 : tensor<16xf32>
  %f2 = tessel.all_reduce_start %g2 reduce avg on @mesh grid_axes = [0] bucket 2 params ["fc2.weight"] : tensor<4x16xf32>
  %r2 = tessel.all_reduce_wait %f2 : tensor<4x16xf32>
  %f3 = tessel.all_reduce_start %g3 reduce avg on @mesh grid_axes = [0] bucket 3 params ["fc2.bias"] : tensor<4xf32>
  %r3 = tessel.all_reduce_wait %f3 : tensor<4xf32>
  return %l, %r0, %r1, %r2, %r3 : tensor<f32>, tensor<16x8xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
// Wrong stage: already bucketed (run twice). The single-gradient bucket would be renumbered
// from 0 again, next to the existing bucket 0.
// expected-error @+1 {{tessel-bucket-gradients: @bucketed already has gradient buckets (a tessel.all_reduce_start with several inputs); it runs once, after tessel-gradient-all-reduce and before tessel-overlap-collectives and tessel-fuse}}
func.func @bucketed(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<8xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) {
  %f0:2 = tessel.all_reduce_start %a, %b reduce avg on @mesh grid_axes = [0] bucket 0 params ["a", "b"] : tensor<4xf32>, tensor<4xf32>
  %r0:2 = tessel.all_reduce_wait %f0#0, %f0#1 : tensor<4xf32>, tensor<4xf32>
  %f1 = tessel.all_reduce_start %c reduce avg on @mesh grid_axes = [0] bucket 1 params ["c"] : tensor<8xf32>
  %r1 = tessel.all_reduce_wait %f1 : tensor<8xf32>
  return %r0#0, %r0#1, %r1 : tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
// Wrong stage: a reduced gradient is used (by %s) before the last collective, so a bucket's
// wait placed after its last gradient's would come after that use.
// expected-error @+1 {{tessel-bucket-gradients: @interleaved uses a reduced value before its last collective (the collectives are already interleaved with their users); it runs once, after tessel-gradient-all-reduce and before tessel-overlap-collectives and tessel-fuse}}
func.func @interleaved(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %f0 = tessel.all_reduce_start %a reduce avg on @mesh grid_axes = [0] bucket 0 params ["a"] : tensor<4xf32>
  %r0 = tessel.all_reduce_wait %f0 : tensor<4xf32>
  %s = tessel.scale %r0, 2.0 : tensor<4xf32>
  %f1 = tessel.all_reduce_start %b reduce avg on @mesh grid_axes = [0] bucket 1 params ["b"] : tensor<4xf32>
  %r1 = tessel.all_reduce_wait %f1 : tensor<4xf32>
  return %s, %r1 : tensor<4xf32>, tensor<4xf32>
}
