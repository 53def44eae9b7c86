// --tessel-reshard-to-collectives (passes/ReshardToCollectives.cpp): a reshard that resolves a
// pending sum, the splits unchanged, becomes tessel.all_reduce sum over the resolved axes
// (here tp of a dp x tp mesh, the dp split kept); a reshard to the sharding the value already
// has disappears; any other change is an error naming both layouts.
// RUN: tessel-opt %s -split-input-file -tessel-reshard-to-collectives -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = tessel.matmul
// CHECK-NEXT: %[[R:.*]] = tessel.all_reduce %[[P]] reduce sum on @mesh grid_axes = [1] {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<4x8xf32>
// CHECK-NEXT: return %[[R]]
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<4x8xf32> {tessel.output = "y"}) {
  %wp = tessel.param "proj.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [1]]>]} : tensor<8x8xf32>
  %p = tessel.matmul %x, %wp transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[0], []], partial = [1]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = tessel.reshard %p : tensor<4x8xf32> to #tessel.sharding<@mesh, [[0], []]> {tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]}
  return %r : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @forward
// CHECK-NOT: tessel.reshard
// CHECK: return %{{.*}} : tensor<4x8xf32>
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<4x8xf32> {tessel.output = "y"}) {
  %s = tessel.scale %x, 2.0 {tessel.shardings = [#tessel.sharding<@mesh, [[], []]>]} : tensor<4x8xf32>
  %r = tessel.reshard %s : tensor<4x8xf32> to #tessel.sharding<@mesh, [[], []]> {tessel.shardings = [#tessel.sharding<@mesh, [[], []]>]}
  return %r : tensor<4x8xf32>
}

// -----

// Gathering a split is not supported yet: the error names both layouts.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<4x8xf32> {tessel.output = "y"}) {
  %s = tessel.scale %x, 2.0 {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<4x8xf32>
  // expected-error @+1 {{this op needs its operand resharded from {-, tp} to {-, -}, which needs a collective this version cannot insert yet}}
  %r = tessel.reshard %s : tensor<4x8xf32> to #tessel.sharding<@mesh, [[], []]> {tessel.shardings = [#tessel.sharding<@mesh, [[], []]>]}
  return %r : tensor<4x8xf32>
}

// -----

// Wrong stage: already partitioned.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
// expected-error @+1 {{tessel-reshard-to-collectives: @forward has no shardings on its ops (run tessel-propagate-sharding first); it runs after tessel-insert-reshards and before tessel-partition}}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<4x8xf32> {tessel.output = "y"}) attributes {tessel.partitioned} {
  return %x : tensor<4x8xf32>
}
