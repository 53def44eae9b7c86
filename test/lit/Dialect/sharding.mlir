// Shardings (#tessel.sharding, TesselDialect.td) and the synchronous collectives of a
// partitioned forward pass (tessel.all_reduce, tessel.replicate). The first RUN line
// round-trips the syntax; every case after the first split is an error the verifier must
// report.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics | tessel-opt -split-input-file | FileCheck %s

// CHECK: shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
// CHECK-LABEL: func.func @tp
// CHECK: tessel.param "qkv.weight" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}1], []], blocks = [3, 1]>]} : tensor<12x4xf32>
// CHECK: tessel.param "proj.weight" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [1]]>]} : tensor<4x4xf32>
// CHECK: tessel.replicate %{{.*}} on @mesh grid_axes = [1] : tensor<2x4xf32>
// CHECK: tessel.matmul {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], []], partial = [1]>]}
// CHECK: tessel.all_reduce %{{.*}} reduce sum on @mesh grid_axes = [1] : tensor<2x4xf32>
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @tp(%x: tensor<2x4xf32>, %h: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = tessel.param "qkv.weight" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[1], []], blocks = [3, 1]>]} : tensor<12x4xf32>
  %p = tessel.param "proj.weight" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [1]], blocks = [1, 1]>]} : tensor<4x4xf32>
  %x1 = tessel.replicate %x on @mesh grid_axes = [1] : tensor<2x4xf32>
  %y = tessel.matmul %h, %p transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], []], partial = [1]>]} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r = tessel.all_reduce %y reduce sum on @mesh grid_axes = [1] : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @twice() -> tensor<4x4xf32> {
  // expected-error @+1 {{grid axis 0 is used twice in one sharding}}
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], [0]]>]} : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @split_and_partial(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{grid axis 0 is used twice in one sharding}}
  %y = tessel.scale %x, 2.0 {tessel.shardings = [#tessel.sharding<@mesh, [[0]], partial = [0]>]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @rank() -> tensor<4x4xf32> {
  // expected-error @+1 {{sharding of result #0 has 1 dimensions, the result 2}}
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0]]>]} : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @count() -> tensor<4x4xf32> {
  // expected-error @+1 {{must hold one #tessel.sharding per result (1)}}
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = []} : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @blocks() -> tensor<4x4xf32> {
  // expected-error @+1 {{blocks has 1 entries for 2 dimensions}}
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []], blocks = [2]>]} : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @all_reduce_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{grid axis 1 is out of range for grid @mesh of rank 1}}
  %y = tessel.all_reduce %x reduce sum on @mesh grid_axes = [1] : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @replicate_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{grid @mesh is not a symbol of the module}}
  %y = tessel.replicate %x on @mesh grid_axes = [0] : tensor<4xf32>
  return %y : tensor<4xf32>
}
