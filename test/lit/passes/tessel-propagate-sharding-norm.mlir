// Sharding rules of the Llama block's ops (compiler/ShardingRules.h) under
// --tessel-propagate-sharding: silu is elementwise (a column-parallel gate's split on the
// hidden units passes through it into the mul with up, and on into the row-parallel down's
// pending sum); rms_norm keeps its input's rows split but never its normalised last dimension,
// and under sequence parallelism its rows (T) are split as a layer norm's, the split flowing
// back into the residual add that feeds it (a T that tp does not divide is an error at the
// RMS norm: tessel-propagate-sharding-norm-errors.mlir).
// RUN: tessel-opt %s -split-input-file -tessel-propagate-sharding -verify-diagnostics | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-propagate-sharding=sequence-axis=tp -verify-diagnostics | FileCheck %s --check-prefix=SEQ

// CHECK-LABEL: func.func @forward
// CHECK: tessel.rms_norm {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], []]>]}
// CHECK: tessel.matmul {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], [0]]>]}
// CHECK: tessel.matmul {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], [0]]>]}
// CHECK: tessel.silu {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], [0]]>]}
// CHECK: tessel.mul {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], [0]]>]}
// CHECK: tessel.matmul {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [], []], partial = [0]>]}
// SEQ-LABEL: func.func @forward
// SEQ: tessel.add {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0], []]>]}
// SEQ: tessel.rms_norm {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0], []]>]}
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x8xf32> {tessel.input = "x"}, %y: tensor<2x4x8xf32> {tessel.input = "y"}) -> (tensor<2x4x8xf32> {tessel.output = "out"}) {
  %n = tessel.param "norm.w" init ones : tensor<8xf32>
  %w1 = tessel.param "w1" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<16x8xf32>
  %w3 = tessel.param "w3" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<16x8xf32>
  %w2 = tessel.param "w2" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[], [0]]>]} : tensor<8x16xf32>
  %s = tessel.add %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %h = tessel.rms_norm %s, %n : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %g = tessel.matmul %h, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %u = tessel.matmul %h, %w3 transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %a = tessel.silu %g : tensor<2x4x16xf32>
  %p = tessel.mul %a, %u : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %d = tessel.matmul %p, %w2 transpose_rhs : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  return %d : tensor<2x4x8xf32>
}

// -----

// A split of the channels asked of rms_norm's input is refused: the norm's statistic needs
// the whole row, so the input (and the result) stay whole on the last dimension.
// CHECK-LABEL: func.func @forward
// CHECK: tessel.rms_norm {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], []]>]}
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<4x8xf32> {tessel.output = "y"}) {
  %w = tessel.param "w" {std = 0.02 : f64, tessel.shardings = [#tessel.sharding<@mesh, [[0], []]>]} : tensor<8x8xf32>
  %n = tessel.param "norm.w" init ones : tensor<8xf32>
  %c = tessel.matmul %x, %w transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = tessel.rms_norm %c, %n : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %h : tensor<4x8xf32>
}
