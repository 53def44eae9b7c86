// Negative tests of the tessel dialect: every verifier (compiler/TesselOps.cpp), every
// error branch of the shape rules it uses (compiler/Shapes.cpp), and the ODS type and
// attribute constraints (compiler/TesselDialect.td, compiler/TesselOps.td). Each message
// is quoted with the shapes it names.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// param
//===----------------------------------------------------------------------===//

func.func @param_empty_name() {
  // expected-error @+1 {{'tessel.param' op parameter name must not be empty}}
  %p = tessel.param "" init ones : tensor<4xf32>
  return
}

// -----

// An init kind outside the enum is a parse error naming the allowed words.
func.func @param_bad_init() {
  // expected-error @+2 {{expected one of [normal, zeros, ones] for how the runtime initialises a parameter, got: uniform}}
  // expected-error @+1 {{failed to parse Tessel_InitKindAttr parameter 'value'}}
  %p = tessel.param "w" init uniform {std = 2.000000e-02 : f64} : tensor<4xf32>
  return
}

// -----

// The old string spelling is rejected: init is a typed enum attribute.
func.func @param_string_init() {
  // expected-error @+1 {{attribute 'init' failed to satisfy constraint: how the runtime initialises a parameter}}
  %p = tessel.param "w" {init = "zeros"} : tensor<4xf32>
  return
}

// -----

func.func @param_normal_without_std() {
  // expected-error @+1 {{normal init needs a std attribute}}
  %p = tessel.param "blocks.0.mlp.fc.weight" : tensor<256x64xf32>
  return
}

// -----

func.func @param_explicit_normal_without_std() {
  // expected-error @+1 {{normal init needs a std attribute}}
  %p = tessel.param "w" init normal : tensor<4xf32>
  return
}

// -----

