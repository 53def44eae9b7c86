// The epsilon of every norm op (layer_norm, layer_norm_grad, rms_norm, rms_norm_grad) must lie
// in [2^-126, 1] (compiler/Shapes.h, normEpsilonError): each op is refused at both ends (a
// value that f32 flushes to a subnormal or to 0, a value above 1, inf, NaN) and accepts both
// bounds themselves.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics

func.func @layer_norm_bounds(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  %lo = tessel.layer_norm %x, %g, %g {epsilon = 1.1754943508222875e-38 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %hi = tessel.layer_norm %x, %g, %g {epsilon = 1.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @layer_norm_epsilon_below_f32_normal(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.layer_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 1e-60}}
  %y = tessel.layer_norm %x, %g, %g {epsilon = 1.0e-60 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @layer_norm_epsilon_just_below(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.layer_norm' op epsilon must be in [1.1754943508222875e-38, 1]}}
  %y = tessel.layer_norm %x, %g, %g {epsilon = 1.1754943508222874e-38 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @layer_norm_epsilon_above_one(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.layer_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 1.0000000000000002}}
  %y = tessel.layer_norm %x, %g, %g {epsilon = 1.0000000000000002 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @layer_norm_grad_bounds(%x: tensor<4x64xf32>, %g: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  %dx0, %dg0, %db0 = tessel.layer_norm_grad %x, %g, %dy {epsilon = 1.1754943508222875e-38 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %dx1, %dg1, %db1 = tessel.layer_norm_grad %x, %g, %dy {epsilon = 1.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @layer_norm_grad_epsilon_zero(%x: tensor<4x64xf32>, %g: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.layer_norm_grad' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 0}}
  %dx, %dg, %db = tessel.layer_norm_grad %x, %g, %dy {epsilon = 0.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @layer_norm_grad_epsilon_subnormal(%x: tensor<4x64xf32>, %g: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.layer_norm_grad' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 1e-40}}
  %dx, %dg, %db = tessel.layer_norm_grad %x, %g, %dy {epsilon = 1.0e-40 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @layer_norm_grad_epsilon_large(%x: tensor<4x64xf32>, %g: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.layer_norm_grad' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 1e+300}}
  %dx, %dg, %db = tessel.layer_norm_grad %x, %g, %dy {epsilon = 1.0e300 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @rms_norm_bounds(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  %lo = tessel.rms_norm %x, %w {epsilon = 1.1754943508222875e-38 : f64} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %hi = tessel.rms_norm %x, %w {epsilon = 1.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// 1e-60 became `EPS = 0.0f` in the kernels: an all-zero row gave 0 * inf = NaN.
func.func @rms_norm_epsilon_tiny(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 1e-60}}
  %y = tessel.rms_norm %x, %w {epsilon = 1.0e-60 : f64} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// inf (written as its f64 bits) became `EPS = INFINITY`: every output 0, a model that never trains.
func.func @rms_norm_epsilon_inf(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got inf}}
  %y = tessel.rms_norm %x, %w {epsilon = 0x7FF0000000000000 : f64} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @rms_norm_epsilon_nan(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got nan}}
  %y = tessel.rms_norm %x, %w {epsilon = 0x7FF8000000000000 : f64} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @rms_norm_epsilon_two(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 2}}
  %y = tessel.rms_norm %x, %w {epsilon = 2.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @rms_norm_grad_bounds(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  %dx0, %dw0 = tessel.rms_norm_grad %x, %w, %dy {epsilon = 1.1754943508222875e-38 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)
  %dx1, %dw1 = tessel.rms_norm_grad %x, %w, %dy {epsilon = 1.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @rms_norm_grad_epsilon_tiny(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm_grad' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 1e-300}}
  %dx, %dw = tessel.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-300 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @rms_norm_grad_epsilon_inf(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %dy: tensor<4x64xf32>) {
  // expected-error @+1 {{'tessel.rms_norm_grad' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got inf}}
  %dx, %dw = tessel.rms_norm_grad %x, %w, %dy {epsilon = 0x7FF0000000000000 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)
  return
}
