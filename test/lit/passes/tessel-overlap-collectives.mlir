// --tessel-overlap-collectives (passes/OverlapCollectives.cpp). With overlap, each bucket's
// start moves to right after the op producing its last gradient (so the all-reduce runs
// while the rest of the backward pass computes) and each wait to right before the first op
// that needs a reduced value. Without overlap, every start and then every wait sit right
// before the first such op: all communication after the backward pass.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-overlap-collectives | FileCheck %s --check-prefix=ON
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-overlap-collectives=overlap=false | FileCheck %s --check-prefix=OFF

// ON-LABEL: func.func @train_step
// ON: %[[G3:.*]] = tessel.scale %{{.*}}, 4.0
// ON-NEXT: %[[G2:.*]] = tessel.scale %{{.*}}, 3.0
// ON-NEXT: %[[F0:.*]]:2 = tessel.all_reduce_start %[[G3]], %[[G2]] {{.*}} bucket 0
// ON-NEXT: %[[G1:.*]] = tessel.scale %{{.*}}, 2.0
// ON-NEXT: %[[G0:.*]] = tessel.scale %{{.*}}, 1.0
// ON-NEXT: %[[F1:.*]]:2 = tessel.all_reduce_start %[[G1]], %[[G0]] {{.*}} bucket 1
// ON-NEXT: %[[R0:.*]]:2 = tessel.all_reduce_wait %[[F0]]#0, %[[F0]]#1
// ON-NEXT: %[[N0:.*]] = tessel.global_norm %[[R0]]#0, %[[R0]]#1
// ON-NEXT: %[[R1:.*]]:2 = tessel.all_reduce_wait %[[F1]]#0, %[[F1]]#1
// ON-NEXT: tessel.global_norm %[[R1]]#0, %[[R1]]#1
// OFF-LABEL: func.func @train_step
// OFF: tessel.scale %{{.*}}, 4.0
// OFF-NEXT: tessel.scale %{{.*}}, 3.0
// OFF-NEXT: tessel.scale %{{.*}}, 2.0
// OFF-NEXT: tessel.scale %{{.*}}, 1.0
// OFF-NEXT: tessel.all_reduce_start {{.*}} bucket 0
// OFF-NEXT: tessel.all_reduce_start {{.*}} bucket 1
// OFF-NEXT: tessel.all_reduce_wait
// OFF-NEXT: tessel.all_reduce_wait
// OFF-NEXT: tessel.global_norm
// OFF-NEXT: tessel.global_norm
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @train_step(%x: tensor<4xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "a"}, tensor<f32> {tessel.output = "b"}) {
  %g3 = tessel.scale %x, 4.0 : tensor<4xf32>
  %g2 = tessel.scale %x, 3.0 : tensor<4xf32>
  %g1 = tessel.scale %x, 2.0 : tensor<4xf32>
  %g0 = tessel.scale %x, 1.0 : tensor<4xf32>
  %f0:2 = tessel.all_reduce_start %g3, %g2 reduce avg on @mesh grid_axes = [0] bucket 0 params ["d", "c"] : tensor<4xf32>, tensor<4xf32>
  %r0:2 = tessel.all_reduce_wait %f0#0, %f0#1 : tensor<4xf32>, tensor<4xf32>
  %f1:2 = tessel.all_reduce_start %g1, %g0 reduce avg on @mesh grid_axes = [0] bucket 1 params ["b", "a"] : tensor<4xf32>, tensor<4xf32>
  %r1:2 = tessel.all_reduce_wait %f1#0, %f1#1 : tensor<4xf32>, tensor<4xf32>
  %n0 = tessel.global_norm %r0#0, %r0#1 : tensor<4xf32>, tensor<4xf32>
  %n1 = tessel.global_norm %r1#0, %r1#1 : tensor<4xf32>, tensor<4xf32>
  return %n0, %n1 : tensor<f32>, tensor<f32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
// Wrong stage: already fused. Fusion groups ops by their place in the block, so the
// collectives must be placed before it.
// expected-error @+1 {{tessel-overlap-collectives: @after_fuse is already fused (tessel.fused present); it runs after tessel-bucket-gradients and before tessel-fuse}}
func.func @after_fuse(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = tessel.fused(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>, %b0: tensor<8xf32>):
    %1 = tessel.add %x0, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %2 = tessel.gelu %1 : tensor<4x8xf32>
    tessel.yield %2 : tensor<4x8xf32>
  }
  %f = tessel.all_reduce_start %0 reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4x8xf32>
  %r = tessel.all_reduce_wait %f : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