func.func @param_negative_std() {
  // expected-error @+1 {{normal init needs std > 0, got -1.000000e+00}}
  %p = tessel.param "w" {std = -1.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @param_zero_std() {
  // expected-error @+1 {{normal init needs std > 0, got 0.000000e+00}}
  %p = tessel.param "w" {std = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @param_zeros_with_std() {
  // expected-error @+1 {{init zeros takes no std attribute}}
  %p = tessel.param "blocks.0.ln1.bias" init zeros {std = 2.000000e-02 : f64} : tensor<64xf32>
  return
}

// -----

func.func @param_ones_with_std() {
  // expected-error @+1 {{init ones takes no std attribute}}
  %p = tessel.param "blocks.0.ln1.weight" init ones {std = 1.0 : f64} : tensor<64xf32>
  return
}

// -----

func.func @param_duplicate_name() {
  // expected-note @+1 {{first declared here}}
  %a = tessel.param "blocks.0.ln1.weight" init ones : tensor<64xf32>
  // expected-error @+1 {{parameter name "blocks.0.ln1.weight" is already used}}
  %b = tessel.param "blocks.0.ln1.weight" init zeros : tensor<64xf32>
  return
}

// -----

func.func @param_f32_std() {
  // expected-error @+1 {{attribute 'std' failed to satisfy constraint: 64-bit float attribute}}
  %p = tessel.param "w" {std = 2.000000e-02 : f32} : tensor<4xf32>
  return
}

// -----

func.func @param_i32() {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %p = tessel.param "w" init zeros : tensor<4xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

func.func @matmul_rank1(%a: tensor<64xf32>, %b: tensor<64x16xf32>) {
  // expected-error @+1 {{operands must have rank >= 2, got lhs 64 and rhs 64x16}}
  %y = tessel.matmul %a, %b : (tensor<64xf32>, tensor<64x16xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @matmul_contracting(%x: tensor<4x32x64xf32>, %w: tensor<48x96xf32>) {
  // expected-error @+1 {{contracting dimensions differ: lhs 4x32x64 has K=64, rhs 48x96 (transposed) has K=96}}
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<4x32x64xf32>, tensor<48x96xf32>) -> tensor<4x32x48xf32>
  return
}

// -----

func.func @matmul_contracting_transpose_lhs(%a: tensor<4x64x32xf32>, %b: tensor<4x32x16xf32>) {
  // expected-error @+1 {{contracting dimensions differ: lhs 4x64x32 (transposed) has K=64, rhs 4x32x16 has K=32}}
  %y = tessel.matmul %a, %b transpose_lhs : (tensor<4x64x32xf32>, tensor<4x32x16xf32>) -> tensor<4x32x16xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x4xf32>, %b: tensor<3x4x4xf32>) {
  // expected-error @+1 {{batch dimensions differ: lhs 2x4x4 has batch 2, rhs 3x4x4 has batch 3 (a shared rhs must have rank 2)}}
  %y = tessel.matmul %a, %b : (tensor<2x4x4xf32>, tensor<3x4x4xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

// A batched rhs needs the batch dimensions of lhs, so a rank-2 lhs takes only a rank-2 rhs.
func.func @matmul_batched_rhs_unbatched_lhs(%a: tensor<3x4xf32>, %b: tensor<2x4x5xf32>) {
  // expected-error @+1 {{batch dimensions differ: lhs 3x4 has no batch dimensions, rhs 2x4x5 has batch 2 (a shared rhs must have rank 2)}}
  %y = tessel.matmul %a, %b : (tensor<3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @matmul_result(%x: tensor<4x32x64xf32>, %w: tensor<192x64xf32>) {
  // expected-error @+1 {{result shape 4x32x64 does not match the expected 4x32x192}}
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x64xf32>
  return
}

// -----

func.func @matmul_element_types(%x: tensor<4x64xf32>, %w: tensor<64x16xbf16>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %y = tessel.matmul %x, %w : (tensor<4x64xf32>, tensor<64x16xbf16>) -> tensor<4x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// add, sub, mul
//===----------------------------------------------------------------------===//

func.func @add_no_broadcast(%a: tensor<4x16xf32>, %b: tensor<4x24xf32>) {
  // expected-error @+1 {{shapes 4x16 and 4x24 do not broadcast: the shorter shape must equal the trailing dimensions of the longer one}}
  %y = tessel.add %a, %b : (tensor<4x16xf32>, tensor<4x24xf32>) -> tensor<4x16xf32>
  return
}

// -----

// No size-1 stretching: only missing leading dimensions broadcast.
func.func @sub_no_size1_stretch(%a: tensor<4x1xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{shapes 4x1 and 4x8 do not broadcast}}
  %y = tessel.sub %a, %b : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// A prefix is not a suffix: a [B] operand does not broadcast against [B, C].
func.func @mul_prefix_not_suffix(%a: tensor<4x64xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{shapes 4x64 and 4 do not broadcast}}
  %y = tessel.mul %a, %b : (tensor<4x64xf32>, tensor<4xf32>) -> tensor<4x64xf32>
  return
}

// -----

// The result has the longer shape, even when the longer operand is on the right.
func.func @mul_result(%a: tensor<32x64xf32>, %b: tensor<4x32x64xf32>) {
  // expected-error @+1 {{result shape 32x64 does not match the expected 4x32x64}}
  %y = tessel.mul %a, %b : (tensor<32x64xf32>, tensor<4x32x64xf32>) -> tensor<32x64xf32>
  return
}

// -----

func.func @add_element_types(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %y = tessel.add %a, %b : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @add_i32(%a: tensor<4xi32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %y = tessel.add %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// scale, gelu, relu
//===----------------------------------------------------------------------===//

// The custom form has one type; the generic form can state a different result type.
func.func @scale_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "tessel.scale"(%x) <{factor = 2.0 : f64}> : (tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @scale_f32_factor(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'factor' failed to satisfy constraint: 64-bit float attribute}}
  %y = "tessel.scale"(%x) <{factor = 2.0 : f32}> : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @gelu_i32(%x: tensor<4xi32>) {
  // expected-error @+1 {{'tessel.gelu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %y = tessel.gelu %x : tensor<4xi32>
  return
}

// -----

func.func @relu_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tessel.relu' op requires the same type for all operands and results}}
  %y = "tessel.relu"(%x) : (tensor<4xf32>) -> tensor<4xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Dynamic shapes are rejected
//===----------------------------------------------------------------------===//

func.func @gelu_dynamic(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<?x64xf32>'}}
  %y = tessel.gelu %x : tensor<?x64xf32>
  return
}

// -----

func.func @matmul_dynamic(%x: tensor<4x?xf32>, %w: tensor<64x16xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<4x?xf32>'}}
  %y = tessel.matmul %x, %w : (tensor<4x?xf32>, tensor<64x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @reshape_dynamic_result(%x: tensor<4x32xi32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 32-bit signless integer values, but got 'tensor<?xi32>'}}
  %y = tessel.reshape %x : tensor<4x32xi32> -> tensor<?xi32>
  return
}

// -----

func.func @param_dynamic() {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<?xf32>'}}
  %p = tessel.param "w" init zeros : tensor<?xf32>
  return
}

// -----

func.func @embedding_dynamic_indices(%t: tensor<256x64xf32>, %i: tensor<?xi32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer values, but got 'tensor<?xi32>'}}
  %e = tessel.embedding %t, %i : (tensor<256x64xf32>, tensor<?xi32>) -> tensor<4x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

func.func @layer_norm_zero_epsilon(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.layer_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got 0}}
  %y = tessel.layer_norm %x, %g, %g {epsilon = 0.0 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @layer_norm_negative_epsilon(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'tessel.layer_norm' op epsilon must be in [1.1754943508222875e-38, 1] (from f32's smallest normal number, so that the f32 kernels keep it, to 1), got -1e-05}}
  %y = tessel.layer_norm %x, %g, %g {epsilon = -1.0e-05 : f64} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @layer_norm_scalar(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'tessel.layer_norm' op input must have rank >= 1, got a scalar}}
  %y = tessel.layer_norm %x, %g, %g : (tensor<f32>, tensor<1xf32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

func.func @layer_norm_gamma(%x: tensor<4x32x64xf32>, %g: tensor<32xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{gamma must be [C] = 64 for input 4x32x64, got 32}}
  %y = tessel.layer_norm %x, %g, %b : (tensor<4x32x64xf32>, tensor<32xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  return
}

// -----

func.func @layer_norm_gamma_rank(%x: tensor<4x64xf32>, %g: tensor<1x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{gamma must be [C] = 64 for input 4x64, got 1x64}}
  %y = tessel.layer_norm %x, %g, %b : (tensor<4x64xf32>, tensor<1x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @layer_norm_beta(%x: tensor<4x32x64xf32>, %g: tensor<64xf32>, %b: tensor<4x32x64xf32>) {
  // expected-error @+1 {{beta must be [C] = 64 for input 4x32x64, got 4x32x64}}
  %y = tessel.layer_norm %x, %g, %b : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
  return
}

// -----

func.func @layer_norm_result(%x: tensor<4x32x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{result shape 128x64 does not match the expected 4x32x64}}
  %y = tessel.layer_norm %x, %g, %g : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<128x64xf32>
  return
}

// -----

func.func @layer_norm_element_types(%x: tensor<4x64xbf16>, %g: tensor<64xf32>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %y = tessel.layer_norm %x, %g, %g : (tensor<4x64xbf16>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

func.func @softmax_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'tessel.softmax' op input must have rank >= 1, got a scalar}}
  %y = tessel.softmax %x : tensor<f32>
  return
}

// -----

func.func @softmax_causal_not_square(%s: tensor<4x8x16xf32>) {
  // expected-error @+1 {{a causal softmax needs input [..., T, T] with the last two dimensions equal, got 4x8x16}}
  %p = tessel.softmax %s causal : tensor<4x8x16xf32>
  return
}

// -----

func.func @softmax_causal_rank1(%s: tensor<8xf32>) {
  // expected-error @+1 {{a causal softmax needs input [..., T, T] with the last two dimensions equal, got 8}}
  %p = tessel.softmax %s causal : tensor<8xf32>
  return
}

// -----

func.func @softmax_type(%s: tensor<8x8xf32>) {
  // expected-error @+1 {{'tessel.softmax' op requires the same type for all operands and results}}
  %p = "tessel.softmax"(%s) <{causal}> : (tensor<8x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

func.func @embedding_table_rank(%t: tensor<256xf32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{table must be [V, C], got 256}}
  %e = tessel.embedding %t, %i : (tensor<256xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @embedding_element_types(%t: tensor<256x64xf32>, %i: tensor<4x32xi32>) {
  // expected-error @+1 {{result element type 'bf16' differs from the table's 'f32'}}
  %e = tessel.embedding %t, %i : (tensor<256x64xf32>, tensor<4x32xi32>) -> tensor<4x32x64xbf16>
  return
}

// -----

func.func @embedding_result(%t: tensor<256x64xf32>, %i: tensor<4x32xi32>) {
  // expected-error @+1 {{result shape 4x32x256 does not match the expected 4x32x64}}
  %e = tessel.embedding %t, %i : (tensor<256x64xf32>, tensor<4x32xi32>) -> tensor<4x32x256xf32>
  return
}

// -----

func.func @embedding_f32_indices(%t: tensor<256x64xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer values, but got 'tensor<4xf32>'}}
  %e = tessel.embedding %t, %i : (tensor<256x64xf32>, tensor<4xf32>) -> tensor<4x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

func.func @cross_entropy_scalar_logits(%l: tensor<f32>, %t: tensor<i32>) {
  // expected-error @+1 {{logits must be [..., V], got a scalar}}
  %loss = tessel.cross_entropy %l, %t : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_targets(%l: tensor<4x32x256xf32>, %t: tensor<4x31xi32>) {
  // expected-error @+1 {{targets 4x31 must match logits 4x32x256 without the class dimension V=256, i.e. 4x32}}
  %loss = tessel.cross_entropy %l, %t : (tensor<4x32x256xf32>, tensor<4x31xi32>) -> tensor<f32>
  return
}

// -----

// Targets shaped like the logits (one-hot style) are not class indices.
func.func @cross_entropy_targets_with_class_dim(%l: tensor<128x256xf32>, %t: tensor<128x256xi32>) {
  // expected-error @+1 {{targets 128x256 must match logits 128x256 without the class dimension V=256, i.e. 128}}
  %loss = tessel.cross_entropy %l, %t : (tensor<128x256xf32>, tensor<128x256xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_f32_targets(%l: tensor<4x32x256xf32>, %t: tensor<4x32xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer values, but got 'tensor<4x32xf32>'}}
  %loss = tessel.cross_entropy %l, %t : (tensor<4x32x256xf32>, tensor<4x32xf32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_nonscalar_result(%l: tensor<4x32x256xf32>, %t: tensor<4x32xi32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float values, but got 'tensor<4x32xf32>'}}
  %loss = tessel.cross_entropy %l, %t : (tensor<4x32x256xf32>, tensor<4x32xi32>) -> tensor<4x32xf32>
  return
}

// -----

// The loss is f32 even for bf16 logits.
func.func @cross_entropy_bf16_result(%l: tensor<4x256xbf16>, %t: tensor<4xi32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float values, but got 'tensor<bf16>'}}
  %loss = tessel.cross_entropy %l, %t : (tensor<4x256xbf16>, tensor<4xi32>) -> tensor<bf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fused_classifier
//===----------------------------------------------------------------------===//

func.func @fused_classifier_targets(%l: tensor<4x32x256xf32>, %t: tensor<4x31xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{targets 4x31 must match logits 4x32x256 without the class dimension V=256, i.e. 4x32}}
  %loss, %dl = tessel.fused_classifier %l, %t, %d : (tensor<4x32x256xf32>, tensor<4x31xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x32x256xf32>)
  return
}

// -----

func.func @fused_classifier_dlogits_shape(%l: tensor<4x256xf32>, %t: tensor<4xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{dlogits type 'tensor<4x255xf32>' must equal the logits type 'tensor<4x256xf32>'}}
  %loss, %dl = tessel.fused_classifier %l, %t, %d : (tensor<4x256xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x255xf32>)
  return
}

// -----

// dlogits has the logits' element type: bf16 logits, bf16 gradient.
func.func @fused_classifier_dlogits_type(%l: tensor<4x256xbf16>, %t: tensor<4xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{dlogits type 'tensor<4x256xf32>' must equal the logits type 'tensor<4x256xbf16>'}}
  %loss, %dl = tessel.fused_classifier %l, %t, %d : (tensor<4x256xbf16>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x256xf32>)
  return
}

// -----

func.func @fused_classifier_vector_dloss(%l: tensor<4x256xf32>, %t: tensor<4xi32>, %d: tensor<4xf32>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of 32-bit float values, but got 'tensor<4xf32>'}}
  %loss, %dl = tessel.fused_classifier %l, %t, %d : (tensor<4x256xf32>, tensor<4xi32>, tensor<4xf32>) -> (tensor<f32>, tensor<4x256xf32>)
  return
}

// -----

func.func @fused_classifier_bf16_loss(%l: tensor<4x256xbf16>, %t: tensor<4xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float values, but got 'tensor<bf16>'}}
  %loss, %dl = tessel.fused_classifier %l, %t, %d : (tensor<4x256xbf16>, tensor<4xi32>, tensor<f32>) -> (tensor<bf16>, tensor<4x256xbf16>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// causal_attention
//===----------------------------------------------------------------------===//

func.func @causal_attention_rank(%qkv: tensor<32x192xf32>) {
  // expected-error @+1 {{qkv must be [B, T, 3C], got 32x192}}
  %y = tessel.causal_attention %qkv heads 4 : tensor<32x192xf32> -> tensor<32x64xf32>
  return
}

// -----

func.func @causal_attention_not_3c(%qkv: tensor<4x32x190xf32>) {
  // expected-error @+1 {{qkv 4x32x190 has last dimension 190, which is not 3C (not divisible by 3)}}
  %y = tessel.causal_attention %qkv heads 2 : tensor<4x32x190xf32> -> tensor<4x32x63xf32>
  return
}

// -----

func.func @causal_attention_heads(%qkv: tensor<4x32x144xf32>) {
  // expected-error @+1 {{channels C=48 (from qkv 4x32x144) are not divisible by 5 heads}}
  %y = tessel.causal_attention %qkv heads 5 : tensor<4x32x144xf32> -> tensor<4x32x48xf32>
  return
}

// -----

func.func @causal_attention_zero_heads(%qkv: tensor<4x32x192xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %y = tessel.causal_attention %qkv heads 0 : tensor<4x32x192xf32> -> tensor<4x32x64xf32>
  return
}

// -----

func.func @causal_attention_result(%qkv: tensor<4x32x192xf32>) {
  // expected-error @+1 {{result shape 4x32x192 does not match the expected 4x32x64}}
  %y = tessel.causal_attention %qkv heads 4 : tensor<4x32x192xf32> -> tensor<4x32x192xf32>
  return
}

// -----

func.func @causal_attention_element_types(%qkv: tensor<4x32x192xbf16>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %y = tessel.causal_attention %qkv heads 4 : tensor<4x32x192xbf16> -> tensor<4x32x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// reshape
//===----------------------------------------------------------------------===//

func.func @reshape_count(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{cannot reshape 4x32 (128 elements) to 127 (127 elements)}}
  %y = tessel.reshape %x : tensor<4x32xf32> -> tensor<127xf32>
  return
}

// -----

func.func @reshape_zero_dim(%x: tensor<0x4xf32>) {
  // expected-error @+1 {{target shape 4x0 has a non-positive dimension}}
  %y = tessel.reshape %x : tensor<0x4xf32> -> tensor<4x0xf32>
  return
}

// -----

func.func @reshape_element_types(%x: tensor<4x32xi32>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %y = tessel.reshape %x : tensor<4x32xi32> -> tensor<128xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

func.func @transpose_short_permutation(%x: tensor<2x3x5xf32>) {
  // expected-error @+1 {{[1, 0] is not a permutation of the 3 dimensions of 2x3x5}}
  %y = tessel.transpose %x [1, 0] : tensor<2x3x5xf32> -> tensor<3x2x5xf32>
  return
}

// -----

func.func @transpose_repeated(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{[0, 0] is not a permutation of the 2 dimensions of 2x3}}
  %y = tessel.transpose %x [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{[0, 2] is not a permutation of the 2 dimensions of 2x3}}
  %y = tessel.transpose %x [0, 2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @transpose_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{[-1, 0] is not a permutation of the 2 dimensions of 2x3}}
  %y = tessel.transpose %x [-1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<4x32x4x16xf32>) {
  // expected-error @+1 {{result shape 4x32x4x16 does not match the expected 4x4x32x16}}
  %y = tessel.transpose %x [0, 2, 1, 3] : tensor<4x32x4x16xf32> -> tensor<4x32x4x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// split
//===----------------------------------------------------------------------===//

func.func @split_axis_out_of_range(%x: tensor<4x32x192xf32>) {
  // expected-error @+1 {{axis 3 is out of range for 4x32x192}}
  %a, %b = tessel.split %x along 3 : tensor<4x32x192xf32> -> tensor<4x32x96xf32>, tensor<4x32x96xf32>
  return
}

// -----

func.func @split_negative_axis(%x: tensor<4x32x192xf32>) {
  // expected-error @+1 {{attribute 'axis' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %a, %b = tessel.split %x along -1 : tensor<4x32x192xf32> -> tensor<4x32x96xf32>, tensor<4x32x96xf32>
  return
}

// -----

func.func @split_not_divisible(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{dimension 1 of 4x10 (size 10) does not split into 3 equal parts}}
  %a, %b, %c = tessel.split %x along 1 : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x4xf32>
  return
}

// -----

// Every result is checked, not only the first.
func.func @split_result(%x: tensor<4x32x192xf32>) {
  // expected-error @+1 {{result shape 4x32x65 does not match the expected 4x32x64}}
  %q, %k, %v = tessel.split %x along 2 : tensor<4x32x192xf32> -> tensor<4x32x64xf32>, tensor<4x32x64xf32>, tensor<4x32x65xf32>
  return
}

// -----

func.func @split_element_types(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %a, %b = tessel.split %x along 1 : tensor<4x64xf32> -> tensor<4x32xf32>, tensor<4x32xbf16>
  return
}

// -----

// The trait SameOperandsAndResultElementType needs a result before SplitOp::verify runs.
func.func @split_no_results(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tessel.split' op expected 1 or more results}}
  "tessel.split"(%x) <{axis = 0 : i64}> : (tensor<4xf32>) -> ()
  return
}

// -----

//===----------------------------------------------------------------------===//
// concat
//===----------------------------------------------------------------------===//

func.func @concat_axis_out_of_range(%a: tensor<4x16xf32>, %b: tensor<4x48xf32>) {
  // expected-error @+1 {{axis 2 is out of range for 4x16}}
  %y = tessel.concat %a, %b along 2 : (tensor<4x16xf32>, tensor<4x48xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @concat_differ(%a: tensor<4x16xf32>, %b: tensor<5x48xf32>) {
  // expected-error @+1 {{inputs 4x16 and 5x48 differ outside axis 1}}
  %y = tessel.concat %a, %b along 1 : (tensor<4x16xf32>, tensor<5x48xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<4x16xf32>, %b: tensor<4x16x1xf32>) {
  // expected-error @+1 {{inputs 4x16 and 4x16x1 differ outside axis 0}}
  %y = tessel.concat %a, %b along 0 : (tensor<4x16xf32>, tensor<4x16x1xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @concat_result(%a: tensor<4x16xf32>, %b: tensor<4x48xf32>) {
  // expected-error @+1 {{result shape 4x60 does not match the expected 4x64}}
  %y = tessel.concat %a, %b along 1 : (tensor<4x16xf32>, tensor<4x48xf32>) -> tensor<4x60xf32>
  return
}

// -----

func.func @concat_element_types(%a: tensor<4x16xf32>, %b: tensor<4x48xbf16>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %y = tessel.concat %a, %b along 1 : (tensor<4x16xf32>, tensor<4x48xbf16>) -> tensor<4x64xf32>
  return
}

// -----

// The trait SameOperandsAndResultElementType needs an operand before ConcatOp::verify runs.
func.func @concat_no_inputs() {
  // expected-error @+1 {{'tessel.concat' op expected 1 or more operands, but found 0}}
  %y = "tessel.concat"() <{axis = 0 : i64}> : () -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// reduce_sum, reduce_mean
//===----------------------------------------------------------------------===//

func.func @reduce_sum_repeated_dim(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{'tessel.reduce_sum' op dims [1, 1] must be distinct and in [0, 2) for 4x32}}
  %y = tessel.reduce_sum %x [1, 1] : tensor<4x32xf32> -> tensor<4xf32>
  return
}

// -----

func.func @reduce_mean_dim_out_of_range(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{'tessel.reduce_mean' op dims [0, 2] must be distinct and in [0, 2) for 4x32}}
  %y = tessel.reduce_mean %x [0, 2] : tensor<4x32xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_mean_negative_dim(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{dims [-1] must be distinct and in [0, 2) for 4x32}}
  %y = tessel.reduce_mean %x [-1] : tensor<4x32xf32> -> tensor<4xf32>
  return
}

// -----

// keepdim = false: the reduced dimension is removed, not kept as size 1.
func.func @reduce_mean_keepdim(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{result shape 4x1 does not match the expected 4}}
  %y = tessel.reduce_mean %x [1] : tensor<4x32xf32> -> tensor<4x1xf32>
  return
}

// -----

func.func @reduce_sum_to_scalar_result(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{result shape 1 does not match the expected scalar}}
  %y = tessel.reduce_sum %x [0, 1] : tensor<4x32xf32> -> tensor<1xf32>
  return
}

// -----

func.func @reduce_sum_i32(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %y = tessel.reduce_sum %x [0] : tensor<4xi32> -> tensor<i32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// collectives
//===----------------------------------------------------------------------===//

// A reduction outside the enum is a parse error naming the allowed words, in the custom
// and in the generic form.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_bad_reduce(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected one of [sum, avg, max] for how a collective combines the ranks' values, got: mean}}
  // expected-error @+1 {{failed to parse Tessel_ReduceKindAttr parameter 'value'}}
  %f = tessel.all_reduce_start %x reduce mean on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_bad_reduce_generic(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected one of [sum, avg, max] for how a collective combines the ranks' values, got: prod}}
  // expected-error @+1 {{failed to parse Tessel_ReduceKindAttr parameter 'value'}}
  %f = "tessel.all_reduce_start"(%x) <{bucket = 0 : i64, grid = @mesh, grid_axes = array<i16: 0>, params = ["x"], reduce = #tessel<reduce_kind prod>}> : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// The old string spelling is rejected.
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_string_reduce(%x: tensor<4xf32>) {
  // expected-error @+1 {{Invalid attribute `reduce` in property conversion: "avg"}}
  %f = "tessel.all_reduce_start"(%x) <{bucket = 0 : i64, grid = @mesh, grid_axes = array<i16: 0>, params = ["x"], reduce = "avg"}> : (tensor<4xf32>) -> tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_never_waited(%x: tensor<4xf32>) {
  // expected-error @+1 {{bucket 0 is never waited for: its in-flight results need a tessel.all_reduce_wait}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_negative_bucket(%x: tensor<4xf32>) {
  // expected-error @+1 {{bucket must be >= 0, got -1}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket -1 params ["x"] : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_params_count(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{names 1 params for 2 inputs}}
  %f:2 = tessel.all_reduce_start %x, %y reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_no_inputs() {
  // expected-error @+1 {{needs at least one input}}
  "tessel.all_reduce_start"() <{bucket = 0 : i64, grid = @mesh, grid_axes = array<i16: 0>, params = [], reduce = #tessel<reduce_kind avg>}> : () -> ()
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_in_flight_used(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{in-flight result used by 'func.return'; only tessel.all_reduce_wait may use it}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>
  return %f : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_two_waits(%x: tensor<4xf32>) {
  // expected-error @+1 {{in-flight results go to more than one tessel.all_reduce_wait}}
  %f = tessel.all_reduce_start %x reduce avg on @mesh grid_axes = [0] bucket 0 params ["x"] : tensor<4xf32>
  %r = tessel.all_reduce_wait %f : tensor<4xf32>
  %s = tessel.all_reduce_wait %f : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_partial_wait(%x: tensor<4xf32>, %y: tensor<8xf32>) {
  %f:2 = tessel.all_reduce_start %x, %y reduce avg on @mesh grid_axes = [0] bucket 5 params ["x", "y"] : tensor<4xf32>, tensor<8xf32>
  // expected-error @+1 {{waits for 1 of the 2 tensors of bucket 5; it must wait for all of them}}
  %r = tessel.all_reduce_wait %f#0 : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_wait_order(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  %f:2 = tessel.all_reduce_start %x, %y reduce avg on @mesh grid_axes = [0] bucket 0 params ["x", "y"] : tensor<4xf32>, tensor<4xf32>
  // expected-error @+1 {{operand #0 is not result #0 of the same tessel.all_reduce_start}}
  %r:2 = tessel.all_reduce_wait %f#1, %f#0 : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @all_reduce_wait_not_start(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 is not a result of tessel.all_reduce_start}}
  %r = tessel.all_reduce_wait %x : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Discardable attributes of functions (TesselDialect.td)
//===----------------------------------------------------------------------===//

// A misspelt or undeclared tessel attribute is an error, wherever it appears.
// expected-error @+1 {{'tessel.inputs' is not a tessel attribute of an argument (arguments take tessel.input; results tessel.output and tessel.grad; functions tessel.batch_shards, tessel.mixed_precision, tessel.partitioned and tessel.pipeline; operations tessel.shardings, tessel.pp_chunk, tessel.pp_microbatch, tessel.pp_action and tessel.pp_group; params and all-gathers tessel.fsdp_unit; params tessel.pp_stages; shard.grid tessel.axis_names)}}
func.func @attr_unknown_argument(%x: tensor<4xf32> {tessel.inputs = "x"}) {
  return
}

// -----

// expected-error @+1 {{'tessel.input' is not a tessel attribute of a result}}
func.func @attr_input_on_result(%x: tensor<4xf32>) -> (tensor<4xf32> {tessel.input = "x"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'tessel.grad' is not a tessel attribute of a function}}
func.func @attr_grad_on_function() attributes {tessel.grad = "w"} {
  return
}

// -----

func.func @attr_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tessel.output' is not a tessel attribute of an operation}}
  %y = tessel.gelu %x {tessel.output = "y"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{'tessel.input' on an argument must be a non-empty string, got 3 : i64}}
func.func @attr_input_not_string(%x: tensor<4xf32> {tessel.input = 3}) {
  return
}

// -----

// expected-error @+1 {{'tessel.grad' on a result must be a non-empty string, got ""}}
func.func @attr_grad_empty(%x: tensor<4xf32>) -> (tensor<4xf32> {tessel.grad = ""}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'tessel.batch_shards' must be an i64 >= 1, got 0 : i64}}
func.func @attr_batch_shards_zero() attributes {tessel.batch_shards = 0 : i64} {
  return
}

// -----

// expected-error @+1 {{'tessel.mixed_precision' is a unit attribute, got "bf16"}}
func.func @attr_mixed_precision_string() attributes {tessel.mixed_precision = "bf16"} {
  return
}
