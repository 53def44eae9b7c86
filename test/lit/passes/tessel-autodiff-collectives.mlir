// --tessel-autodiff through the collectives: each collective's VJP is its transpose from
// compiler/VJP.cpp's table, so the backward holds, in reverse order, the transposed
// collective of every forward one:
//   all_gather <-> reduce_scatter sum (same dim), all_to_all <-> all_to_all with split and
//   concat swapped, all_reduce sum <-> identity (Megatron g), replicate <-> all_reduce sum
//   (Megatron f); the avg forms add a scale by 1/N.
// RUN: tessel-opt %s -split-input-file -tessel-autodiff -verify-diagnostics | FileCheck %s

// A gathered weight shard, replicated into a per-rank product, exchanged, reduce-scattered
// and all-reduced into the loss. The all_reduce sum's gradient is the seed's broadcast
// itself (no op between it and the all_gather that transposes the reduce_scatter).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<2x8xf32> {tessel.grad = "w"})
// CHECK: %[[WG:.*]] = tessel.all_gather %{{.*}} on @mesh_tp2 grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[WR:.*]] = tessel.replicate %[[WG]] on @mesh_tp2 grid_axes = [0] : tensor<4x8xf32>
// CHECK-NEXT: %[[M:.*]] = tessel.mul %[[X:.*]], %[[WR]]
// CHECK-NEXT: %[[T:.*]] = tessel.all_to_all %[[M]] on @mesh_tp2 grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[S:.*]] = tessel.reduce_scatter %[[T]] reduce sum on @mesh_tp2 grid_axes = [0] scatter_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[R:.*]] = tessel.all_reduce %[[S]] reduce sum on @mesh_tp2 grid_axes = [0] : tensor<4x4xf32>
// CHECK-NEXT: %[[L:.*]] = tessel.reduce_sum %[[R]]
// CHECK-NEXT: %[[SEED:.*]] = tessel.constant 1.000000e+00
// CHECK-NEXT: %[[DR:.*]] = tessel.broadcast %[[SEED]] [0, 1] : tensor<f32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[DT:.*]] = tessel.all_gather %[[DR]] on @mesh_tp2 grid_axes = [0] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[DM:.*]] = tessel.all_to_all %[[DT]] on @mesh_tp2 grid_axes = [0] split_axis = 0 concat_axis = 1 : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT: tessel.mul %[[DM]], %[[WR]]
// CHECK-NEXT: %[[DWR:.*]] = tessel.mul %[[DM]], %[[X]]
// CHECK-NEXT: %[[DWG:.*]] = tessel.all_reduce %[[DWR]] reduce sum on @mesh_tp2 grid_axes = [0] : tensor<4x8xf32>
// CHECK-NEXT: %[[DW:.*]] = tessel.reduce_scatter %[[DWG]] reduce sum on @mesh_tp2 grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: return %[[L]], %[[DW]]
shard.grid @mesh_tp2(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<2x8xf32>
  %wg = tessel.all_gather %w on @mesh_tp2 grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  %wr = tessel.replicate %wg on @mesh_tp2 grid_axes = [0] : tensor<4x8xf32>
  %m = tessel.mul %x, %wr : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = tessel.all_to_all %m on @mesh_tp2 grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<8x4xf32>
  %s = tessel.reduce_scatter %t reduce sum on @mesh_tp2 grid_axes = [0] scatter_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %r = tessel.all_reduce %s reduce sum on @mesh_tp2 grid_axes = [0] : tensor<4x4xf32>
  %l = tessel.reduce_sum %r [0, 1] : tensor<4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The averages on a 2x4 mesh: the all_reduce avg over both axes (8 ranks) scales by 1/8;
// the reduce_scatter avg over tp (4 ranks) becomes an all_gather, then a scale by 1/4.
// CHECK-LABEL: func.func @train_step
// CHECK: tessel.all_reduce %{{.*}} reduce avg on @mesh_dp2_tp4 grid_axes = [0, 1] : tensor<2x3xf32>
// CHECK: %[[DR:.*]] = tessel.broadcast
// CHECK-NEXT: %[[DS:.*]] = tessel.scale %[[DR]], 1.250000e-01 : tensor<2x3xf32>
// CHECK-NEXT: %[[G:.*]] = tessel.all_gather %[[DS]] on @mesh_dp2_tp4 grid_axes = [1] gather_axis = 0 : tensor<2x3xf32> -> tensor<8x3xf32>
// CHECK-NEXT: %[[DW:.*]] = tessel.scale %[[G]], 2.500000e-01 : tensor<8x3xf32>
// CHECK-NEXT: return %{{.*}}, %[[DW]]
shard.grid @mesh_dp2_tp4(shape = 2x4) {tessel.axis_names = ["dp", "tp"]}
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<8x3xf32>
  %s = tessel.reduce_scatter %w reduce avg on @mesh_dp2_tp4 grid_axes = [1] scatter_axis = 0 : tensor<8x3xf32> -> tensor<2x3xf32>
  %r = tessel.all_reduce %s reduce avg on @mesh_dp2_tp4 grid_axes = [0, 1] : tensor<2x3xf32>
  %l = tessel.reduce_sum %r [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A max has no transpose: the pass reports it at the op instead of a silent zero.
shard.grid @mesh_tp2(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward() -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<8x3xf32>
  // expected-error @+1 {{an all-reduce max has no gradient here (its result must not reach the loss through a differentiable path)}}
  %r = tessel.all_reduce %w reduce max on @mesh_tp2 grid_axes = [0] : tensor<8x3xf32>
  %l = tessel.reduce_sum %r [0, 1] : tensor<8x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
