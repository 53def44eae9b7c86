// Tests of the optimizer reference kernels (runtime/reference/ReferenceGrad.h): adamwStep,
// sgdStep, globalNorm and clipCoefficient.
//
// Promise: each rule is checked against values derived by hand from the torch.optim update
// rules (closed forms over 1-3 steps), against a textbook reimplementation written in a
// different order of operations, and on the properties that tell look-alike rules apart:
// AdamW's weight decay is decoupled (never enters m or v) and its eps is added after the bias
// correction; SGD's weight decay is coupled (it enters the momentum buffer); the first
// momentum buffer is the gradient itself. (A separate manual run against torch.optim 1.13 in
// f64, 3 steps on random tensors, agreed to a few ulps: AdamW |dp| <= 2.2e-16, SGD <= 7e-15
// on parameters of O(10), the difference being torch's fused multiply-adds; these tests need
// no Python.)
//
// Tolerances. The closed forms are algebraically exact, so the kernel and the expectation
// differ only by rounding: a handful of operations per element, each <= 1 ulp, on O(1)
// parameters; kTol = 1e-14 absolute (~50 ulps at 1) leaves ample margin, while any wrong rule
// (a missing bias correction, eps in the wrong place, coupled vs decoupled decay) moves the
// parameter by >= 1e-5 here. Values that are exact in binary are compared with EXPECT_EQ.
#include "runtime/reference/ReferenceGrad.h"

