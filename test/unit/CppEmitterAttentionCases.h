// Case builders of tessel.rope (compiler/TesselAttentionOps.td) for CppEmitterTest.cpp and
// CudaKernelOpsTest.cpp, and of the fused attention kernels (causal_attention,
// grouped_attention and their gradients; C++ only, no CUDA twin yet) for CppEmitterTest.cpp,
// as CppEmitterCases.h's for the other ops.
//
// Rope:
// Tolerance (u = 2^-24): the angle is computed in double as the reference does, its cosine
// and sine are rounded to float once (u/2 relative each), and y1 = x1 c - x2 s takes two
// products and a difference in f32 (u/2 each): at most 2u (|x1| + |x2|). With inputs in
// [-1, 1] that is 4u absolute; 8u leaves room for a device cos/sin a couple of double ulps
// off (which can flip one float rounding). Relative tolerances would not do: y crosses 0.
// A wrong pairing, sign or angle is an O(1e-2 .. 1) error.
#pragma once

#include "test/unit/CppEmitterCases.h"

namespace tessel::cpptest {

inline Case rope(const Shape& s, int64_t heads, double theta, bool inverse) {
  return makeCase(fmt::format("rope{}_{}_h{}_{}", inverse ? "_inverse" : "", nameOf(s), heads,
                              static_cast<int64_t>(theta)),
                  {{s}},
                  fmt::format("%r = tessel.rope %a0 heads {} theta {:e}{} : {}", heads, theta,
                              inverse ? " inverse" : "", ty(s)),
                  {ty(s)}, {{0, 8 * kU}});
}

/// The rope cases: one pair (D = 2), D = 8 over 3 heads at odd sizes, T = 33 with Llama 3's
/// theta 500000, both directions, and one shape over the parallel threshold.
inline std::vector<Case> ropeCases() {
  std::vector<Case> c;
  for (bool inverse : {false, true}) {
    c.push_back(rope({1, 1, 2}, 1, 10000.0, inverse));
    c.push_back(rope({2, 7, 24}, 3, 10000.0, inverse));
    c.push_back(rope({1, 33, 64}, 4, 500000.0, inverse));
  }
  c.push_back(rope({8, 64, 256}, 4, 10000.0, false));
  return c;
}

// Attention tolerance (u = 2^-24), inputs in [-1, 1], head size D, T positions, G query heads
// per kv head: a score s = (q . k) / sqrt(D) is a D-term f32 dot product, |s| <= sqrt(D), so
// its error is at most (D + 1) u sqrt(D); exp turns that into the same relative error of each
// probability, and the max-subtracted sum and the division add (T + 2) u; so a probability is
// off by at most ~2 (D + 1) sqrt(D) u + (T + 2) u relative, and y = sum_j p_j v_j (|v| <= 1,
// sum p = 1) by that plus T u absolute: y gets (4 (D + 1) sqrt(D) + 2 T + 16) u absolute,
// about twice the bound. The gradients sum up to G T such terms (dk, dv over the rows and the
// G heads), each a product of the probability error above and a D-term dot product (dy . v),
// with cancellation between terms, so they are checked against the result's largest value:
// (16 (D + 1) sqrt(D) + 8 G T) u of max|want|. Measured worst errors are far below (the
// test prints nothing; ~1e-7); a wrong head, a wrong kv group, a missing causal mask or a
// dropped term is an O(1e-2 .. 1) error.
inline Tol attentionForwardTol(int64_t d, int64_t t) {
  return {0, (4.0 * (d + 1) * std::sqrt(static_cast<double>(d)) + 2.0 * t + 16) * kU};
}
inline Tol attentionGradTol(int64_t d, int64_t t, int64_t g) {
  return {0, (16.0 * (d + 1) * std::sqrt(static_cast<double>(d)) + 8.0 * g * t) * kU, kMax};
}

/// causal_attention of a packed qkv [B, T, 3 * heads * D] and its gradient.
inline std::vector<Case> causalAttention(int64_t b, int64_t t, int64_t heads, int64_t d) {
  Shape qkv{b, t, 3 * heads * d}, y{b, t, heads * d};
  std::string name = fmt::format("{}_h{}", nameOf(qkv), heads);
  return {makeCase("causal_attention_" + name, {{qkv}},
                   fmt::format("%r = tessel.causal_attention %a0 heads {} : {} -> {}", heads,
                               ty(qkv), ty(y)),
                   {ty(y)}, {attentionForwardTol(d, t)}),
          makeCase("causal_attention_grad_" + name, {{qkv}, {y}},
                   fmt::format("%r = tessel.causal_attention_grad %a0, %a1 heads {} : ({}, {}) -> {}",
                               heads, ty(qkv), ty(y), ty(qkv)),
                   {ty(qkv)}, {attentionGradTol(d, t, 1)})};
}

/// grouped_attention of q [B, T, heads * D], k and v [B, T, kvHeads * D] and its gradient.
inline std::vector<Case> groupedAttention(int64_t b, int64_t t, int64_t heads, int64_t kvHeads,
                                          int64_t d) {
  Shape q{b, t, heads * d}, kv{b, t, kvHeads * d};
  std::string name = fmt::format("{}_{}_h{}", nameOf(q), kvHeads * d, heads);
  std::string types = fmt::format("{}, {}, {}", ty(q), ty(kv), ty(kv));
  return {makeCase("grouped_attention_" + name, {{q}, {kv}, {kv}},
                   fmt::format("%r = tessel.grouped_attention %a0, %a1, %a2 heads {} kv_heads {} "
                               ": ({}) -> {}",
                               heads, kvHeads, types, ty(q)),
                   {ty(q)}, {attentionForwardTol(d, t)}),
          makeCase("grouped_attention_grad_" + name, {{q}, {kv}, {kv}, {q}},
                   fmt::format("%r:3 = tessel.grouped_attention_grad %a0, %a1, %a2, %a3 heads {} "
                               "kv_heads {} : ({}, {}) -> ({})",
                               heads, kvHeads, types, ty(q), types),
                   {ty(q), ty(kv), ty(kv)}, {attentionGradTol(d, t, heads / kvHeads)})};
}

/// The fused attention cases: one position and one head; odd sizes (T = 17, D = 10) for
/// multi-head (packed qkv and three tensors), GQA with G = 3 (NH = 6, NKV = 2) and
/// multi-query attention; and GPT shapes (T = 64, D = 64, 6 heads) over the parallel
/// threshold. The C++ kernels pad T and D to 16 and take 16 query rows per block, so T = 1,
/// 9, 17 and 33 end in a partial block (33: one row), D = 2, 8, 10 are mostly padding, and
/// D = 48 (G = 2) is the one head size whose output tiles are 16 channels wide, three of them.
inline std::vector<Case> attentionCases() {
  std::vector<Case> c;
  auto add = [&](std::vector<Case> cases) {
    for (Case& k : cases) c.push_back(std::move(k));
  };
  add(causalAttention(1, 1, 1, 2));
  add(causalAttention(2, 17, 6, 10));
  add(causalAttention(8, 64, 6, 64));
  add(groupedAttention(1, 1, 1, 1, 2));
  add(groupedAttention(2, 17, 6, 6, 10));
  add(groupedAttention(2, 17, 6, 2, 10));
  add(groupedAttention(3, 9, 3, 1, 8));
  add(groupedAttention(4, 64, 8, 2, 32));
  add(groupedAttention(2, 33, 4, 2, 48));
  return c;
}

}  // namespace tessel::cpptest
