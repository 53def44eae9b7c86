// --tessel-propagate-sharding=sequence-axis=tp (sequence parallelism): a layer norm's rows
// (dimension 1, T) are split over tp, and the split flows back into the residual add that
// feeds it (a hint from its user) and on into the norm's output; a T that tp does not divide
// is an error at the layer norm.
// RUN: tessel-opt %s -split-input-file -tessel-propagate-sharding=sequence-axis=tp -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK: tessel.param "pos" {{.*}}tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}0], []]>]} : tensor<4x8xf32>
// CHECK: tessel.add {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0], []]>]}
// CHECK: tessel.layer_norm {{.*}} {tessel.shardings = [#tessel.sharding<@mesh, {{\[\[}}], [0], []]>]}
shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x4x8xf32> {tessel.input = "x"}) -> (tensor<2x4x8xf32> {tessel.output = "y"}) {
  %pos = tessel.param "pos" {std = 0.02 : f64} : tensor<4x8xf32>
  %g = tessel.param "ln.w" init ones : tensor<8xf32>
  %b = tessel.param "ln.b" init zeros : tensor<8xf32>
  %s = tessel.add %x, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %n = tessel.layer_norm %s, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %n : tensor<2x4x8xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x3x8xf32> {tessel.input = "x"}) -> (tensor<2x3x8xf32> {tessel.output = "y"}) {
  %g = tessel.param "ln.w" init ones : tensor<8xf32>
  %b = tessel.param "ln.b" init zeros : tensor<8xf32>
  // expected-error @+1 {{sequence parallelism splits the sequence (T = 3) of this layer norm's input over tp=2, which does not divide it (padding the sequence would put padded rows into attention and into the loss's mean)}}
  %n = tessel.layer_norm %x, %g, %b : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %n : tensor<2x3x8xf32>
}
