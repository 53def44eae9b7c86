// --tessel-partition (passes/Partition.cpp): global shapes become one rank's local shapes
// (tp = 2): split dimensions are halved, attention keeps half its heads, the replicated
// input of the column-parallel projection is read through tessel.replicate (its gradient is
// then summed over tp by autodiff), shardings stay on the split parameters only, and the
// function is marked tessel.partitioned.
// RUN: tessel-opt %s -split-input-file -tessel-partition -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32> {tessel.input = "x"}) -> (tensor<2x4x8xf32> {tessel.output = "y"}) attributes {tessel.partitioned}
// CHECK: %[[XR:.*]] = tessel.replicate %[[X]] on @mesh grid_axes = [0] : tensor<2x4x8xf32>
// CHECK: %[[WQ:.*]] = tessel.param "qkv.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []], blocks = [3, 1]>]} : tensor<12x8xf32>
// CHECK: %[[WP:.*]] = tessel.param "proj.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0]]>]} : tensor<8x4xf32>
// CHECK: %[[Q:.*]] = tessel.matmul %[[XR]], %[[WQ]] transpose_rhs : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
// CHECK: %[[A:.*]] = tessel.causal_attention %[[Q]] heads 1 : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK: %[[P:.*]] = tessel.matmul %[[A]], %[[WP]] transpose_rhs : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[R:.*]] = tessel.all_reduce %[[P]] reduce sum on @mesh grid_axes = [0] : tensor<2x4x8xf32>
// CHECK-NEXT: return %[[R]]
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x8xf32> {tessel.input = "x"}) -> (tensor<2x4x8xf32> {tessel.output = "y"}) {
  %wq = tessel.param "qkv.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []], blocks = [3, 1]>]} : tensor<24x8xf32>
  %wp = tessel.param "proj.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<8x8xf32>
  %q = tessel.matmul %x, %wq transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [], [0]], blocks = [1, 1, 3]>]} : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %a = tessel.causal_attention %q heads 2 {tessel.shardings = [#tessel.sharding<@mesh, [[], [], [0]]>]} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %p = tessel.matmul %a, %wp transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [], []], partial = [0]>]} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = tessel.all_reduce %p reduce sum on @mesh grid_axes = [0] {tessel.shardings = [#tessel.sharding<@mesh, [[], [], []]>]} : tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// -----

// A split the mesh does not divide: 6 rows over tp = 4.
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x6xf32> {tessel.output = "y"}) {
  // expected-error @+1 {{parameter 'w': dimension 0 has 6 elements, not divisible by the 4 ranks it is split over {tp, -} (uneven sizes are not supported yet)}}
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<6x8xf32>
  %y = tessel.matmul %x, %w transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}

// -----

// A reshard keeps its two layouts with the local shapes of each: the rows split over tp are
// gathered (the result is not split), and the gathered tensor feeds a column-parallel
// product, so it needs no tessel.replicate (the gather's transpose sums the per-rank
// gradients).
// CHECK-LABEL: func.func @forward
// CHECK: tessel.scale
// CHECK-NOT: tessel.replicate
// CHECK: tessel.reshard %{{.*}} : tensor<2x2x8xf32> from #tessel.sharding<@mesh, {{\[\[}}], [0], []]> to #tessel.sharding<@mesh, {{\[\[}}], [], []]> -> tensor<2x4x8xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x8xf32> {tessel.input = "x"}) -> (tensor<2x4x16xf32> {tessel.output = "y"}) {
  %w = tessel.param "fc.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<16x8xf32>
  %rows = tessel.param "rows" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0], []]>]} : tensor<2x4x8xf32>
  %s = tessel.scale %rows, 1.0 {tessel.shardings = [#tessel.sharding<@mesh, [[], [0], []]>]} : tensor<2x4x8xf32>
  %g = tessel.reshard %s : tensor<2x4x8xf32> from #tessel.sharding<@mesh, [[], [0], []]> to #tessel.sharding<@mesh, [[], [], []]> {tessel.shardings = [#tessel.sharding<@mesh, [[], [], []]>]} -> tensor<2x4x8xf32>
  %y = tessel.matmul %g, %w transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [], [0]]>]} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %r = tessel.reshard %y : tensor<2x4x16xf32> from #tessel.sharding<@mesh, [[], [], [0]]> to #tessel.sharding<@mesh, [[], [], []]> {tessel.shardings = [#tessel.sharding<@mesh, [[], [], []]>]} -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// Wrong stage: already partitioned.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
// expected-error @+1 {{tessel-partition: @forward already has local shapes (tessel.partitioned); it runs once, after tessel-insert-reshards and before tessel-reshard-to-collectives}}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) attributes {tessel.partitioned} {
  %s = tessel.scale %x, 2.0 {tessel.shardings = [#tessel.sharding<@mesh, [[], []]>]} : tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}
