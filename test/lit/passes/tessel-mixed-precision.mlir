// --tessel-mixed-precision (passes/MixedPrecision.cpp) on a forward function: f32 master
// weights and f32 tensor inputs are read through one tessel.cast to bf16 (an embedding's
// table is not: it gathers f32 rows, cast by the first bf16 op that reads them); ops that
// read bf16 compute in bf16; cross_entropy's loss stays f32; returned values keep their
// declared types.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-mixed-precision | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-mixed-precision -tessel-autodiff | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[T:.*]]: tensor<4xi32>) -> (tensor<f32> {tessel.output = "loss"}, tensor<4x16xf32>)
// CHECK-SAME: attributes {tessel.mixed_precision}
// CHECK-NEXT: %[[X16:.*]] = tessel.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[W:.*]] = tessel.param "fc.weight"
// CHECK-NEXT: %[[W16:.*]] = tessel.cast %[[W]] : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK-NEXT: %[[B:.*]] = tessel.param "fc.bias"
// CHECK-NEXT: %[[B16:.*]] = tessel.cast %[[B]] : tensor<16xf32> -> tensor<16xbf16>
// CHECK-NEXT: %[[M:.*]] = tessel.matmul %[[X16]], %[[W16]] transpose_rhs : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[Y:.*]] = tessel.add %[[M]], %[[B16]] : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[G:.*]] = tessel.gelu %[[Y]] : tensor<4x16xbf16>
// CHECK-NEXT: %[[L:.*]] = tessel.cross_entropy %[[G]], %[[T]] : (tensor<4x16xbf16>, tensor<4xi32>) -> tensor<f32>
// CHECK-NEXT: %[[S:.*]] = tessel.scale %[[L]], 5.000000e-01 : tensor<f32>
// CHECK-NEXT: %[[G32:.*]] = tessel.cast %[[G]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: return %[[S]], %[[G32]] : tensor<f32>, tensor<4x16xf32>

// Parameter gradients come back through the casts' VJPs: f32, for the f32 optimizer.
// GRAD-LABEL: func.func @train_step
// GRAD-SAME: -> (tensor<f32> {tessel.output = "loss"}, tensor<16x8xf32> {tessel.grad = "fc.weight"}, tensor<16xf32> {tessel.grad = "fc.bias"})
// GRAD: tessel.cross_entropy_grad {{.*}} -> tensor<4x16xbf16>
// GRAD: tessel.gelu_grad {{.*}} : tensor<4x16xbf16>
// GRAD-DAG: tessel.cast {{.*}} : tensor<16x8xbf16> -> tensor<16x8xf32>
// GRAD-DAG: tessel.cast {{.*}} : tensor<16xbf16> -> tensor<16xf32>
func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi32>) -> (tensor<f32> {tessel.output = "loss"}, tensor<4x16xf32>) {
  %w = tessel.param "fc.weight" {std = 2.000000e-02 : f64} : tensor<16x8xf32>
  %b = tessel.param "fc.bias" init zeros : tensor<16xf32>
  %m = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %y = tessel.add %m, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %g = tessel.gelu %y : tensor<4x16xf32>
  %l = tessel.cross_entropy %g, %t : (tensor<4x16xf32>, tensor<4xi32>) -> tensor<f32>
  %s = tessel.scale %l, 5.000000e-01 : tensor<f32>
  return %s, %g : tensor<f32>, tensor<4x16xf32>
}

// -----

