// Round-trip of every tessel op: parse, print, parse the printed form, print again. The
// second RUN line goes through the generic form (-mlir-print-op-generic) and must print
// the same custom form; the GENERIC prefix checks what that generic form looks like.
// RUN: tessel-opt %s -split-input-file | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -mlir-print-op-generic | tessel-opt -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

//===----------------------------------------------------------------------===//
// param
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @param_normal
// CHECK: %[[W:.*]] = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<192x64xf32>
// CHECK: return %[[W]]
// GENERIC-LABEL: sym_name = "param_normal"
// GENERIC: "tessel.param"() <{init = #tessel<init_kind normal>, name = "blocks.0.attn.qkv.weight", std = 2.000000e-02 : f64}> : () -> tensor<192x64xf32>
func.func @param_normal() -> tensor<192x64xf32> {
  %w = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<192x64xf32>
  return %w : tensor<192x64xf32>
}

// -----

// An explicit init normal is the default, so the printer elides it.
// CHECK-LABEL: func.func @param_normal_explicit_init
// CHECK: %[[W:.*]] = tessel.param "wte.weight" {std = 2.000000e-02 : f64} : tensor<256x64xf32>
// CHECK-NOT: init
// CHECK: return %[[W]]
func.func @param_normal_explicit_init() -> tensor<256x64xf32> {
  %w = tessel.param "wte.weight" init normal {std = 2.000000e-02 : f64} : tensor<256x64xf32>
  return %w : tensor<256x64xf32>
}

// -----

// CHECK-LABEL: func.func @param_zeros
// CHECK: %[[B:.*]] = tessel.param "blocks.0.ln1.bias" init zeros : tensor<64xf32>
// CHECK: return %[[B]]
// GENERIC-LABEL: sym_name = "param_zeros"
// GENERIC: "tessel.param"() <{init = #tessel<init_kind zeros>, name = "blocks.0.ln1.bias"}> : () -> tensor<64xf32>
func.func @param_zeros() -> tensor<64xf32> {
  %b = tessel.param "blocks.0.ln1.bias" init zeros : tensor<64xf32>
  return %b : tensor<64xf32>
}

// -----

// Optimizer state: the state flag, then the init kind.
// CHECK-LABEL: func.func @param_state_zeros
// CHECK: %[[M:.*]] = tessel.param "wte.weight:exp_avg" state init zeros : tensor<256x64xf32>
// CHECK: return %[[M]]
func.func @param_state_zeros() -> tensor<256x64xf32> {
  %m = tessel.param "wte.weight:exp_avg" state init zeros : tensor<256x64xf32>
  return %m : tensor<256x64xf32>
}

// -----

// CHECK-LABEL: func.func @param_ones_bf16
// CHECK: %[[G:.*]] = tessel.param "blocks.0.ln1.weight" init ones : tensor<64xbf16>
// CHECK: return %[[G]]
func.func @param_ones_bf16() -> tensor<64xbf16> {
  %g = tessel.param "blocks.0.ln1.weight" init ones : tensor<64xbf16>
  return %g : tensor<64xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// matmul: every transpose flag combination, batched and shared rank-2 rhs
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @matmul_batched_rhs
// CHECK-SAME: (%[[A:.*]]: tensor<4x32x64xf32>, %[[B:.*]]: tensor<4x64x16xf32>)
// CHECK: %[[Y:.*]] = tessel.matmul %[[A]], %[[B]] : (tensor<4x32x64xf32>, tensor<4x64x16xf32>) -> tensor<4x32x16xf32>
// CHECK: return %[[Y]]
func.func @matmul_batched_rhs(%a: tensor<4x32x64xf32>, %b: tensor<4x64x16xf32>) -> tensor<4x32x16xf32> {
  %y = tessel.matmul %a, %b : (tensor<4x32x64xf32>, tensor<4x64x16xf32>) -> tensor<4x32x16xf32>
  return %y : tensor<4x32x16xf32>
}

// -----

// CHECK-LABEL: func.func @matmul_shared_rhs
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>, %[[W:.*]]: tensor<64x128xf32>)
// CHECK: %[[Y:.*]] = tessel.matmul %[[X]], %[[W]] : (tensor<4x32x64xf32>, tensor<64x128xf32>) -> tensor<4x32x128xf32>
// CHECK: return %[[Y]]
func.func @matmul_shared_rhs(%x: tensor<4x32x64xf32>, %w: tensor<64x128xf32>) -> tensor<4x32x128xf32> {
  %y = tessel.matmul %x, %w : (tensor<4x32x64xf32>, tensor<64x128xf32>) -> tensor<4x32x128xf32>
  return %y : tensor<4x32x128xf32>
}

// -----

// CHECK-LABEL: func.func @matmul_rank2
// CHECK-SAME: (%[[A:.*]]: tensor<32x64xf32>, %[[B:.*]]: tensor<64x16xf32>)
// CHECK: %[[Y:.*]] = tessel.matmul %[[A]], %[[B]] : (tensor<32x64xf32>, tensor<64x16xf32>) -> tensor<32x16xf32>
// CHECK: return %[[Y]]
func.func @matmul_rank2(%a: tensor<32x64xf32>, %b: tensor<64x16xf32>) -> tensor<32x16xf32> {
  %y = tessel.matmul %a, %b : (tensor<32x64xf32>, tensor<64x16xf32>) -> tensor<32x16xf32>
  return %y : tensor<32x16xf32>
}