#include "test/unit/ReferenceTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tessel::ref {
namespace {

using testutil::expectShapeError;
using testutil::Rng;

constexpr double kTol = 1e-14;  // see the file comment

void expectAllNear(const Tensor& actual, const std::vector<double>& expected, const char* what,
                   double tol = kTol) {
  ASSERT_EQ(actual.data.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual.data[i], expected[i], tol) << what << " at flat position " << i;
}

double sign(double x) { return x > 0 ? 1.0 : -1.0; }

// ---- AdamW ----------------------------------------------------------------------------------

TEST(ReferenceAdamW, FirstStepMovesByLrTimesSign) {
  // Step 1, no decay: m = (1-b1) g, v = (1-b2) g^2, so the bias-corrected m/(1-b1) = g and
  // sqrt(v/(1-b2)) = |g|: p1 = p0 - lr g / (|g| + eps), i.e. lr sign(g) up to eps/|g| ~ 1e-8.
  Tensor p({4}, {1.0, -2.0, 0.5, 3.0}), g({4}, {0.3, -0.7, 2.0, -1e-3}), m({4}), v({4});
  AdamWConfig c{.lr = 1e-2};
  adamwStep(p, g, m, v, c);
  std::vector<double> p0 = {1.0, -2.0, 0.5, 3.0}, expP, expM, expV;
  for (size_t i = 0; i < 4; ++i) {
    double gi = g.data[i];
    expP.push_back(p0[i] - c.lr * gi / (std::abs(gi) + c.eps));
    expM.push_back((1 - c.beta1) * gi);
    expV.push_back((1 - c.beta2) * gi * gi);
    // |lr g / (|g| + eps) - lr sign(g)| = lr eps / (|g| + eps) < 1e-7 for |g| >= 1e-3.
    EXPECT_NEAR(p.data[i], p0[i] - c.lr * sign(gi), 1e-7);
  }
  expectAllNear(p, expP, "param");
  expectAllNear(m, expM, "m");
  expectAllNear(v, expV, "v");
}

TEST(ReferenceAdamW, ConstantGradientThreeSteps) {
  // With the same g every step, m_t = (1-b1^t) g and v_t = (1-b2^t) g^2, so the bias
  // correction cancels exactly and every step moves p by lr g / (|g| + eps).
  Tensor p({3}, {0.25, -1.0, 2.0}), g({3}, {0.5, -0.125, 4.0}), m({3}), v({3});
  std::vector<double> p0 = p.data;
  AdamWConfig c{.lr = 3e-3, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-8};
  for (int64_t t = 1; t <= 3; ++t) {
    c.step = t;
    adamwStep(p, g, m, v, c);
    std::vector<double> expP, expM, expV;
    for (size_t i = 0; i < 3; ++i) {
      double gi = g.data[i];
      expP.push_back(p0[i] - t * c.lr * gi / (std::abs(gi) + c.eps));
      expM.push_back((1 - std::pow(c.beta1, t)) * gi);
      expV.push_back((1 - std::pow(c.beta2, t)) * gi * gi);
    }
    SCOPED_TRACE(testing::Message() << "after step " << t);
    expectAllNear(p, expP, "param");
    expectAllNear(m, expM, "m");
    expectAllNear(v, expV, "v");
  }
}

TEST(ReferenceAdamW, EpsIsAddedAfterBiasCorrection) {
  // eps = 0.5, g = 1, step 1: torch's denominator is sqrt(v / (1-b2)) + eps = 1.5, so the
  // step is lr / 1.5. (eps added to the uncorrected sqrt(v) = 0.0316 would give lr / 0.53.)
  Tensor p({1}, {1.0}), g({1}, {1.0}), m({1}), v({1});
  adamwStep(p, g, m, v, AdamWConfig{.lr = 0.3, .eps = 0.5});
  EXPECT_NEAR(p.data[0], 1.0 - 0.3 / 1.5, kTol);
}

TEST(ReferenceAdamW, TwoDifferentGradientsByHand) {
  // m2 = b1 (1-b1) g1 + (1-b1) g2, v2 = b2 (1-b2) g1^2 + (1-b2) g2^2, and
  // p2 = p1 - lr (m2 / (1-b1^2)) / (sqrt(v2 / (1-b2^2)) + eps). Single element, g1 = 1,
  // g2 = -2, b1 = 0.5, b2 = 0.75: m2 = -0.75, mhat = -1; v2 = 1.1875, vhat = 19/7.
  Tensor p({1}, {0.0}), m({1}), v({1});
  AdamWConfig c{.lr = 0.1, .beta1 = 0.5, .beta2 = 0.75, .eps = 1e-8};
  adamwStep(p, Tensor({1}, {1.0}), m, v, c);
  double p1 = -0.1 * 1.0 / (1.0 + 1e-8);
  EXPECT_NEAR(p.data[0], p1, kTol);
  c.step = 2;
  adamwStep(p, Tensor({1}, {-2.0}), m, v, c);
  EXPECT_EQ(m.data[0], -0.75);  // every intermediate is exact in binary
  EXPECT_EQ(v.data[0], 1.1875);
  EXPECT_NEAR(p.data[0], p1 + 0.1 / (std::sqrt(19.0 / 7.0) + 1e-8), kTol);
}

TEST(ReferenceAdamW, WeightDecayIsDecoupled) {
  // Zero gradient: m and v stay exactly 0, the Adam term is 0 / (0 + eps) = 0, and decay
  // alone scales p by (1 - lr wd). Coupled (L2) decay would instead feed wd p into m and
  // move p by ~lr sign(p) = 1e-2, a thousand times the 1e-5 decoupled change.
  Tensor p({3}, {1.0, -2.0, 0.5}), m({3}), v({3});
  AdamWConfig c{.lr = 1e-2, .weightDecay = 1e-3};
  adamwStep(p, Tensor({3}), m, v, c);
  expectAllNear(p, {1.0 * (1 - 1e-5), -2.0 * (1 - 1e-5), 0.5 * (1 - 1e-5)}, "param");
  EXPECT_EQ(m.data, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(v.data, (std::vector<double>{0, 0, 0}));
  // With a gradient, decay and the Adam step simply add up.
  Tensor q({1}, {2.0}), mq({1}), vq({1});
  adamwStep(q, Tensor({1}, {-0.5}), mq, vq, AdamWConfig{.lr = 0.1, .weightDecay = 0.2});
  EXPECT_NEAR(q.data[0], 2.0 * (1 - 0.02) + 0.1 * 0.5 / (0.5 + 1e-8), kTol);
}

TEST(ReferenceAdamW, MatchesTextbookFormOnRandomTensors) {
  // The same rule written as in the paper, per scalar and in another order: decay first, then
  // mhat = m / (1-b1^t), vhat = v / (1-b2^t), p -= lr mhat / (sqrt(vhat) + eps). Different
  // rounding, so 1e-13 relative (~500 ulps) over three steps instead of bitwise equality.
  Rng rng;
  SCOPED_TRACE(rng.trace());
  Tensor p = rng.tensor({7, 33}), m({7, 33}), v({7, 33});
  std::vector<double> ep = p.data, em(p.numel(), 0.0), ev(p.numel(), 0.0);
  AdamWConfig c{.lr = rng.uniform(1e-4, 1e-1), .beta1 = rng.uniform(0.5, 0.99),
                .beta2 = rng.uniform(0.9, 0.9999), .eps = 1e-8,
                .weightDecay = rng.uniform(0.0, 0.1)};
  for (int64_t t = 1; t <= 3; ++t) {
    Tensor g = rng.tensor({7, 33}, -2.0, 2.0);
    c.step = t;
    adamwStep(p, g, m, v, c);
    for (size_t i = 0; i < ep.size(); ++i) {
      double gi = g.data[i];
      ep[i] -= c.lr * c.weightDecay * ep[i];
      em[i] += (1 - c.beta1) * (gi - em[i]);
      ev[i] += (1 - c.beta2) * (gi * gi - ev[i]);
      double mhat = em[i] / (1 - std::pow(c.beta1, t)), vhat = ev[i] / (1 - std::pow(c.beta2, t));
      ep[i] -= c.lr * mhat / (std::sqrt(vhat) + c.eps);
    }
    for (size_t i = 0; i < ep.size(); ++i)
      ASSERT_NEAR(p.data[i], ep[i], 1e-13 * std::max(1.0, std::abs(ep[i])))
          << "step " << t << " position " << i;
  }
}

// ---- SGD ------------------------------------------------------------------------------------

TEST(ReferenceSgd, PlainStepLeavesBufferAlone) {
  // Momentum 0: p <- p - lr g, and the buffer (here of an unrelated shape) is not touched.
  Tensor p({2}, {1.0, -1.0}), buf = Tensor::filled({5}, 9.0);
  sgdStep(p, Tensor({2}, {0.5, 0.25}), buf, 0.5, 0.0, 0.0, true);
  EXPECT_EQ(p.data, (std::vector<double>{0.75, -1.125}));  // exact in binary
  EXPECT_EQ(buf.data, std::vector<double>(5, 9.0));
}

TEST(ReferenceSgd, FirstBufferIsGradientThenAccumulates) {
  // Constant g, momentum mu: buf_1 = g (not mu*buf_0 + g: the stale 7s are ignored),
  // buf_2 = (1 + mu) g, buf_3 = (1 + mu + mu^2) g, p_3 = p_0 - lr g (3 + 2 mu + mu^2).
  const double lr = 0.1, mu = 0.9;
  Tensor p({2}, {1.0, 2.0}), g({2}, {0.5, -1.5}), buf = Tensor::filled({2}, 7.0);
  std::vector<double> bufFactor = {1.0, 1.0 + mu, 1.0 + mu + mu * mu},
                      pFactor = {1.0, 2.0 + mu, 3.0 + 2 * mu + mu * mu};
  for (int t = 0; t < 3; ++t) {
    sgdStep(p, g, buf, lr, mu, 0.0, t == 0);
    SCOPED_TRACE(testing::Message() << "after step " << t + 1);
    expectAllNear(buf, {bufFactor[t] * 0.5, bufFactor[t] * -1.5}, "buf");
    expectAllNear(p, {1.0 - lr * 0.5 * pFactor[t], 2.0 + lr * 1.5 * pFactor[t]}, "param");
  }
}

TEST(ReferenceSgd, WeightDecayIsCoupled) {
  // The decay is added to the gradient, so it enters the momentum buffer: buf_1 = g + wd p0
  // (decoupled decay would leave buf_1 = g), and buf_2 = mu buf_1 + g2 + wd p1.
  const double lr = 0.1, mu = 0.9, wd = 0.01;
  Tensor p({1}, {2.0}), buf({1});
  sgdStep(p, Tensor({1}, {0.5}), buf, lr, mu, wd, true);
  double buf1 = 0.5 + wd * 2.0, p1 = 2.0 - lr * buf1;
  EXPECT_NEAR(buf.data[0], buf1, kTol);
  EXPECT_NEAR(p.data[0], p1, kTol);
  sgdStep(p, Tensor({1}, {-0.25}), buf, lr, mu, wd, false);
  double buf2 = mu * buf1 + (-0.25 + wd * p1);
  EXPECT_NEAR(buf.data[0], buf2, kTol);
  EXPECT_NEAR(p.data[0], p1 - lr * buf2, kTol);
  // Without momentum, coupled decay is p - lr (g + wd p).
  Tensor q({1}, {3.0}), unused;
  sgdStep(q, Tensor({1}, {1.0}), unused, 0.5, 0.0, 0.1, true);
  EXPECT_NEAR(q.data[0], 3.0 - 0.5 * (1.0 + 0.1 * 3.0), kTol);
}

// ---- gradient norm and clipping -------------------------------------------------------------

TEST(ReferenceClip, GlobalNormClosedForms) {
  Tensor three({1}, {3.0}), four({1, 1}, {-4.0}), twoTwoOne({3}, {2.0, -2.0, 1.0}),
      six({2}, {0.0, 6.0}), empty({0, 3});
  EXPECT_EQ(globalNorm({&three, &four}), 5.0);  // a 3-4-5 triangle across two tensors
  EXPECT_EQ(globalNorm({&twoTwoOne}), 3.0);
  EXPECT_EQ(globalNorm({&twoTwoOne, &empty, &six}), std::sqrt(45.0));  // sqrt(9 + 36)
  Tensor zeros({7, 33});
  EXPECT_EQ(globalNorm({&zeros}), 0.0);
  EXPECT_EQ(globalNorm({}), 0.0);
}

TEST(ReferenceClip, ClipCoefficientClosedForms) {
  EXPECT_EQ(clipCoefficient(0.0, 1.0), 1.0);  // max / 1e-6 is huge, clamped to exactly 1
  EXPECT_EQ(clipCoefficient(0.5, 1.0), 1.0);  // below the maximum: exactly 1, not 0.999999
  EXPECT_EQ(clipCoefficient(10.0, 5.0), 5.0 / (10.0 + 1e-6));
  EXPECT_LT(clipCoefficient(5.0, 5.0), 1.0);  // at the maximum the 1e-6 makes it just below 1
  EXPECT_NEAR(clipCoefficient(5.0, 5.0), 1.0 - 2e-7, 1e-12);
  // Clipping the 3-4-5 gradient to norm 1 gives (0.6, 0.8), up to the 1e-6 in the divisor.
  Tensor g({2}, {3.0, 4.0});
  double k = clipCoefficient(globalNorm({&g}), 1.0);
  EXPECT_NEAR(3.0 * k, 0.6, 1e-6);
  EXPECT_NEAR(4.0 * k, 0.8, 1e-6);
}

// ---- error paths ----------------------------------------------------------------------------

TEST(ReferenceOptimizerErrors, MismatchedShapesAndBadArguments) {
  Tensor p({2, 3}), g({2, 3}), m({2, 3}), v({2, 3}), wrong({3, 2});
  expectShapeError([&] { adamwStep(p, wrong, m, v, {}); },
                   {"adamwStep", "param is 2x3", "grad is 3x2"});
  expectShapeError([&] { adamwStep(p, g, wrong, v, {}); }, {"param is 2x3", "m is 3x2"});
  expectShapeError([&] { adamwStep(p, g, m, wrong, {}); }, {"param is 2x3", "v is 3x2"});
  EXPECT_THROW(adamwStep(p, g, m, v, AdamWConfig{.step = 0}), std::invalid_argument);
  expectShapeError([&] { sgdStep(p, wrong, m, 0.1, 0.0, 0.0, true); },
                   {"sgdStep", "param is 2x3", "grad is 3x2"});
  expectShapeError([&] { sgdStep(p, g, wrong, 0.1, 0.9, 0.0, false); },
                   {"sgdStep", "param is 2x3", "buf is 3x2"});
  Tensor bad({2, 3});
  bad.data.pop_back();
  expectShapeError([&] { globalNorm({&g, &bad}); }, {"globalNorm", "2x3", "5 values"});
  EXPECT_THROW(globalNorm({&g, nullptr}), std::invalid_argument);
  EXPECT_THROW(clipCoefficient(-1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(clipCoefficient(std::nan(""), 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace tessel::ref
