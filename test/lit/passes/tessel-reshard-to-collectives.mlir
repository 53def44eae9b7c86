// --tessel-reshard-to-collectives (passes/ReshardToCollectives.cpp), on local shapes after
// tessel-partition: a reshard that resolves a pending sum, the splits unchanged, becomes
// tessel.all_reduce sum over the resolved axes (here tp of a dp x tp mesh, the dp split
// kept); one split removed becomes tessel.all_gather along that dimension; a pending sum
// resolved into a split becomes tessel.reduce_scatter; a reshard to the layout the value
// already has disappears; any other change is an error naming both layouts.
// RUN: tessel-opt %s -split-input-file -tessel-reshard-to-collectives -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = tessel.matmul
// CHECK-NEXT: %[[R:.*]] = tessel.all_reduce %[[P]] reduce sum on @mesh grid_axes = [1] : tensor<2x8xf32>
// CHECK-NEXT: return %[[R]]
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @forward(%x: tensor<2x4xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) attributes {tessel.partitioned} {
  %wp = tessel.param "proj.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [1]]>]} : tensor<8x4xf32>
  %p = tessel.matmul %x, %wp transpose_rhs : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  %r = tessel.reshard %p : tensor<2x8xf32> from #tessel.sharding<@mesh, [[0], []], partial = [1]> to #tessel.sharding<@mesh, [[0], []]> -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// Sequence parallelism's pair: rows [B, T/2, C] gathered to [B, T, C]; a pending sum
// [B, T, C] scattered into rows [B, T/2, C].
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.*]] = tessel.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
// CHECK: %[[S:.*]] = tessel.reduce_scatter %{{.*}} reduce sum on @mesh grid_axes = [0] scatter_axis = 1 : tensor<2x8x8xf32> -> tensor<2x4x8xf32>
// CHECK: return %[[S]]
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x8xf32> {tessel.input = "x"}) -> (tensor<2x4x8xf32> {tessel.output = "y"}) attributes {tessel.partitioned} {
  %g = tessel.reshard %x : tensor<2x4x8xf32> from #tessel.sharding<@mesh, [[], [0], []]> to #tessel.sharding<@mesh, [[], [], []]> -> tensor<2x8x8xf32>
  %s = tessel.scale %g, 2.0 : tensor<2x8x8xf32>
  %r = tessel.reshard %s : tensor<2x8x8xf32> from #tessel.sharding<@mesh, [[], [], []], partial = [0]> to #tessel.sharding<@mesh, [[], [0], []]> -> tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @forward
// CHECK-NOT: tessel.reshard
// CHECK: return %{{.*}} : tensor<4x8xf32>
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<4x8xf32> {tessel.output = "y"}) attributes {tessel.partitioned} {
  %s = tessel.scale %x, 2.0 : tensor<4x8xf32>
  %r = tessel.reshard %s : tensor<4x8xf32> from #tessel.sharding<@mesh, [[], []]> to #tessel.sharding<@mesh, [[], []]> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Slicing a replicated tensor is not supported yet: the error names both layouts.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<4x4xf32> {tessel.output = "y"}) attributes {tessel.partitioned} {
  // expected-error @+1 {{this op needs its operand resharded from {-, -} to {-, tp}, which needs a collective this version cannot insert yet}}
  %r = tessel.reshard %x : tensor<4x8xf32> from #tessel.sharding<@mesh, [[], []]> to #tessel.sharding<@mesh, [[], [0]]> -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// Wrong stage: not partitioned yet.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
// expected-error @+1 {{tessel-reshard-to-collectives: @forward is not partitioned (no tessel.partitioned); it runs after tessel-partition and before tessel-autodiff}}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<4x8xf32> {tessel.output = "y"}) {
  return %x : tensor<4x8xf32>
}
