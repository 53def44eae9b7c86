// Negative tests of the attention ops (compiler/TesselAttentionOps.cpp): every error branch of
// the shape rules shapes::rope and shapes::groupedAttention (compiler/Shapes.cpp) and the ODS
// attribute constraints, each message quoted with the numbers it names.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics

func.func @rope_rank(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tessel.rope' op input must be [B, T, heads * D], got 8x64}}
  %y = tessel.rope %x heads 4 theta 1.0e4 : tensor<8x64xf32>
  return
}

// -----

func.func @rope_heads(%x: tensor<2x8x60xf32>) {
  // expected-error @+1 {{last dimension 60 of input 2x8x60 is not 8 heads of D > 0 channels}}
  %y = tessel.rope %x heads 8 theta 1.0e4 : tensor<2x8x60xf32>
  return
}

// -----

func.func @rope_odd_head_size(%x: tensor<2x8x36xf32>) {
  // expected-error @+1 {{head size D=9 (input 2x8x36, 4 heads) is odd; rotary pairs need an even D}}
  %y = tessel.rope %x heads 4 theta 1.0e4 : tensor<2x8x36xf32>
  return
}

// -----

func.func @rope_theta(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{theta must be finite and > 0, got 0}}
  %y = tessel.rope %x heads 4 theta 0.0 : tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_theta_negative(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{theta must be finite and > 0, got -10000}}
  %y = tessel.rope %x heads 4 theta -1.0e4 : tensor<2x8x64xf32>
  return
}

// -----

// theta 5e-324 with D = 64: theta^(-62/64) overflows to inf and the angle at t = 0 is
// 0 * inf = NaN (the kernels trained to a NaN loss).
func.func @rope_theta_frequency_inf(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'tessel.rope' op theta 5e-324 makes the inverse frequency theta^(-62/64) of head size D=64 inf; every theta^(-2i/D) must be finite and > 0 (take a larger theta)}}
  %y = tessel.rope %x heads 1 theta 4.9406564584124654e-324 : tensor<2x8x64xf32>
  return
}

// -----

// theta 1e-318 with D = 64: theta^(-62/64) is about 1.2e308 (finite), but 7 times it at t = 7
// is not.
func.func @rope_theta_angle_inf(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'tessel.rope' op theta 1e-318 makes the angle (T-1) * theta^(-62/64) at T=8 positions inf; every angle t * theta^(-2i/D) must be finite (take a larger theta)}}
  %y = tessel.rope %x heads 1 theta 1.0e-318 : tensor<2x8x64xf32>
  return
}

// -----

// The same theta is fine at T = 1 (only t = 0) and with D = 2 (the only frequency is 1), and
// the largest finite theta is fine at any D (theta^(-(D-2)/D) >= 1 / DBL_MAX > 0).
func.func @rope_theta_extremes_accepted(%x1: tensor<2x1x64xf32>, %x2: tensor<2x8x2xf32>, %x3: tensor<2x8x64xf32>) {
  %a = tessel.rope %x1 heads 1 theta 1.0e-318 : tensor<2x1x64xf32>
  %b = tessel.rope %x2 heads 1 theta 4.9406564584124654e-324 : tensor<2x8x2xf32>
  %c = tessel.rope %x3 heads 1 theta 1.7976931348623157e308 : tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_theta_inf(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'tessel.rope' op theta must be finite and > 0, got inf}}
  %y = tessel.rope %x heads 4 theta 0x7FF0000000000000 : tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_theta_nan(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'tessel.rope' op theta must be finite and > 0, got nan}}
  %y = tessel.rope %x heads 4 theta 0x7FF8000000000000 : tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_zero_heads(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %y = tessel.rope %x heads 0 theta 1.0e4 : tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_result_type(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "tessel.rope"(%x) {num_heads = 4 : i64, theta = 1.0e4 : f64} : (tensor<2x8x64xf32>) -> tensor<2x8x64xbf16>
  return
}

// -----

func.func @grouped_rank(%q: tensor<8x64xf32>, %k: tensor<8x32xf32>, %v: tensor<8x32xf32>) {
  // expected-error @+1 {{q, k and v must be [B, T, heads * D], got q 8x64, k 8x32, v 8x32}}
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<8x64xf32>, tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grouped_kv_not_dividing(%q: tensor<2x8x64xf32>, %k: tensor<2x8x48xf32>, %v: tensor<2x8x48xf32>) {
  // expected-error @+1 {{kv_heads=3 must be positive and divide heads=4}}
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 3 : (tensor<2x8x64xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @grouped_kv_shapes_differ(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{k 2x8x32 and v 2x8x16 must have one shape}}
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @grouped_batch(%q: tensor<2x8x64xf32>, %k: tensor<2x4x32xf32>, %v: tensor<2x4x32xf32>) {
  // expected-error @+1 {{q 2x8x64 and k 2x4x32 must agree in batch and sequence [B, T]}}
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @grouped_q_heads(%q: tensor<2x8x60xf32>, %k: tensor<2x8x30xf32>, %v: tensor<2x8x30xf32>) {
  // expected-error @+1 {{last dimension 60 of q 2x8x60 is not 8 heads of D > 0 channels}}
  %y = tessel.grouped_attention %q, %k, %v heads 8 kv_heads 4 : (tensor<2x8x60xf32>, tensor<2x8x30xf32>, tensor<2x8x30xf32>) -> tensor<2x8x60xf32>
  return
}

// -----

func.func @grouped_kv_width(%q: tensor<2x8x64xf32>, %k: tensor<2x8x64xf32>, %v: tensor<2x8x64xf32>) {
  // expected-error @+1 {{k 2x8x64 must have 2 kv heads of D=16 channels (q 2x8x64 has 4 heads), i.e. last dimension 32}}
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @grouped_result(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x32xf32>) {
  // expected-error @+1 {{result shape 2x8x32 does not match the expected 2x8x64}}
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @grouped_element_types(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xbf16>, %v: tensor<2x8x32xbf16>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>) -> tensor<2x8x64xf32>
  return
}
