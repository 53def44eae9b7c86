// Negative tests of silu, silu_grad, rms_norm and rms_norm_grad: every branch of their
// verifiers (compiler/TesselOps.cpp, TesselGradOps.cpp) and of the rms_norm shape rule
// (compiler/Shapes.cpp), and the ODS type constraints.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics

func.func @silu_shape(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.silu' op requires the same type for all operands and results}}
  %y = "tessel.silu"(%x) : (tensor<4x64xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @silu_integer(%x: tensor<4x64xi32>) {
  // expected-error @+1 {{'tessel.silu' op operand #0 must be}}
  %y = tessel.silu %x : tensor<4x64xi32>
  return
}

// -----

func.func @silu_grad_shape(%x: tensor<4x64xf32>, %dy: tensor<4x32xf32>) {
  // expected-error @+1 {{'tessel.silu_grad' op requires the same type for all operands and results}}
  %dx = "tessel.silu_grad"(%x, %dy) : (tensor<4x64xf32>, tensor<4x32xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @rms_norm_zero_epsilon(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 0}}
  %y = tessel.rms_norm %x, %w {epsilon = 0.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @rms_norm_scalar(%x: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op input must have rank >= 1, got a scalar}}
  %y = tessel.rms_norm %x, %w : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<4x32x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op weight must be [C] = 64 for input 4x32x64, got 32}}
  %y = tessel.rms_norm %x, %w : (tensor<4x32x64xf32>, tensor<32xf32>) -> tensor<4x32x64xf32>
  return
}

// -----

func.func @rms_norm_weight_rank(%x: tensor<4x64xf32>, %w: tensor<1x64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op weight must be [C] = 64 for input 4x64, got 1x64}}
  %y = tessel.rms_norm %x, %w : (tensor<4x64xf32>, tensor<1x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @rms_norm_result(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op result shape 4x32 does not match the expected 4x64}}
  %y = tessel.rms_norm %x, %w : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @rms_norm_element_types(%x: tensor<4x64xf32>, %w: tensor<64xbf16>) {
  // expected-error @+1 {{'tessel.rms_norm' op requires the same element type for all operands and results}}
  %y = tessel.rms_norm %x, %w : (tensor<4x64xf32>, tensor<64xbf16>) -> tensor<4x64xf32>
  return
}

// -----

func.func @rms_norm_grad_weight(%x: tensor<4x64xf32>, %w: tensor<32xf32>, %dy: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm_grad' op weight must be [C] = 64 for input 4x64, got 32}}
  %dx, %dw = tessel.rms_norm_grad %x, %w, %dy : (tensor<4x64xf32>, tensor<32xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<32xf32>)
  return
}

// -----

func.func @rms_norm_grad_dy(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %dy: tensor<8x64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm_grad' op grad 8x64 must have the input's shape 4x64}}
  %dx, %dw = tessel.rms_norm_grad %x, %w, %dy : (tensor<4x64xf32>, tensor<64xf32>, tensor<8x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @rms_norm_grad_results(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm_grad' op results must be shaped like the input and the weight}}
  %dx, %dw = tessel.rms_norm_grad %x, %w, %dy : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>)
  return
}

// -----

func.func @rms_norm_grad_epsilon(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm_grad' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got -1}}
  %dx, %dw = tessel.rms_norm_grad %x, %w, %dy {epsilon = -1.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)
  return
}
