// Gradient checks of the VJP rules of silu and rms_norm (compiler/VJPNorm.cpp), of swiglu (a
// silu and a mul, differentiated op by op) and of a Llama-style pre-norm SwiGLU block, against
// central finite differences of the forward function, with the harness of GradCheckUtil.h
// (both sides on the f64 reference interpreter; a random cotangent; every element of every
// parameter up to 128 elements, a random 24 beyond).
//
// Tolerance: kTol = 5e-8 relative to max(1, |fd|), the bound GradCheckTest.cpp derives and
// measures for the existing ops (rounding of the outputs divided by 2h dominates; a wrong
// term is an O(1e-3 .. 1) error). These ops are as smooth as gelu and layer_norm: bounded
// derivatives of order 1 for N(0, 2^2) inputs, and rms_norm's rows are kept away from a zero
// RMS (see RmsNormInputAndWeight). Measured over 600 runs (fresh seeds): silu at most 1.8e-10,
// swiglu 2.6e-10, rms_norm 3.7e-9 (4e-8 before its inputs were kept from 0). The pre-norm
// block composes ~12 ops with N(0, 1) weights, like GradCheckTest's GPT, and measured at most
// 7.6e-8 (rounding amplified through the chain), hence kBlockTol = 1e-6 as kGptTol there.
#include "test/unit/GradCheckUtil.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace gradcheck;
using tessel::Shape;
using tessel::Tensor;

constexpr double kTol = 5e-8;       // see the file comment
constexpr double kBlockTol = 1e-6;  // the composed block; see the file comment

TEST(GradCheckNorm, Silu) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  checkActivation(rng, "silu", [](const Tensor& x) { return tessel::silu(x); }, kTol);
}

// Both operands get a gradient: dgate = dy * up * silu'(gate), dup = dy * silu(gate).
TEST(GradCheckNorm, Swiglu) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Shape s : {Shape{1}, Shape{7}, Shape{2, 3, 11}}) {
    GradCase c(rng);
    Tensor gate = c.param("gate", s), up = c.param("up", s);
    c.setLoss({tessel::swiglu(gate, up)});
    c.check("swiglu " + str(s), kTol);
  }
}

// The input and the weight. C = 1 is the degenerate row: y = w x / sqrt(x^2 + eps), whose
// third derivative grows like eps / |x|^5 near 0 (at |x| = 3e-3 the truncation error alone is
// ~1e-6): inputs are kept at least 0.1 from 0, as relu's are from its kink, where it is ~1e-12.
TEST(GradCheckNorm, RmsNormInputAndWeight) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Shape rows : {Shape{1}, Shape{3}, Shape{2, 3}})
    for (int64_t channels : {1, 7, 33}) {
      GradCase c(rng);
      Shape s = rows;
      s.push_back(channels);
      Tensor x = c.param("x", s), w = c.param("weight", {channels});
      c.adjust("x", [](ref::Tensor& t) {
        for (double& v : t.data) v += v >= 0.0 ? 0.1 : -0.1;
      });
      c.setLoss({tessel::rms_norm(x, w)});
      c.check("rms_norm " + str(s), kTol);
    }
}

// A large epsilon changes every gradient, so this fails if the VJP drops the attribute.
TEST(GradCheckNorm, RmsNormKeepsItsEpsilon) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  GradCase c(rng);
  Tensor x = c.param("x", {3, 7}), w = c.param("weight", {7});
  c.setLoss({tessel::rms_norm(x, w, /*eps=*/0.5)});
  c.check("rms_norm 3x7 eps 0.5", kTol);
}

/// x + w2(swiglu(w1(n(x)), w3(n(x)))) with n an RMSNorm: the Llama MLP sublayer, so the
/// gradients of the norm's weight and of a value read by two projections add up.
class SwigluBlock : public GradModel {
 public:
  SwigluBlock()
      : norm(this, "norm", 6),
        w1(this, "w1", 6, 10, {.bias = false}),
        w3(this, "w3", 6, 10, {.bias = false}),
        w2(this, "w2", 10, 6, {.bias = false}) {}
  tessel::RMSNorm norm;
  tessel::Linear w1, w3, w2;
};

TEST(GradCheckNorm, PreNormSwigluBlock) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  GradCase<SwigluBlock> c(rng);
  Tensor x = c.input({2, 3, 6});
  SwigluBlock& m = c.model();
  Tensor h = m.norm(x);
  c.setLoss({x + m.w2(tessel::swiglu(m.w1(h), m.w3(h)))});
  c.check("rms_norm + swiglu mlp 2x3x6 H=10", kBlockTol);
}

}  // namespace
