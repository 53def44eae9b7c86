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

// A width the mesh does not divide: 6 hidden units over tp = 4 are padded to 8 (2 per rank,
// the last rank's both padding), recorded in the parameters' shardings. Matmul and gelu keep
// the padding zero, so it is accepted.
// CHECK-LABEL: func.func @forward
// CHECK: tessel.param "fc.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []], padding = [2, 0]>]} : tensor<2x8xf32>
// CHECK: tessel.param "proj.w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0]], padding = [0, 2]>]} : tensor<8x2xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x2xf32>
// CHECK: tessel.gelu %{{.*}} : tensor<2x2xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x2xf32>, tensor<8x2xf32>) -> tensor<2x8xf32>
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x8xf32> {tessel.output = "y"}) {
  %w = tessel.param "fc.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<6x8xf32>
  %w2 = tessel.param "proj.w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<8x6xf32>
  %h = tessel.matmul %x, %w transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
  %g = tessel.gelu %h {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<2x6xf32>
  %p = tessel.matmul %g, %w2 transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], []], partial = [0]>]} : (tensor<2x6xf32>, tensor<8x6xf32>) -> tensor<2x8xf32>
  %r = tessel.all_reduce %p reduce sum on @mesh grid_axes = [0] {tessel.shardings = [#tessel.sharding<@mesh, [[], []]>]} : tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// The same width read by a softmax: its padding would enter the softmax's denominator, so
// the split is refused at the op, saying why.
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x6xf32> {tessel.output = "y"}) {
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<6x8xf32>
  %y = tessel.matmul %x, %w transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
  // expected-error @+1 {{tessel.softmax reads or makes dimension 1 of 6 elements split over 4 ranks, which do not divide it; padding it to 8 would put the padding into this op's result (only ops that keep zeros zero accept padding: matmul, add, sub, mul, scale, gelu, relu, cast, reduce_sum); choose a degree that divides 6}}
  %s = tessel.softmax %y {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<2x6xf32>
  return %s : tensor<2x6xf32>
}

// -----

// A broadcast addend (a replicated scalar) would write itself into the padding: refused.
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x6xf32> {tessel.output = "y"}) {
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<6x8xf32>
  %c = tessel.param "c" {std = 0.02 : f64} : tensor<f32>
  %y = tessel.matmul %x, %w transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
  // expected-error @+1 {{tessel.add reads or makes dimension 1 of 6 elements split over 4 ranks, which do not divide it; padding it to 8 would put the padding into this op's result (an addend that is not padded alike, e.g. broadcast, would fill the padding); choose a degree that divides 6}}
  %s = tessel.add %y, %c {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : (tensor<2x6xf32>, tensor<f32>) -> tensor<2x6xf32>
  return %s : tensor<2x6xf32>
}

// -----

// Blocks (a head's queries, keys or values) are never padded.
shard.grid @mesh(shape = 4) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x8xf32> {tessel.input = "x"}) -> (tensor<2x6xf32> {tessel.output = "y"}) {
  // expected-error @+1 {{parameter 'w': dimension 0 has 6 elements in 3 blocks, not divisible by the 4 ranks it is split over {tp x3 blocks, -}; a block (a head's queries, keys or values) cannot be padded, since one rank must hold each head whole}}
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []], blocks = [3, 1]>]} : tensor<6x8xf32>
  %y = tessel.matmul %x, %w transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [0]], blocks = [1, 3]>]} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}

// -----

// A vocabulary of 5 over tp = 2: the tied table is padded to 6 rows (3 per rank), the
// embedding becomes embedding_shard of the true vocabulary, and the cross-entropy reads its
// logits through mask_vocab_padding (-inf past the vocabulary) before the row statistics.
// CHECK-LABEL: func.func @forward
// CHECK: %[[WTE:.*]] = tessel.param "wte" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []], padding = [1, 0]>]} : tensor<3x8xf32>
// CHECK: tessel.embedding_shard %[[WTE]], %{{.*}}, %{{.*}} vocab 5 : (tensor<3x8xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<2x4x8xf32>
// CHECK: %[[Z:.*]] = tessel.matmul %{{.*}}, %[[WTE]] transpose_rhs : (tensor<2x4x8xf32>, tensor<3x8xf32>) -> tensor<2x4x3xf32>
// CHECK: %[[OFF:.*]] = tessel.mesh_coordinate on @mesh grid_axes = [0] stride 3
// CHECK: %[[ZM:.*]] = tessel.mask_vocab_padding %[[Z]], %[[OFF]] vocab 5 fill 0xFFF0000000000000 : (tensor<2x4x3xf32>, tensor<i32>) -> tensor<2x4x3xf32>
// CHECK: tessel.row_max %[[ZM]]
// CHECK: tessel.sum_exp %[[ZM]]
// CHECK: tessel.target_logit %[[ZM]], %{{.*}}, %[[OFF]] vocab 5
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%ids: tensor<2x4xi32> {tessel.input = "ids"}, %t: tensor<2x4xi32> {tessel.input = "targets"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %wte = tessel.param "wte" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<5x8xf32>
  %e = tessel.embedding %wte, %ids {tessel.shardings = [#tessel.sharding<@mesh, [[], [], []], partial = [0]>]} : (tensor<5x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %r = tessel.all_reduce %e reduce sum on @mesh grid_axes = [0] {tessel.shardings = [#tessel.sharding<@mesh, [[], [], []]>]} : tensor<2x4x8xf32>
  %z = tessel.matmul %r, %wte transpose_rhs {tessel.shardings = [#tessel.sharding<@mesh, [[], [], [0]]>]} : (tensor<2x4x8xf32>, tensor<5x8xf32>) -> tensor<2x4x5xf32>
  %l = tessel.cross_entropy %z, %t {tessel.shardings = [#tessel.sharding<@mesh, []>]} : (tensor<2x4x5xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
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
