// Gradient checks of the Llama attention ops against central finite differences, as
// GradCheckTest.cpp does for the others (same harness, GradCheckUtil.h): tessel.rope through
// its VJP (rope with `inverse` toggled), grouped-query attention both through its own VJP
// (grouped_attention_grad, the pipeline's default) and through tessel-decompose-attention's
// G*T layout, causal_attention's packed qkv through causal_attention_grad, and rope and
// attention together as a Llama block uses them. Sizes include 1 (one position, one head,
// D = 2), odd ones (T = 17, D = 10) and T = 33; groups G = 1, 2, 3 and multi-query
// (kv_heads = 1).
//
// Tolerance: kTol = 5e-8 relative to max(1, |fd|), the op tolerance of GradCheckTest.cpp and
// derived there: rounding in the finite difference dominates (~5e-11 |y| per ulp of each
// moving output over 2h = 2e-6); rope is linear in x (error ~1e-16), and the decomposed
// attention is the same chain of matmuls and a causal softmax that CausalAttention checks
// under this tolerance (measured there at most 6.5e-9 over 2000 runs); the fused backward
// computes the same composition in f64 (ref::groupedAttentionGrad). A wrong rotation
// direction, a kv head paired with the wrong query head or a dropped gradient of k or v is
// an O(1e-3 .. 1) error.
#include "test/unit/GradCheckUtil.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

namespace {

using namespace gradcheck;
using tessel::Shape;
using tessel::Tensor;

constexpr double kTol = 5e-8;  // see the file comment

TEST(GradCheckAttention, Rope) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [shape, heads, theta] : {std::tuple{Shape{1, 1, 2}, int64_t{1}, 10000.0},
                                     {Shape{2, 7, 24}, 3, 10000.0},
                                     {Shape{1, 33, 16}, 2, 500000.0}}) {
    GradCase c(rng);
    Tensor x = c.param("x", shape);
    c.setLoss({tessel::rope(x, heads, theta)});
    c.check("rope " + str(shape) + " heads " + std::to_string(heads), kTol);
  }
}

/// The compiled training step's IR holds `op` (the fused VJP) and no transpose, or (with the
/// decomposition) the reverse: so each check below covers the path it names.
void expectAttentionPath(GradCase<>& c, bool decomposed, const std::string& gradOp) {
  std::string ir = c.compile().ir();
  EXPECT_EQ(ir.find("tessel." + gradOp + " ") != std::string::npos, !decomposed) << gradOp;
  EXPECT_EQ(ir.find("tessel.transpose") != std::string::npos, decomposed);
}

// Grouped attention through its fused VJP (grouped_attention_grad) and through the
// decomposition into reshapes, transposes, matmuls and a causal softmax.
TEST(GradCheckAttention, GroupedAttention) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (bool decomposed : {false, true})
  for (auto [b, t, heads, kvHeads, d] :
       {std::tuple{int64_t{1}, int64_t{1}, int64_t{1}, int64_t{1}, int64_t{2}},
        {2, 7, 4, 2, 3},
        {1, 9, 6, 2, 2},
        {2, 5, 4, 1, 4},
        {1, 33, 2, 2, 2},
        {2, 17, 6, 2, 10},
        {1, 17, 6, 6, 10}}) {
    GradCase c(rng);
    c.decomposeAttention = decomposed;
    Tensor q = c.param("q", {b, t, heads * d});
    Tensor k = c.param("k", {b, t, kvHeads * d});
    Tensor v = c.param("v", {b, t, kvHeads * d});
    c.setLoss({tessel::causal_attention(q, k, v, heads, kvHeads)});
    expectAttentionPath(c, decomposed, "grouped_attention_grad");
    c.check(std::string(decomposed ? "decomposed" : "fused") + " grouped attention q " + str(q.shape()) + " k " + str(k.shape()) + " heads " +
                std::to_string(heads) + " kv_heads " + std::to_string(kvHeads),
            kTol);
  }
}

// causal_attention on a packed qkv [B, T, 3C] through causal_attention_grad (the gradient
// of qkv written packed, with no split or concat), multi-head at odd sizes.
TEST(GradCheckAttention, PackedCausalAttention) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [b, t, heads, d] : {std::tuple{int64_t{1}, int64_t{1}, int64_t{1}, int64_t{2}},
                                {2, 17, 6, 10},
                                {1, 9, 3, 4}}) {
    GradCase c(rng);
    Tensor qkv = c.param("qkv", {b, t, 3 * heads * d});
    c.setLoss({tessel::causal_attention(qkv, heads)});
    expectAttentionPath(c, false, "causal_attention_grad");
    c.check("fused causal attention qkv " + str(qkv.shape()) + " heads " + std::to_string(heads),
            kTol);
  }
}

// A Llama block's attention core: rope on q and k (each with its own head count), then
// grouped attention.
TEST(GradCheckAttention, RopeIntoGroupedAttention) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  GradCase c(rng);
  Tensor q = c.param("q", {2, 6, 16});  // 4 heads of D = 4
  Tensor k = c.param("k", {2, 6, 8});   // 2 kv heads
  Tensor v = c.param("v", {2, 6, 8});
  c.setLoss({tessel::causal_attention(tessel::rope(q, 4), tessel::rope(k, 2), v, 4, 2)});
  c.check("rope -> grouped attention", kTol);
}

}  // namespace
