// The vocab-parallel ops (compiler/TesselVocabParallelOps.td): the first RUN lines round-trip
// one shard's embedding and cross-entropy, with their backward ops, in the custom and the
// generic form; the following splits check that every verifier rejects each way its shapes,
// vocabulary or grid reference can be wrong.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @shard
// CHECK: %[[C:.*]] = tessel.mesh_coordinate on @mesh grid_axes = [1] : tensor<i32>
// CHECK: tessel.mesh_coordinate on @mesh grid_axes = [1] stride 128 : tensor<i32>
// CHECK: tessel.embedding_shard %{{.*}}, %{{.*}}, %[[C]] vocab 256 : (tensor<128x64xf32>, tensor<4x32xi32>, tensor<i32>) -> tensor<4x32x64xf32>
// CHECK: tessel.row_max %{{.*}} : tensor<4x32x128xf32> -> tensor<4x32xf32>
// CHECK: tessel.sum_exp %{{.*}}, %{{.*}} : (tensor<4x32x128xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
// CHECK: tessel.target_logit %{{.*}}, %{{.*}}, %[[C]] vocab 256 : (tensor<4x32x128xbf16>, tensor<4x32xi32>, tensor<i32>) -> tensor<4x32xf32>
// CHECK: tessel.cross_entropy_from_stats %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<f32>
// CHECK: tessel.embedding_shard_grad %{{.*}}, %[[C]], %{{.*}} : (tensor<4x32xi32>, tensor<i32>, tensor<4x32x64xf32>) -> tensor<128x64xf32>
// CHECK: tessel.sum_exp_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x32x128xf32>, tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32x128xf32>
// CHECK: tessel.target_logit_grad %{{.*}}, %[[C]], %{{.*}} : (tensor<4x32xi32>, tensor<i32>, tensor<4x32xf32>) -> tensor<4x32x128xbf16>
// CHECK: tessel.cross_entropy_from_stats_grad %{{.*}}, %{{.*}} : (tensor<4x32xf32>, tensor<f32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
// GENERIC: "tessel.mesh_coordinate"() <{grid = @mesh, grid_axes = array<i16: 1>, stride = 1 : i64}> : () -> tensor<i32>
// GENERIC: "tessel.embedding_shard"(%{{.*}}, %{{.*}}, %{{.*}}) <{vocab = 256 : i64}>
// GENERIC: "tessel.target_logit"(%{{.*}}, %{{.*}}, %{{.*}}) <{vocab = 256 : i64}>
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @shard(%w: tensor<128x64xf32>, %ids: tensor<4x32xi32>, %z: tensor<4x32x128xf32>,
                 %zb: tensor<4x32x128xbf16>, %de: tensor<4x32x64xf32>, %dl: tensor<f32>) {
  %c = tessel.mesh_coordinate on @mesh grid_axes = [1] : tensor<i32>
  %offset = tessel.mesh_coordinate on @mesh grid_axes = [1] stride 128 : tensor<i32>
  %e = tessel.embedding_shard %w, %ids, %c vocab 256 : (tensor<128x64xf32>, tensor<4x32xi32>, tensor<i32>) -> tensor<4x32x64xf32>
  %m = tessel.row_max %z : tensor<4x32x128xf32> -> tensor<4x32xf32>
  %s = tessel.sum_exp %z, %m : (tensor<4x32x128xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %zt = tessel.target_logit %zb, %ids, %c vocab 256 : (tensor<4x32x128xbf16>, tensor<4x32xi32>, tensor<i32>) -> tensor<4x32xf32>
  %l = tessel.cross_entropy_from_stats %m, %s, %zt : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<f32>
  %dw = tessel.embedding_shard_grad %ids, %c, %de : (tensor<4x32xi32>, tensor<i32>, tensor<4x32x64xf32>) -> tensor<128x64xf32>
  %dz = tessel.sum_exp_grad %z, %m, %s : (tensor<4x32x128xf32>, tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32x128xf32>
  %dzb = tessel.target_logit_grad %ids, %c, %zt : (tensor<4x32xi32>, tensor<i32>, tensor<4x32xf32>) -> tensor<4x32x128xbf16>
  %ds:2 = tessel.cross_entropy_from_stats_grad %s, %dl : (tensor<4x32xf32>, tensor<f32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
  return
}

// -----

func.func @coordinate_without_grid() {
  // expected-error @+1 {{grid @mesh is not a symbol of the module}}
  %c = tessel.mesh_coordinate on @mesh grid_axes = [0] : tensor<i32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @coordinate_axis_out_of_range() {
  // expected-error @+1 {{grid axis 1 is out of range for grid @mesh of rank 1}}
  %c = tessel.mesh_coordinate on @mesh grid_axes = [1] : tensor<i32>
  return
}

// -----

func.func @embedding_shard_larger_than_vocab(%w: tensor<128x64xf32>, %i: tensor<4xi32>, %o: tensor<i32>) {
  // expected-error @+1 {{table shard 128x64 must hold between 1 and vocab=100 rows}}
  %e = tessel.embedding_shard %w, %i, %o vocab 100 : (tensor<128x64xf32>, tensor<4xi32>, tensor<i32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @embedding_shard_result(%w: tensor<128x64xf32>, %i: tensor<4xi32>, %o: tensor<i32>) {
  // expected-error @+1 {{result shape 4x32 does not match the expected 4x64}}
  %e = tessel.embedding_shard %w, %i, %o vocab 256 : (tensor<128x64xf32>, tensor<4xi32>, tensor<i32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @embedding_shard_element_type(%w: tensor<128x64xf32>, %i: tensor<4xi32>, %o: tensor<i32>) {
  // expected-error @+1 {{result element type 'bf16' differs from the table's 'f32'}}
  %e = tessel.embedding_shard %w, %i, %o vocab 256 : (tensor<128x64xf32>, tensor<4xi32>, tensor<i32>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @embedding_shard_vector_offset(%w: tensor<128x64xf32>, %i: tensor<4xi32>, %o: tensor<1xi32>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of 32-bit signless integer values}}
  %e = tessel.embedding_shard %w, %i, %o vocab 256 : (tensor<128x64xf32>, tensor<4xi32>, tensor<1xi32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @embedding_shard_zero_vocab(%w: tensor<128x64xf32>, %i: tensor<4xi32>, %o: tensor<i32>) {
  // expected-error @+1 {{attribute 'vocab' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %e = tessel.embedding_shard %w, %i, %o vocab 0 : (tensor<128x64xf32>, tensor<4xi32>, tensor<i32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @row_max_result(%z: tensor<4x8xf32>) {
  // expected-error @+1 {{result 8 must be input 4x8 without its last dimension, i.e. 4}}
  %m = tessel.row_max %z : tensor<4x8xf32> -> tensor<8xf32>
  return
}

// -----

func.func @row_max_empty_rows(%z: tensor<4x0xf32>) {
  // expected-error @+1 {{input: input must be [..., Vl] with Vl >= 1, got 4x0}}
  %m = tessel.row_max %z : tensor<4x0xf32> -> tensor<4xf32>
  return
}

// -----

func.func @row_max_bf16_result(%z: tensor<4x8xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float values}}
  %m = tessel.row_max %z : tensor<4x8xf32> -> tensor<4xbf16>
  return
}

// -----

func.func @sum_exp_shift(%z: tensor<4x8xf32>, %m: tensor<8xf32>) {
  // expected-error @+1 {{shift 8 must be input 4x8 without its last dimension, i.e. 4}}
  %s = tessel.sum_exp %z, %m : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @target_logit_targets(%z: tensor<4x8xf32>, %t: tensor<5xi32>, %o: tensor<i32>) {
  // expected-error @+1 {{targets 5 must be logits 4x8 without its last dimension, i.e. 4}}
  %zt = tessel.target_logit %z, %t, %o vocab 16 : (tensor<4x8xf32>, tensor<5xi32>, tensor<i32>) -> tensor<4xf32>
  return
}

// -----

func.func @target_logit_vocab(%z: tensor<4x8xf32>, %t: tensor<4xi32>, %o: tensor<i32>) {
  // expected-error @+1 {{shard of 8 vocabulary entries exceeds vocab 6}}
  %zt = tessel.target_logit %z, %t, %o vocab 6 : (tensor<4x8xf32>, tensor<4xi32>, tensor<i32>) -> tensor<4xf32>
  return
}

// -----

func.func @from_stats_shapes(%m: tensor<4xf32>, %s: tensor<4xf32>, %t: tensor<3xf32>) {
  // expected-error @+1 {{max 4, sum 4 and target 3 must have one shape}}
  %l = tessel.cross_entropy_from_stats %m, %s, %t : (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<f32>
  return
}

// -----

func.func @from_stats_no_rows(%m: tensor<0xf32>) {
  // expected-error @+1 {{no rows to average over: the statistics are 0}}
  %l = tessel.cross_entropy_from_stats %m, %m, %m : (tensor<0xf32>, tensor<0xf32>, tensor<0xf32>) -> tensor<f32>
  return
}

// -----

func.func @embedding_shard_grad_shape(%i: tensor<4xi32>, %o: tensor<i32>, %g: tensor<4x32xf32>) {
  // expected-error @+1 {{grad 4x32 must be [indices..., C] = 4x64}}
  %d = tessel.embedding_shard_grad %i, %o, %g : (tensor<4xi32>, tensor<i32>, tensor<4x32xf32>) -> tensor<128x64xf32>
  return
}

// -----

func.func @sum_exp_grad_type(%z: tensor<4x8xf32>, %m: tensor<4xf32>) {
  // expected-error @+1 {{result type 'tensor<4x8xbf16>' must equal the input type 'tensor<4x8xf32>'}}
  %d = tessel.sum_exp_grad %z, %m, %m : (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @target_logit_grad_shape(%t: tensor<4xi32>, %o: tensor<i32>, %g: tensor<5xf32>) {
  // expected-error @+1 {{grad 5 must be result 4x8 without its last dimension, i.e. 4}}
  %d = tessel.target_logit_grad %t, %o, %g : (tensor<4xi32>, tensor<i32>, tensor<5xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @from_stats_grad_types(%s: tensor<4xf32>, %dl: tensor<f32>) {
  // expected-error @+1 {{dsum and dtarget must have the type of sum, 'tensor<4xf32>'}}
  %d:2 = tessel.cross_entropy_from_stats_grad %s, %dl : (tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<3xf32>)
  return
}