// -----

// lhs [b, K, M] with transpose_lhs.
// CHECK-LABEL: func.func @matmul_transpose_lhs
// CHECK-SAME: (%[[A:.*]]: tensor<4x64x32xf32>, %[[B:.*]]: tensor<4x64x16xf32>)
// CHECK: %[[Y:.*]] = tessel.matmul %[[A]], %[[B]] transpose_lhs : (tensor<4x64x32xf32>, tensor<4x64x16xf32>) -> tensor<4x32x16xf32>
// CHECK: return %[[Y]]
// GENERIC-LABEL: sym_name = "matmul_transpose_lhs"
// GENERIC: "tessel.matmul"(%{{.*}}, %{{.*}}) <{transpose_lhs}> : (tensor<4x64x32xf32>, tensor<4x64x16xf32>) -> tensor<4x32x16xf32>
func.func @matmul_transpose_lhs(%a: tensor<4x64x32xf32>, %b: tensor<4x64x16xf32>) -> tensor<4x32x16xf32> {
  %y = tessel.matmul %a, %b transpose_lhs : (tensor<4x64x32xf32>, tensor<4x64x16xf32>) -> tensor<4x32x16xf32>
  return %y : tensor<4x32x16xf32>
}

// -----

// A Linear layer: PyTorch-layout shared weight [out, in] with transpose_rhs.
// CHECK-LABEL: func.func @matmul_transpose_rhs
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>, %[[W:.*]]: tensor<192x64xf32>)
// CHECK: %[[Y:.*]] = tessel.matmul %[[X]], %[[W]] transpose_rhs : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x192xf32>
// CHECK: return %[[Y]]
func.func @matmul_transpose_rhs(%x: tensor<4x32x64xf32>, %w: tensor<192x64xf32>) -> tensor<4x32x192xf32> {
  %y = tessel.matmul %x, %w transpose_rhs : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x192xf32>
  return %y : tensor<4x32x192xf32>
}

// -----

// CHECK-LABEL: func.func @matmul_transpose_both
// CHECK-SAME: (%[[A:.*]]: tensor<2x7x5xf32>, %[[B:.*]]: tensor<2x33x7xf32>)
// CHECK: %[[Y:.*]] = tessel.matmul %[[A]], %[[B]] transpose_lhs transpose_rhs : (tensor<2x7x5xf32>, tensor<2x33x7xf32>) -> tensor<2x5x33xf32>
// CHECK: return %[[Y]]
// GENERIC-LABEL: sym_name = "matmul_transpose_both"
// GENERIC: "tessel.matmul"(%{{.*}}, %{{.*}}) <{transpose_lhs, transpose_rhs}>
func.func @matmul_transpose_both(%a: tensor<2x7x5xf32>, %b: tensor<2x33x7xf32>) -> tensor<2x5x33xf32> {
  %y = tessel.matmul %a, %b transpose_lhs transpose_rhs : (tensor<2x7x5xf32>, tensor<2x33x7xf32>) -> tensor<2x5x33xf32>
  return %y : tensor<2x5x33xf32>
}

// -----