// The embedding gathers from the f32 table; the sum of the two embeddings is f32 until the
// layer norm (bf16 gamma) casts it; the tied head reads the table through its cast.
// CHECK-LABEL: func.func @forward
// CHECK: %[[WTE:.*]] = tessel.param "wte.weight"
// CHECK-NEXT: %[[WTE16:.*]] = tessel.cast %[[WTE]] : tensor<32x8xf32> -> tensor<32x8xbf16>
// CHECK: %[[E:.*]] = tessel.embedding %[[WTE]], %{{.*}} : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// CHECK: %[[E16:.*]] = tessel.cast %[[E]] : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
// CHECK-NEXT: tessel.layer_norm %[[E16]], {{.*}} -> tensor<2x4x8xbf16>
// CHECK: tessel.matmul {{.*}}, %[[WTE16]] transpose_rhs : (tensor<2x4x8xbf16>, tensor<32x8xbf16>) -> tensor<2x4x32xbf16>
func.func @forward(%tok: tensor<2x4xi32>) -> (tensor<f32> {tessel.output = "loss"}) {
  %wte = tessel.param "wte.weight" {std = 2.000000e-02 : f64} : tensor<32x8xf32>
  %g = tessel.param "ln.weight" init ones : tensor<8xf32>
  %be = tessel.param "ln.bias" init zeros : tensor<8xf32>
  %e = tessel.embedding %wte, %tok : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %n = tessel.layer_norm %e, %g, %be : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %lg = tessel.matmul %n, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %l = tessel.cross_entropy %lg, %tok : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A partitioned model (tp = 2): the row-parallel product's pending sum is all-reduced in f32
// (cast up before, the users cast the f32 sum down); the vocab-parallel cross-entropy reads
// bf16 logits and keeps its row statistics and loss in f32; the vocab-split table is read in
// f32 by embedding_shard, as by embedding.
// CHECK-LABEL: func.func @forward
// CHECK: tessel.embedding_shard %[[T:[^,]*]], {{.*}} : (tensor<16x8xf32>,
// CHECK: %[[P:.*]] = tessel.matmul {{.*}} -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[P32:.*]] = tessel.cast %[[P]] : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
// CHECK-NEXT: tessel.all_reduce %[[P32]] reduce sum on @mesh grid_axes = [0] : tensor<2x4x8xf32>
// CHECK: tessel.row_max %{{.*}} : tensor<2x4x16xbf16> -> tensor<2x4xf32>
// CHECK: tessel.sum_exp %{{.*}}, %{{.*}} : (tensor<2x4x16xbf16>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: tessel.cross_entropy_from_stats %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
// The backward all-reduce of the replicated product input's gradient is in f32 too.
// GRAD-LABEL: func.func @train_step
// GRAD: tessel.cross_entropy_from_stats_grad
// GRAD: tessel.cast %{{.*}} : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
// GRAD-NEXT: tessel.all_reduce %{{.*}} reduce sum on @mesh grid_axes = [0] : tensor<2x4x8xf32>
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%tok: tensor<2x4xi32>) -> (tensor<f32> {tessel.output = "loss"}) attributes {tessel.partitioned} {
  %wte = tessel.param "wte.weight" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<16x8xf32>
  %w = tessel.param "w" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<8x4xf32>
  %off = tessel.mesh_coordinate on @mesh grid_axes = [0] stride 16 : tensor<i32>
  %e = tessel.embedding_shard %wte, %tok, %off vocab 32 : (tensor<16x8xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<2x4x8xf32>
  %es = tessel.all_reduce %e reduce sum on @mesh grid_axes = [0] : tensor<2x4x8xf32>
  %ep = tessel.replicate %es on @mesh grid_axes = [0] : tensor<2x4x8xf32>
  %h = tessel.matmul %ep, %w : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %w2 = tessel.param "w2" {std = 2.000000e-02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<8x4xf32>
  %p = tessel.matmul %h, %w2 transpose_rhs : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %ps = tessel.all_reduce %p reduce sum on @mesh grid_axes = [0] : tensor<2x4x8xf32>
  %pr = tessel.replicate %ps on @mesh grid_axes = [0] : tensor<2x4x8xf32>
  %lg = tessel.matmul %pr, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %m = tessel.row_max %lg : tensor<2x4x16xf32> -> tensor<2x4xf32>
  %mm = tessel.all_reduce %m reduce max on @mesh grid_axes = [0] : tensor<2x4xf32>
  %s = tessel.sum_exp %lg, %mm : (tensor<2x4x16xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %ss = tessel.all_reduce %s reduce sum on @mesh grid_axes = [0] : tensor<2x4xf32>
  %zt = tessel.target_logit %lg, %tok, %off vocab 32 : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xf32>
  %zs = tessel.all_reduce %zt reduce sum on @mesh grid_axes = [0] : tensor<2x4xf32>
  %l = tessel.cross_entropy_from_stats %mm, %ss, %zs : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Wrong stage: after autodiff. Rewriting @forward alone would leave @train_step in f32.
// expected-error @+1 {{tessel-mixed-precision: @train_step already exists (tessel-autodiff has run); it runs once, before tessel-autodiff}}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
  %w = tessel.param "w" {std = 1.0 : f64} : tensor<8xf32>
  %y = tessel.mul %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = tessel.reduce_mean %y [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @train_step(%x: tensor<4x8xf32> {tessel.input = "x"})
    -> (tensor<f32> {tessel.output = "loss"}, tensor<8xf32> {tessel.grad = "w"}) {
  %w = tessel.param "w" {std = 1.0 : f64} : tensor<8xf32>
  %y = tessel.mul %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = tessel.reduce_mean %y [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = tessel.constant 1.0 : tensor<8xf32>
  return %l, %g : tensor<f32>, tensor<8xf32>
}

// -----

// Wrong stage: run twice.
// expected-error @+1 {{tessel-mixed-precision: @forward already computes in bf16 (tessel.mixed_precision); it runs once, before tessel-autodiff}}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) attributes {tessel.mixed_precision} {
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
