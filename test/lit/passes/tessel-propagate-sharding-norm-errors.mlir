// --tessel-propagate-sharding=sequence-axis=tp: a T that tp does not divide is an error at the
// RMS norm, as at a layer norm.
// RUN: tessel-opt %s -tessel-propagate-sharding=sequence-axis=tp -verify-diagnostics

shard.grid @mesh(shape = 2) {tessel.axis_names = ["tp"]}
func.func @forward(%x: tensor<2x3x8xf32> {tessel.input = "x"}) -> (tensor<2x3x8xf32> {tessel.output = "y"}) {
  %n = tessel.param "norm.w" init ones : tensor<8xf32>
  // expected-error @+1 {{sequence parallelism splits the sequence (T = 3) of this RMS norm's input over tp=2, which does not divide it}}
  %h = tessel.rms_norm %x, %n : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %h : tensor<2x3x8xf32>
}