// Attention scores q k^T on [B, NH, T, HS] in bf16: two batch dimensions.
// CHECK-LABEL: func.func @matmul_bf16_rank4
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xbf16>, %[[K:.*]]: tensor<2x4x8x16xbf16>)
// CHECK: %[[S:.*]] = tessel.matmul %[[Q]], %[[K]] transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
// CHECK: return %[[S]]
func.func @matmul_bf16_rank4(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16> {
  %s = tessel.matmul %q, %k transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
  return %s : tensor<2x4x8x8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// add, sub, mul: equal shapes and suffix broadcasting
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @binary_equal_shapes
// CHECK-SAME: (%[[A:.*]]: tensor<4x32x64xf32>, %[[B:.*]]: tensor<4x32x64xf32>)
// CHECK: %[[S:.*]] = tessel.add %[[A]], %[[B]] : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
// CHECK: %[[D:.*]] = tessel.sub %[[S]], %[[B]] : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
// CHECK: %[[P:.*]] = tessel.mul %[[D]], %[[A]] : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
// CHECK: return %[[P]]
func.func @binary_equal_shapes(%a: tensor<4x32x64xf32>, %b: tensor<4x32x64xf32>) -> tensor<4x32x64xf32> {
  %s = tessel.add %a, %b : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
  %d = tessel.sub %s, %b : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
  %p = tessel.mul %d, %a : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
  return %p : tensor<4x32x64xf32>
}

// -----

// A bias [C] on the right, [T, C] on the left, and a scalar (every shape ends with the
// empty shape).
// CHECK-LABEL: func.func @binary_suffix_broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>, %[[B:.*]]: tensor<64xf32>, %[[P:.*]]: tensor<32x64xf32>, %[[S:.*]]: tensor<f32>)
// CHECK: %[[Y0:.*]] = tessel.add %[[X]], %[[B]] : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
// CHECK: %[[Y1:.*]] = tessel.sub %[[P]], %[[Y0]] : (tensor<32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
// CHECK: %[[Y2:.*]] = tessel.mul %[[Y1]], %[[S]] : (tensor<4x32x64xf32>, tensor<f32>) -> tensor<4x32x64xf32>
// CHECK: return %[[Y2]]
func.func @binary_suffix_broadcast(%x: tensor<4x32x64xf32>, %b: tensor<64xf32>, %p: tensor<32x64xf32>, %s: tensor<f32>) -> tensor<4x32x64xf32> {
  %y0 = tessel.add %x, %b : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  %y1 = tessel.sub %p, %y0 : (tensor<32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
  %y2 = tessel.mul %y1, %s : (tensor<4x32x64xf32>, tensor<f32>) -> tensor<4x32x64xf32>
  return %y2 : tensor<4x32x64xf32>
}

// -----

// CHECK-LABEL: func.func @binary_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xbf16>, %[[B:.*]]: tensor<16xbf16>)
// CHECK: %[[Y:.*]] = tessel.add %[[X]], %[[B]] : (tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<8x16xbf16>
// CHECK: return %[[Y]]
func.func @binary_bf16(%x: tensor<8x16xbf16>, %b: tensor<16xbf16>) -> tensor<8x16xbf16> {
  %y = tessel.add %x, %b : (tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// scale, gelu, relu
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @scale
// CHECK-SAME: (%[[X:.*]]: tensor<4x4x32x32xf32>)
// CHECK: %[[Y:.*]] = tessel.scale %[[X]], 1.250000e-01 : tensor<4x4x32x32xf32>
// CHECK: return %[[Y]]
// GENERIC-LABEL: sym_name = "scale"
// GENERIC: "tessel.scale"(%{{.*}}) <{factor = 1.250000e-01 : f64}> : (tensor<4x4x32x32xf32>) -> tensor<4x4x32x32xf32>
func.func @scale(%x: tensor<4x4x32x32xf32>) -> tensor<4x4x32x32xf32> {
  %y = tessel.scale %x, 0.125 : tensor<4x4x32x32xf32>
  return %y : tensor<4x4x32x32xf32>
}

// -----

// CHECK-LABEL: func.func @scale_negative_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<8xbf16>)
// CHECK: %[[Y:.*]] = tessel.scale %[[X]], -2.000000e+00 : tensor<8xbf16>
// CHECK: return %[[Y]]
func.func @scale_negative_bf16(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %y = tessel.scale %x, -2.0 : tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// -----

// CHECK-LABEL: func.func @activations
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x256xf32>)
// CHECK: %[[G:.*]] = tessel.gelu %[[X]] : tensor<4x32x256xf32>
// CHECK: %[[R:.*]] = tessel.relu %[[G]] : tensor<4x32x256xf32>
// CHECK: return %[[R]]
func.func @activations(%x: tensor<4x32x256xf32>) -> tensor<4x32x256xf32> {
  %g = tessel.gelu %x : tensor<4x32x256xf32>
  %r = tessel.relu %g : tensor<4x32x256xf32>
  return %r : tensor<4x32x256xf32>
}

// -----

// CHECK-LABEL: func.func @activations_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xbf16>)
// CHECK: %[[R:.*]] = tessel.relu %[[X]] : tensor<2x8xbf16>
// CHECK: %[[G:.*]] = tessel.gelu %[[R]] : tensor<2x8xbf16>
// CHECK: return %[[G]]
func.func @activations_bf16(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %r = tessel.relu %x : tensor<2x8xbf16>
  %g = tessel.gelu %r : tensor<2x8xbf16>
  return %g : tensor<2x8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// layer_norm, softmax
//===----------------------------------------------------------------------===//

// The default epsilon (1e-5), whether implied or written, is elided by the printer.
// CHECK-LABEL: func.func @layer_norm_default_epsilon
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>, %[[G:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK: %[[Y0:.*]] = tessel.layer_norm %[[X]], %[[G]], %[[B]] : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
// CHECK: %[[Y1:.*]] = tessel.layer_norm %[[Y0]], %[[G]], %[[B]] : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
// CHECK: return %[[Y1]]
// GENERIC-LABEL: sym_name = "layer_norm_default_epsilon"
// GENERIC: "tessel.layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}) <{epsilon = 1.000000e-05 : f64}>
func.func @layer_norm_default_epsilon(%x: tensor<4x32x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<4x32x64xf32> {
  %y0 = tessel.layer_norm %x, %g, %b : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  %y1 = tessel.layer_norm %y0, %g, %b {epsilon = 1.000000e-05 : f64} : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  return %y1 : tensor<4x32x64xf32>
}

// -----

// A non-default epsilon is kept. 1e-6 has no exact binary value; the printer writes the
// shortest decimal that reads back to the same double.
// CHECK-LABEL: func.func @layer_norm_explicit_epsilon
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xbf16>, %[[G:.*]]: tensor<8xbf16>, %[[B:.*]]: tensor<8xbf16>)
// CHECK: %[[Y0:.*]] = tessel.layer_norm %[[X]], %[[G]], %[[B]] {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
// CHECK: %[[Y1:.*]] = tessel.layer_norm %[[Y0]], %[[G]], %[[B]] {epsilon = 1.250000e-01 : f64}
// CHECK: return %[[Y1]]
func.func @layer_norm_explicit_epsilon(%x: tensor<2x8xbf16>, %g: tensor<8xbf16>, %b: tensor<8xbf16>) -> tensor<2x8xbf16> {
  %y0 = tessel.layer_norm %x, %g, %b {epsilon = 1.0e-06 : f64} : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
  %y1 = tessel.layer_norm %y0, %g, %b {epsilon = 0.125 : f64} : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
  return %y1 : tensor<2x8xbf16>
}

// -----

// CHECK-LABEL: func.func @softmax_plain
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x256xf32>)
// CHECK: %[[P:.*]] = tessel.softmax %[[X]] : tensor<4x32x256xf32>
// CHECK: return %[[P]]
func.func @softmax_plain(%x: tensor<4x32x256xf32>) -> tensor<4x32x256xf32> {
  %p = tessel.softmax %x : tensor<4x32x256xf32>
  return %p : tensor<4x32x256xf32>
}

// -----

// CHECK-LABEL: func.func @softmax_causal
// CHECK-SAME: (%[[S:.*]]: tensor<4x4x32x32xf32>)
// CHECK: %[[P:.*]] = tessel.softmax %[[S]] causal : tensor<4x4x32x32xf32>
// CHECK: return %[[P]]
// GENERIC-LABEL: sym_name = "softmax_causal"
// GENERIC: "tessel.softmax"(%{{.*}}) <{causal}> : (tensor<4x4x32x32xf32>) -> tensor<4x4x32x32xf32>
func.func @softmax_causal(%s: tensor<4x4x32x32xf32>) -> tensor<4x4x32x32xf32> {
  %p = tessel.softmax %s causal : tensor<4x4x32x32xf32>
  return %p : tensor<4x4x32x32xf32>
}

// -----

// CHECK-LABEL: func.func @softmax_causal_bf16
// CHECK-SAME: (%[[S:.*]]: tensor<8x8xbf16>)
// CHECK: %[[P:.*]] = tessel.softmax %[[S]] causal : tensor<8x8xbf16>
// CHECK: return %[[P]]
func.func @softmax_causal_bf16(%s: tensor<8x8xbf16>) -> tensor<8x8xbf16> {
  %p = tessel.softmax %s causal : tensor<8x8xbf16>
  return %p : tensor<8x8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// embedding, cross_entropy
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[WTE:.*]]: tensor<256x64xf32>, %[[TOK:.*]]: tensor<4x32xi32>)
// CHECK: %[[E:.*]] = tessel.embedding %[[WTE]], %[[TOK]] : (tensor<256x64xf32>, tensor<4x32xi32>) -> tensor<4x32x64xf32>
// CHECK: return %[[E]]
func.func @embedding(%wte: tensor<256x64xf32>, %tokens: tensor<4x32xi32>) -> tensor<4x32x64xf32> {
  %e = tessel.embedding %wte, %tokens : (tensor<256x64xf32>, tensor<4x32xi32>) -> tensor<4x32x64xf32>
  return %e : tensor<4x32x64xf32>
}

// -----

// A 0-d index gathers a single row.
// CHECK-LABEL: func.func @embedding_bf16_scalar_index
// CHECK-SAME: (%[[WPE:.*]]: tensor<32x64xbf16>, %[[POS:.*]]: tensor<i32>)
// CHECK: %[[E:.*]] = tessel.embedding %[[WPE]], %[[POS]] : (tensor<32x64xbf16>, tensor<i32>) -> tensor<64xbf16>
// CHECK: return %[[E]]
func.func @embedding_bf16_scalar_index(%wpe: tensor<32x64xbf16>, %pos: tensor<i32>) -> tensor<64xbf16> {
  %e = tessel.embedding %wpe, %pos : (tensor<32x64xbf16>, tensor<i32>) -> tensor<64xbf16>
  return %e : tensor<64xbf16>
}

// -----

// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[LOGITS:.*]]: tensor<4x32x256xf32>, %[[TARGETS:.*]]: tensor<4x32xi32>)
// CHECK: %[[LOSS:.*]] = tessel.cross_entropy %[[LOGITS]], %[[TARGETS]] : (tensor<4x32x256xf32>, tensor<4x32xi32>) -> tensor<f32>
// CHECK: return %[[LOSS]]
func.func @cross_entropy(%logits: tensor<4x32x256xf32>, %targets: tensor<4x32xi32>) -> tensor<f32> {
  %loss = tessel.cross_entropy %logits, %targets : (tensor<4x32x256xf32>, tensor<4x32xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// bf16 logits still give an f32 loss.
// CHECK-LABEL: func.func @cross_entropy_bf16
// CHECK-SAME: (%[[LOGITS:.*]]: tensor<128x256xbf16>, %[[TARGETS:.*]]: tensor<128xi32>)
// CHECK: %[[LOSS:.*]] = tessel.cross_entropy %[[LOGITS]], %[[TARGETS]] : (tensor<128x256xbf16>, tensor<128xi32>) -> tensor<f32>
// CHECK: return %[[LOSS]]
func.func @cross_entropy_bf16(%logits: tensor<128x256xbf16>, %targets: tensor<128xi32>) -> tensor<f32> {
  %loss = tessel.cross_entropy %logits, %targets : (tensor<128x256xbf16>, tensor<128xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The loss and its logits gradient in one op: an f32 scalar and the logits type (bf16 too).
// CHECK-LABEL: func.func @fused_classifier
// CHECK-SAME: (%[[LOGITS:.*]]: tensor<4x32x256xf32>, %[[TARGETS:.*]]: tensor<4x32xi32>, %[[DLOSS:.*]]: tensor<f32>)
// CHECK: %[[LOSS:[^,]*]], %[[DL:[^ ]*]] = tessel.fused_classifier %[[LOGITS]], %[[TARGETS]], %[[DLOSS]] : (tensor<4x32x256xf32>, tensor<4x32xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x32x256xf32>)
// CHECK: return %[[LOSS]], %[[DL]]
// GENERIC-LABEL: sym_name = "fused_classifier"
// GENERIC: "tessel.fused_classifier"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x32x256xf32>, tensor<4x32xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x32x256xf32>)
func.func @fused_classifier(%logits: tensor<4x32x256xf32>, %targets: tensor<4x32xi32>, %dloss: tensor<f32>) -> (tensor<f32>, tensor<4x32x256xf32>) {
  %loss, %dlogits = tessel.fused_classifier %logits, %targets, %dloss : (tensor<4x32x256xf32>, tensor<4x32xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x32x256xf32>)
  return %loss, %dlogits : tensor<f32>, tensor<4x32x256xf32>
}

// -----

// CHECK-LABEL: func.func @fused_classifier_bf16
// CHECK: tessel.fused_classifier %{{.*}}, %{{.*}}, %{{.*}} : (tensor<128x256xbf16>, tensor<128xi32>, tensor<f32>) -> (tensor<f32>, tensor<128x256xbf16>)
func.func @fused_classifier_bf16(%logits: tensor<128x256xbf16>, %targets: tensor<128xi32>, %dloss: tensor<f32>) -> (tensor<f32>, tensor<128x256xbf16>) {
  %loss, %dlogits = tessel.fused_classifier %logits, %targets, %dloss : (tensor<128x256xbf16>, tensor<128xi32>, tensor<f32>) -> (tensor<f32>, tensor<128x256xbf16>)
  return %loss, %dlogits : tensor<f32>, tensor<128x256xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// causal_attention
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @causal_attention
// CHECK-SAME: (%[[QKV:.*]]: tensor<4x32x192xf32>)
// CHECK: %[[Y:.*]] = tessel.causal_attention %[[QKV]] heads 4 : tensor<4x32x192xf32> -> tensor<4x32x64xf32>
// CHECK: return %[[Y]]
// GENERIC-LABEL: sym_name = "causal_attention"
// GENERIC: "tessel.causal_attention"(%{{.*}}) <{num_heads = 4 : i64}> : (tensor<4x32x192xf32>) -> tensor<4x32x64xf32>
func.func @causal_attention(%qkv: tensor<4x32x192xf32>) -> tensor<4x32x64xf32> {
  %y = tessel.causal_attention %qkv heads 4 : tensor<4x32x192xf32> -> tensor<4x32x64xf32>
  return %y : tensor<4x32x64xf32>
}

// -----

// CHECK-LABEL: func.func @causal_attention_bf16_one_head
// CHECK-SAME: (%[[QKV:.*]]: tensor<2x8x48xbf16>)
// CHECK: %[[Y:.*]] = tessel.causal_attention %[[QKV]] heads 1 : tensor<2x8x48xbf16> -> tensor<2x8x16xbf16>
// CHECK: return %[[Y]]
func.func @causal_attention_bf16_one_head(%qkv: tensor<2x8x48xbf16>) -> tensor<2x8x16xbf16> {
  %y = tessel.causal_attention %qkv heads 1 : tensor<2x8x48xbf16> -> tensor<2x8x16xbf16>
  return %y : tensor<2x8x16xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// reshape, transpose, split, concat
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>, %[[T:.*]]: tensor<4x32xi32>)
// CHECK: %[[Y:.*]] = tessel.reshape %[[X]] : tensor<4x32x64xf32> -> tensor<128x64xf32>
// CHECK: %[[Z:.*]] = tessel.reshape %[[Y]] : tensor<128x64xf32> -> tensor<4x32x4x16xf32>
// CHECK: %[[U:.*]] = tessel.reshape %[[T]] : tensor<4x32xi32> -> tensor<128xi32>
// CHECK: return %[[Z]], %[[U]]
func.func @reshape(%x: tensor<4x32x64xf32>, %t: tensor<4x32xi32>) -> (tensor<4x32x4x16xf32>, tensor<128xi32>) {
  %y = tessel.reshape %x : tensor<4x32x64xf32> -> tensor<128x64xf32>
  %z = tessel.reshape %y : tensor<128x64xf32> -> tensor<4x32x4x16xf32>
  %u = tessel.reshape %t : tensor<4x32xi32> -> tensor<128xi32>
  return %z, %u : tensor<4x32x4x16xf32>, tensor<128xi32>
}

// -----

// CHECK-LABEL: func.func @reshape_to_scalar_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<1x1xbf16>)
// CHECK: %[[Y:.*]] = tessel.reshape %[[X]] : tensor<1x1xbf16> -> tensor<bf16>
// CHECK: return %[[Y]]
func.func @reshape_to_scalar_bf16(%x: tensor<1x1xbf16>) -> tensor<bf16> {
  %y = tessel.reshape %x : tensor<1x1xbf16> -> tensor<bf16>
  return %y : tensor<bf16>
}

// -----

// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x4x16xf32>, %[[Y:.*]]: tensor<2x3x5xbf16>)
// CHECK: %[[A:.*]] = tessel.transpose %[[X]] [0, 2, 1, 3] : tensor<4x32x4x16xf32> -> tensor<4x4x32x16xf32>
// CHECK: %[[B:.*]] = tessel.transpose %[[Y]] [2, 0, 1] : tensor<2x3x5xbf16> -> tensor<5x2x3xbf16>
// CHECK: return %[[A]], %[[B]]
// GENERIC-LABEL: sym_name = "transpose"
// GENERIC: "tessel.transpose"(%{{.*}}) <{permutation = array<i64: 0, 2, 1, 3>}> : (tensor<4x32x4x16xf32>) -> tensor<4x4x32x16xf32>
func.func @transpose(%x: tensor<4x32x4x16xf32>, %y: tensor<2x3x5xbf16>) -> (tensor<4x4x32x16xf32>, tensor<5x2x3xbf16>) {
  %a = tessel.transpose %x [0, 2, 1, 3] : tensor<4x32x4x16xf32> -> tensor<4x4x32x16xf32>
  %b = tessel.transpose %y [2, 0, 1] : tensor<2x3x5xbf16> -> tensor<5x2x3xbf16>
  return %a, %b : tensor<4x4x32x16xf32>, tensor<5x2x3xbf16>
}

// -----

// CHECK-LABEL: func.func @split_two
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>)
// CHECK: %[[P:.*]]:2 = tessel.split %[[X]] along 1 : tensor<4x64xf32> -> tensor<4x32xf32>, tensor<4x32xf32>
// CHECK: return %[[P]]#1, %[[P]]#0
func.func @split_two(%x: tensor<4x64xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %a, %b = tessel.split %x along 1 : tensor<4x64xf32> -> tensor<4x32xf32>, tensor<4x32xf32>
  return %b, %a : tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// CHECK-LABEL: func.func @split_three
// CHECK-SAME: (%[[QKV:.*]]: tensor<4x32x192xbf16>)
// CHECK: %[[P:.*]]:3 = tessel.split %[[QKV]] along 2 : tensor<4x32x192xbf16> -> tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>
// CHECK: return %[[P]]#0, %[[P]]#1, %[[P]]#2
// GENERIC-LABEL: sym_name = "split_three"
// GENERIC: "tessel.split"(%{{.*}}) <{axis = 2 : i64}> : (tensor<4x32x192xbf16>) -> (tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>)
func.func @split_three(%qkv: tensor<4x32x192xbf16>) -> (tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>) {
  %q, %k, %v = tessel.split %qkv along 2 : tensor<4x32x192xbf16> -> tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>
  return %q, %k, %v : tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>
}

// -----

// CHECK-LABEL: func.func @split_i32_axis0
// CHECK-SAME: (%[[T:.*]]: tensor<8x32xi32>)
// CHECK: %[[P:.*]]:2 = tessel.split %[[T]] along 0 : tensor<8x32xi32> -> tensor<4x32xi32>, tensor<4x32xi32>
// CHECK: return %[[P]]#0, %[[P]]#1
func.func @split_i32_axis0(%t: tensor<8x32xi32>) -> (tensor<4x32xi32>, tensor<4x32xi32>) {
  %a, %b = tessel.split %t along 0 : tensor<8x32xi32> -> tensor<4x32xi32>, tensor<4x32xi32>
  return %a, %b : tensor<4x32xi32>, tensor<4x32xi32>
}

// -----

// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:.*]]: tensor<4x16xf32>, %[[B:.*]]: tensor<4x48xf32>)
// CHECK: %[[Y:.*]] = tessel.concat %[[A]], %[[B]] along 1 : (tensor<4x16xf32>, tensor<4x48xf32>) -> tensor<4x64xf32>
// CHECK: return %[[Y]]
func.func @concat(%a: tensor<4x16xf32>, %b: tensor<4x48xf32>) -> tensor<4x64xf32> {
  %y = tessel.concat %a, %b along 1 : (tensor<4x16xf32>, tensor<4x48xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// The inverse of split_three: heads back into [B, T, 3C], in bf16.
// CHECK-LABEL: func.func @concat_three_bf16
// CHECK-SAME: (%[[Q:.*]]: tensor<4x32x64xbf16>, %[[K:.*]]: tensor<4x32x64xbf16>, %[[V:.*]]: tensor<4x32x64xbf16>)
// CHECK: %[[Y:.*]] = tessel.concat %[[Q]], %[[K]], %[[V]] along 2 : (tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>) -> tensor<4x32x192xbf16>
// CHECK: return %[[Y]]
func.func @concat_three_bf16(%q: tensor<4x32x64xbf16>, %k: tensor<4x32x64xbf16>, %v: tensor<4x32x64xbf16>) -> tensor<4x32x192xbf16> {
  %y = tessel.concat %q, %k, %v along 2 : (tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>) -> tensor<4x32x192xbf16>
  return %y : tensor<4x32x192xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// reduce_sum, reduce_mean
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reduce_sum
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>)
// CHECK: %[[Y:.*]] = tessel.reduce_sum %[[X]] [0, 1] : tensor<4x32x64xf32> -> tensor<64xf32>
// CHECK: %[[Z:.*]] = tessel.reduce_sum %[[X]] [2, 0] : tensor<4x32x64xf32> -> tensor<32xf32>
// CHECK: return %[[Y]], %[[Z]]
// GENERIC-LABEL: sym_name = "reduce_sum"
// GENERIC: "tessel.reduce_sum"(%{{.*}}) <{dims = array<i64: 0, 1>}> : (tensor<4x32x64xf32>) -> tensor<64xf32>
func.func @reduce_sum(%x: tensor<4x32x64xf32>) -> (tensor<64xf32>, tensor<32xf32>) {
  %y = tessel.reduce_sum %x [0, 1] : tensor<4x32x64xf32> -> tensor<64xf32>
  %z = tessel.reduce_sum %x [2, 0] : tensor<4x32x64xf32> -> tensor<32xf32>
  return %y, %z : tensor<64xf32>, tensor<32xf32>
}

// -----

// CHECK-LABEL: func.func @reduce_mean
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xbf16>)
// CHECK: %[[Y:.*]] = tessel.reduce_mean %[[X]] [1] : tensor<4x32x64xbf16> -> tensor<4x64xbf16>
// CHECK: return %[[Y]]
func.func @reduce_mean(%x: tensor<4x32x64xbf16>) -> tensor<4x64xbf16> {
  %y = tessel.reduce_mean %x [1] : tensor<4x32x64xbf16> -> tensor<4x64xbf16>
  return %y : tensor<4x64xbf16>
}

// -----

// Reducing every dimension gives a 0-d tensor; no dims is the identity.
// CHECK-LABEL: func.func @reduce_to_scalar
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>)
// CHECK: %[[M:.*]] = tessel.reduce_mean %[[X]] [0, 1] : tensor<4x32xf32> -> tensor<f32>
// CHECK: %[[S:.*]] = tessel.reduce_sum %[[X]] [1, 0] : tensor<4x32xf32> -> tensor<f32>
// CHECK: %[[I:.*]] = tessel.reduce_sum %[[X]] [] : tensor<4x32xf32> -> tensor<4x32xf32>
// CHECK: return %[[M]], %[[S]], %[[I]]
func.func @reduce_to_scalar(%x: tensor<4x32xf32>) -> (tensor<f32>, tensor<f32>, tensor<4x32xf32>) {
  %m = tessel.reduce_mean %x [0, 1] : tensor<4x32xf32> -> tensor<f32>
  %s = tessel.reduce_sum %x [1, 0] : tensor<4x32xf32> -> tensor<f32>
  %i = tessel.reduce_sum %x [] : tensor<4x32xf32> -> tensor<4x32xf32>
  return %m, %s, %i : tensor<f32>, tensor<f32>, tensor<4x32xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Generic form written by hand parses and prints in the custom form
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @generic_input
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>, %[[W:.*]]: tensor<192x64xf32>)
// CHECK: %[[P:.*]] = tessel.param "lm_head.weight" init zeros : tensor<192x64xf32>
// CHECK: %[[Y:.*]] = tessel.matmul %[[X]], %[[W]] transpose_rhs : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x192xf32>
// CHECK: %[[S:.*]]:3 = tessel.split %[[Y]] along 2 : tensor<4x32x192xf32> -> tensor<4x32x64xf32>, tensor<4x32x64xf32>, tensor<4x32x64xf32>
// CHECK: %[[L:.*]] = tessel.layer_norm %[[S]]#0, %{{.*}}, %{{.*}} {epsilon = 1.250000e-01 : f64}
// CHECK: return %[[L]]
func.func @generic_input(%x: tensor<4x32x64xf32>, %w: tensor<192x64xf32>) -> tensor<4x32x64xf32> {
  %p = "tessel.param"() <{init = #tessel<init_kind zeros>, name = "lm_head.weight"}> : () -> tensor<192x64xf32>
  %y = "tessel.matmul"(%x, %w) <{transpose_rhs}> : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x192xf32>
  %s:3 = "tessel.split"(%y) <{axis = 2 : i64}> : (tensor<4x32x192xf32>) -> (tensor<4x32x64xf32>, tensor<4x32x64xf32>, tensor<4x32x64xf32>)
  %g = "tessel.reduce_sum"(%s#1) <{dims = array<i64: 0, 1>}> : (tensor<4x32x64xf32>) -> tensor<64xf32>
  %l = "tessel.layer_norm"(%s#0, %g, %g) <{epsilon = 1.250000e-01 : f64}> : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  return %l : tensor<4x32x64xf32>
}

// -----

//===----------------------------------------------------------------------===//
// collectives (TesselCommOps.td)
//===----------------------------------------------------------------------===//

// A bucket of two gradients: start (in-flight values of the inputs' types), then the wait.
// CHECK-LABEL: func.func @all_reduce_bucket
// CHECK: %[[F:.*]]:2 = tessel.all_reduce_start %{{.*}}, %{{.*}} reduce avg on @mesh grid_axes = [0] bucket 0 params ["ln_f.bias", "wte.weight"] : tensor<64xf32>, tensor<256x64xf32>
// CHECK-NEXT: %[[R:.*]]:2 = tessel.all_reduce_wait %[[F]]#0, %[[F]]#1 : tensor<64xf32>, tensor<256x64xf32>
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
// GENERIC-LABEL: "func.func"() <{function_type = (tensor<64xf32>, tensor<256x64xf32>) -> (tensor<64xf32>, tensor<256x64xf32>), sym_name = "all_reduce_bucket"}>
// GENERIC: "tessel.all_reduce_start"(%{{.*}}, %{{.*}}) <{bucket = 0 : i64, grid = @mesh, grid_axes = array<i16: 0>, params = ["ln_f.bias", "wte.weight"], reduce = #tessel<reduce_kind avg>}> : (tensor<64xf32>, tensor<256x64xf32>) -> (tensor<64xf32>, tensor<256x64xf32>)
// GENERIC: "tessel.all_reduce_wait"(%{{.*}}#0, %{{.*}}#1) : (tensor<64xf32>, tensor<256x64xf32>) -> (tensor<64xf32>, tensor<256x64xf32>)
shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
func.func @all_reduce_bucket(%b: tensor<64xf32>, %w: tensor<256x64xf32>) -> (tensor<64xf32>, tensor<256x64xf32>) {
  %f:2 = tessel.all_reduce_start %b, %w reduce avg on @mesh grid_axes = [0] bucket 0 params ["ln_f.bias", "wte.weight"] : tensor<64xf32>, tensor<256x64xf32>
  %r:2 = tessel.all_reduce_wait %f#0, %f#1 : tensor<64xf32>, tensor<256x64xf32>
  return %r#0, %r#1 : tensor<64xf32>, tensor<256x64xf32>
}

// -----

// CHECK-LABEL: func.func @all_reduce_sum
// CHECK: tessel.all_reduce_start %{{.*}} reduce sum on @mesh grid_axes = [0] bucket 3 params ["x"] : tensor<f32>
// GENERIC-LABEL: sym_name = "all_reduce_sum"
// GENERIC: "tessel.all_reduce_start"(%{{.*}}) <{{{.*}}reduce = #tessel<reduce_kind sum>}>
shard.grid @mesh(shape = 4) {tessel.axis_names = ["dp"]}
func.func @all_reduce_sum(%x: tensor<f32>) -> tensor<f32> {
  %f = tessel.all_reduce_start %x reduce sum on @mesh grid_axes = [0] bucket 3 params ["x"] : tensor<f32>
  %r = tessel.all_reduce_wait %f : tensor<f32>
  return %r : tensor<f32>
}

// -----

// The maximum over the group (a sharded softmax's row max).
// CHECK-LABEL: func.func @all_reduce_max
// CHECK: tessel.all_reduce_start %{{.*}} reduce max on @mesh grid_axes = [1] bucket 0 params ["row_max"] : tensor<4x32xf32>
// GENERIC-LABEL: sym_name = "all_reduce_max"
// GENERIC: "tessel.all_reduce_start"(%{{.*}}) <{{{.*}}reduce = #tessel<reduce_kind max>}>
shard.grid @mesh(shape = 2x2) {tessel.axis_names = ["dp", "tp"]}
func.func @all_reduce_max(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %f = tessel.all_reduce_start %x reduce max on @mesh grid_axes = [1] bucket 0 params ["row_max"] : tensor<4x32xf32>
  %r = tessel.all_reduce_wait %f : tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Discardable attributes of functions (TesselDialect.td)
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @function_attributes
// CHECK-SAME: (%{{.*}}: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}, tensor<8xf32> {tessel.grad = "b"})
// CHECK-SAME: attributes {tessel.batch_shards = 2 : i64, tessel.mixed_precision}
func.func @function_attributes(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}, tensor<8xf32> {tessel.grad = "b"}) attributes {tessel.batch_shards = 2 : i64, tessel.mixed_precision} {
  %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %b = tessel.reduce_sum %x [0] : tensor<4x8xf32> -> tensor<8xf32>
  return %l, %b : tensor<f32>, tensor<8xf32>
}
