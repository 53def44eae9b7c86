// --tessel-decompose-attention (passes/DecomposeAttention.cpp): each causal_attention on
// qkv [B, T, 3C] with NH heads (HS = C / NH) becomes split -> reshape [B, T, NH, HS] ->
// transpose [0, 2, 1, 3] -> matmul transpose_rhs -> scale 1/sqrt(HS) -> softmax causal ->
// matmul -> transpose [0, 2, 1, 3] -> reshape [B, T, C]; every other op is left alone.
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-decompose-attention | FileCheck %s
// The new ops keep the attention op's location (LOC prefix, one case below).
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-decompose-attention -mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// B = 2, T = 8, C = 64, NH = 4, so HS = 16 and the scale is 1/sqrt(16) = 0.25.
// CHECK-LABEL: func.func @four_heads
// CHECK-SAME: (%[[QKV:.*]]: tensor<2x8x192xf32>)
// CHECK-NOT: tessel.causal_attention
// CHECK: %[[P:.*]]:3 = tessel.split %[[QKV]] along 2 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
// CHECK-NEXT: %[[QR:.*]] = tessel.reshape %[[P]]#0 : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
// CHECK-NEXT: %[[Q:.*]] = tessel.transpose %[[QR]] [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[KR:.*]] = tessel.reshape %[[P]]#1 : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
// CHECK-NEXT: %[[K:.*]] = tessel.transpose %[[KR]] [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[VR:.*]] = tessel.reshape %[[P]]#2 : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
// CHECK-NEXT: %[[V:.*]] = tessel.transpose %[[VR]] [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[S:.*]] = tessel.matmul %[[Q]], %[[K]] transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[SS:.*]] = tessel.scale %[[S]], 2.500000e-01 : tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[PR:.*]] = tessel.softmax %[[SS]] causal : tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[Y:.*]] = tessel.matmul %[[PR]], %[[V]] : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[YT:.*]] = tessel.transpose %[[Y]] [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
// CHECK-NEXT: %[[OUT:.*]] = tessel.reshape %[[YT]] : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: return %[[OUT]] : tensor<2x8x64xf32>
func.func @four_heads(%qkv: tensor<2x8x192xf32>) -> tensor<2x8x64xf32> {
  %y = tessel.causal_attention %qkv heads 4 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// One head of HS = 8 in bf16: the element type carries through every new op, NH = 1
// still gets the head axis, and the scale is 1/sqrt(8).
// CHECK-LABEL: func.func @one_head_bf16
// CHECK-SAME: (%[[QKV:.*]]: tensor<1x4x24xbf16>)
// CHECK: %[[P:.*]]:3 = tessel.split %[[QKV]] along 2 : tensor<1x4x24xbf16> -> tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<1x4x8xbf16>
// CHECK-NEXT: %[[QR:.*]] = tessel.reshape %[[P]]#0 : tensor<1x4x8xbf16> -> tensor<1x4x1x8xbf16>
// CHECK-NEXT: %[[Q:.*]] = tessel.transpose %[[QR]] [0, 2, 1, 3] : tensor<1x4x1x8xbf16> -> tensor<1x1x4x8xbf16>
// CHECK-NEXT: %[[KR:.*]] = tessel.reshape %[[P]]#1 : tensor<1x4x8xbf16> -> tensor<1x4x1x8xbf16>
// CHECK-NEXT: %[[K:.*]] = tessel.transpose %[[KR]] [0, 2, 1, 3] : tensor<1x4x1x8xbf16> -> tensor<1x1x4x8xbf16>
// CHECK-NEXT: %[[VR:.*]] = tessel.reshape %[[P]]#2 : tensor<1x4x8xbf16> -> tensor<1x4x1x8xbf16>
// CHECK-NEXT: %[[V:.*]] = tessel.transpose %[[VR]] [0, 2, 1, 3] : tensor<1x4x1x8xbf16> -> tensor<1x1x4x8xbf16>
// CHECK-NEXT: %[[S:.*]] = tessel.matmul %[[Q]], %[[K]] transpose_rhs : (tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>) -> tensor<1x1x4x4xbf16>
// CHECK-NEXT: %[[SS:.*]] = tessel.scale %[[S]], 0.35355339059327373 : tensor<1x1x4x4xbf16>
// CHECK-NEXT: %[[PR:.*]] = tessel.softmax %[[SS]] causal : tensor<1x1x4x4xbf16>
// CHECK-NEXT: %[[Y:.*]] = tessel.matmul %[[PR]], %[[V]] : (tensor<1x1x4x4xbf16>, tensor<1x1x4x8xbf16>) -> tensor<1x1x4x8xbf16>
// CHECK-NEXT: %[[YT:.*]] = tessel.transpose %[[Y]] [0, 2, 1, 3] : tensor<1x1x4x8xbf16> -> tensor<1x4x1x8xbf16>
// CHECK-NEXT: %[[OUT:.*]] = tessel.reshape %[[YT]] : tensor<1x4x1x8xbf16> -> tensor<1x4x8xbf16>
// CHECK-NEXT: return %[[OUT]] : tensor<1x4x8xbf16>
// LOC-LABEL: func.func @one_head_bf16
// LOC: tessel.split {{.*}} loc(#[[ATTN:loc[0-9]+]])
// LOC-NEXT: tessel.reshape {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.transpose {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.reshape {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.transpose {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.reshape {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.transpose {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.matmul {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.scale {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.softmax {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.matmul {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.transpose {{.*}} loc(#[[ATTN]])
// LOC-NEXT: tessel.reshape {{.*}} loc(#[[ATTN]])
// LOC-DAG: #[[SRC:loc[0-9]+]] = loc("gpt.cpp":41:12)
// LOC-DAG: #[[ATTN]] = loc("blocks.0.attn"(#[[SRC]]))
func.func @one_head_bf16(%qkv: tensor<1x4x24xbf16>) -> tensor<1x4x8xbf16> {
  %y = tessel.causal_attention %qkv heads 1 : tensor<1x4x24xbf16> -> tensor<1x4x8xbf16> loc("blocks.0.attn"("gpt.cpp":41:12))
  return %y : tensor<1x4x8xbf16>
}

// -----

// Without attention the function comes out unchanged.
// CHECK-LABEL: func.func @no_attention
// CHECK-SAME: (%[[X:.*]]: tensor<4x32x64xf32>, %[[G:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>, %[[S:.*]]: tensor<4x4x32x32xf32>, %[[T:.*]]: tensor<4x32xi32>)
// CHECK-NEXT: %[[W:.*]] = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<192x64xf32>
// CHECK-NEXT: %[[LN:.*]] = tessel.layer_norm %[[X]], %[[G]], %[[B]] : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
// CHECK-NEXT: %[[QKV:.*]] = tessel.matmul %[[LN]], %[[W]] transpose_rhs : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x192xf32>
// CHECK-NEXT: %[[P:.*]]:3 = tessel.split %[[QKV]] along 2 : tensor<4x32x192xf32> -> tensor<4x32x64xf32>, tensor<4x32x64xf32>, tensor<4x32x64xf32>
// CHECK-NEXT: %[[R:.*]] = tessel.reshape %[[P]]#0 : tensor<4x32x64xf32> -> tensor<4x32x4x16xf32>
// CHECK-NEXT: %[[TR:.*]] = tessel.transpose %[[R]] [0, 2, 1, 3] : tensor<4x32x4x16xf32> -> tensor<4x4x32x16xf32>
// CHECK-NEXT: %[[SC:.*]] = tessel.scale %[[S]], 2.500000e-01 : tensor<4x4x32x32xf32>
// CHECK-NEXT: %[[SM:.*]] = tessel.softmax %[[SC]] causal : tensor<4x4x32x32xf32>
// CHECK-NEXT: %[[H:.*]] = tessel.gelu %[[P]]#1 : tensor<4x32x64xf32>
// CHECK-NEXT: %[[SUM:.*]] = tessel.add %[[H]], %[[B]] : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
// CHECK-NEXT: %[[LOSS:.*]] = tessel.cross_entropy %[[SUM]], %[[T]] : (tensor<4x32x64xf32>, tensor<4x32xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[TR]], %[[SM]], %[[LOSS]]
func.func @no_attention(%x: tensor<4x32x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %s: tensor<4x4x32x32xf32>, %t: tensor<4x32xi32>)
    -> (tensor<4x4x32x16xf32>, tensor<4x4x32x32xf32>, tensor<f32>) {
  %w = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<192x64xf32>
  %ln = tessel.layer_norm %x, %g, %b : (tensor<4x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  %qkv = tessel.matmul %ln, %w transpose_rhs : (tensor<4x32x64xf32>, tensor<192x64xf32>) -> tensor<4x32x192xf32>
  %q, %k, %v = tessel.split %qkv along 2 : tensor<4x32x192xf32> -> tensor<4x32x64xf32>, tensor<4x32x64xf32>, tensor<4x32x64xf32>
  %r = tessel.reshape %q : tensor<4x32x64xf32> -> tensor<4x32x4x16xf32>
  %tr = tessel.transpose %r [0, 2, 1, 3] : tensor<4x32x4x16xf32> -> tensor<4x4x32x16xf32>
  %sc = tessel.scale %s, 0.25 : tensor<4x4x32x32xf32>
  %sm = tessel.softmax %sc causal : tensor<4x4x32x32xf32>
  %h = tessel.gelu %k : tensor<4x32x64xf32>
  %sum = tessel.add %h, %b : (tensor<4x32x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32>
  %loss = tessel.cross_entropy %sum, %t : (tensor<4x32x64xf32>, tensor<4x32xi32>) -> tensor<f32>
  return %tr, %sm, %loss : tensor<4x4x32x16xf32>, tensor<4x4x32x32xf32>, tensor<f32>
}

// -----

// The ops around the attention stay as they are, and its users now read the reshape.
// CHECK-LABEL: func.func @attention_in_block
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x64xf32>, %[[G:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK-NEXT: %[[W:.*]] = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<192x64xf32>
// CHECK-NEXT: %[[LN:.*]] = tessel.layer_norm %[[X]], %[[G]], %[[B]] : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
// CHECK-NEXT: %[[QKV:.*]] = tessel.matmul %[[LN]], %[[W]] transpose_rhs : (tensor<2x8x64xf32>, tensor<192x64xf32>) -> tensor<2x8x192xf32>
// CHECK-NEXT: tessel.split %[[QKV]] along 2
// CHECK-NOT: tessel.causal_attention
// CHECK: tessel.softmax %{{.*}} causal : tensor<2x4x8x8xf32>
// CHECK: %[[Y:.*]] = tessel.reshape %{{.*}} : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: %[[RES:.*]] = tessel.add %[[X]], %[[Y]] : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
// CHECK-NEXT: return %[[RES]] : tensor<2x8x64xf32>
func.func @attention_in_block(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<2x8x64xf32> {
  %w = tessel.param "blocks.0.attn.qkv.weight" {std = 2.000000e-02 : f64} : tensor<192x64xf32>
  %ln = tessel.layer_norm %x, %g, %b : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %qkv = tessel.matmul %ln, %w transpose_rhs : (tensor<2x8x64xf32>, tensor<192x64xf32>) -> tensor<2x8x192xf32>
  %y = tessel.causal_attention %qkv heads 4 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  %res = tessel.add %x, %y : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %res : tensor<2x8x64xf32>
}

// -----

// Two attention ops, the second fed by the first: both are decomposed, each with its own
// head count (NH = 4: HS = 16, scale 0.25; then NH = 2: HS = 32, scale 1/sqrt(32)).
// CHECK-LABEL: func.func @two_attentions
// CHECK-SAME: (%[[QKV0:.*]]: tensor<2x8x192xf32>, %[[W:.*]]: tensor<192x64xf32>)
// CHECK-NOT: tessel.causal_attention
// CHECK: %[[P0:.*]]:3 = tessel.split %[[QKV0]] along 2 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
// CHECK: tessel.reshape %[[P0]]#0 : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT: tessel.scale %{{.*}}, 2.500000e-01 : tensor<2x4x8x8xf32>
// CHECK-NEXT: tessel.softmax %{{.*}} causal : tensor<2x4x8x8xf32>
// CHECK: %[[Y0:.*]] = tessel.reshape %{{.*}} : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: %[[QKV1:.*]] = tessel.matmul %[[Y0]], %[[W]] transpose_rhs : (tensor<2x8x64xf32>, tensor<192x64xf32>) -> tensor<2x8x192xf32>
// CHECK-NEXT: %[[P1:.*]]:3 = tessel.split %[[QKV1]] along 2 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
// CHECK: tessel.reshape %[[P1]]#0 : tensor<2x8x64xf32> -> tensor<2x8x2x32xf32>
// CHECK: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x2x8x32xf32>, tensor<2x2x8x32xf32>) -> tensor<2x2x8x8xf32>
// CHECK-NEXT: tessel.scale %{{.*}}, 0.17677669529663687 : tensor<2x2x8x8xf32>
// CHECK-NEXT: tessel.softmax %{{.*}} causal : tensor<2x2x8x8xf32>
// CHECK: %[[Y1:.*]] = tessel.reshape %{{.*}} : tensor<2x8x2x32xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: return %[[Y0]], %[[Y1]]
// CHECK-NOT: tessel.causal_attention
func.func @two_attentions(%qkv0: tensor<2x8x192xf32>, %w: tensor<192x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %y0 = tessel.causal_attention %qkv0 heads 4 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  %qkv1 = tessel.matmul %y0, %w transpose_rhs : (tensor<2x8x64xf32>, tensor<192x64xf32>) -> tensor<2x8x192xf32>
  %y1 = tessel.causal_attention %qkv1 heads 2 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  return %y0, %y1 : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

// grouped_attention with B = 2, T = 8, NH = 4, NKV = 2 (G = 2), D = 16: q goes to
// [B, NKV, G*T, D] = [2, 2, 16, 16]; k and v only to [B, NKV, T, D] (never repeated); one
// matmul per kv head scores both of its query heads [2, 2, 16, 8]; the causal softmax sees
// square [T, T] blocks [2, 2, 2, 8, 8]; the output goes back through [B, NH, T, D].
// CHECK-LABEL: func.func @grouped
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x64xf32>, %[[K:.*]]: tensor<2x8x32xf32>, %[[V:.*]]: tensor<2x8x32xf32>)
// CHECK-NOT: tessel.grouped_attention
// CHECK-NEXT: %[[QR:.*]] = tessel.reshape %[[Q]] : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
// CHECK-NEXT: %[[QT:.*]] = tessel.transpose %[[QR]] [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[QG:.*]] = tessel.reshape %[[QT]] : tensor<2x4x8x16xf32> -> tensor<2x2x16x16xf32>
// CHECK-NEXT: %[[KR:.*]] = tessel.reshape %[[K]] : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
// CHECK-NEXT: %[[KT:.*]] = tessel.transpose %[[KR]] [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
// CHECK-NEXT: %[[VR:.*]] = tessel.reshape %[[V]] : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
// CHECK-NEXT: %[[VT:.*]] = tessel.transpose %[[VR]] [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
// CHECK-NEXT: %[[S:.*]] = tessel.matmul %[[QG]], %[[KT]] transpose_rhs : (tensor<2x2x16x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x16x8xf32>
// CHECK-NEXT: %[[SS:.*]] = tessel.scale %[[S]], 2.500000e-01 : tensor<2x2x16x8xf32>
// CHECK-NEXT: %[[S5:.*]] = tessel.reshape %[[SS]] : tensor<2x2x16x8xf32> -> tensor<2x2x2x8x8xf32>
// CHECK-NEXT: %[[P5:.*]] = tessel.softmax %[[S5]] causal : tensor<2x2x2x8x8xf32>
// CHECK-NEXT: %[[P:.*]] = tessel.reshape %[[P5]] : tensor<2x2x2x8x8xf32> -> tensor<2x2x16x8xf32>
// CHECK-NEXT: %[[Y:.*]] = tessel.matmul %[[P]], %[[VT]] : (tensor<2x2x16x8xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x16x16xf32>
// CHECK-NEXT: %[[YH:.*]] = tessel.reshape %[[Y]] : tensor<2x2x16x16xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[YT:.*]] = tessel.transpose %[[YH]] [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
// CHECK-NEXT: %[[OUT:.*]] = tessel.reshape %[[YT]] : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: return %[[OUT]] : tensor<2x8x64xf32>
func.func @grouped(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x32xf32>) -> tensor<2x8x64xf32> {
  %y = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// G = 1 (kv_heads = heads) is multi-head attention: no G*T reshapes, the ops of a
// causal_attention after its split. In bf16 the type carries through; locations are kept.
// CHECK-LABEL: func.func @grouped_g1_bf16
// CHECK-NEXT: tessel.reshape %{{.*}} : tensor<1x4x16xbf16> -> tensor<1x4x2x8xbf16>
// CHECK-NEXT: tessel.transpose %{{.*}} [0, 2, 1, 3] : tensor<1x4x2x8xbf16> -> tensor<1x2x4x8xbf16>
// CHECK-NEXT: tessel.reshape %{{.*}} : tensor<1x4x16xbf16> -> tensor<1x4x2x8xbf16>
// CHECK-NEXT: tessel.transpose
// CHECK-NEXT: tessel.reshape
// CHECK-NEXT: tessel.transpose
// CHECK-NEXT: tessel.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> tensor<1x2x4x4xbf16>
// CHECK-NEXT: tessel.scale %{{.*}}, 0.35355339059327373 : tensor<1x2x4x4xbf16>
// CHECK-NEXT: tessel.softmax %{{.*}} causal : tensor<1x2x4x4xbf16>
// CHECK-NEXT: tessel.matmul %{{.*}}, %{{.*}} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x8xbf16>) -> tensor<1x2x4x8xbf16>
// CHECK-NEXT: tessel.transpose %{{.*}} [0, 2, 1, 3] : tensor<1x2x4x8xbf16> -> tensor<1x4x2x8xbf16>
// CHECK-NEXT: tessel.reshape %{{.*}} : tensor<1x4x2x8xbf16> -> tensor<1x4x16xbf16>
// CHECK-NEXT: return
// LOC-LABEL: func.func @grouped_g1_bf16
// LOC: tessel.reshape {{.*}} loc(#[[ATTN:loc[0-9]+]])
// LOC-COUNT-11: loc(#[[ATTN]])
// LOC-DAG: #[[ATTN]] = loc("blocks.0.attention"(#{{loc[0-9]+}}))
func.func @grouped_g1_bf16(%q: tensor<1x4x16xbf16>, %k: tensor<1x4x16xbf16>, %v: tensor<1x4x16xbf16>) -> tensor<1x4x16xbf16> {
  %y = tessel.grouped_attention %q, %k, %v heads 2 kv_heads 2 : (tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>) -> tensor<1x4x16xbf16> loc("blocks.0.attention"("llama.cpp":12:7))
  return %y : tensor<1x4x16xbf16>
}

// -----

// Wrong stage: the function is already fused.
// expected-error @+1 {{tessel-decompose-attention: @after_fuse is already fused (tessel.fused present); it runs before tessel-autodiff and tessel-fuse}}
func.func @after_fuse(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = tessel.fused(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>, %b0: tensor<8xf32>):
    %1 = tessel.add %x0, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %2 = tessel.gelu %1 : tensor<4x8xf32>
    tessel.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}
