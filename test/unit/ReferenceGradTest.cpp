// Tests of the backward reference kernels (runtime/reference/ReferenceGrad.h).
//
// Promise: every backward kernel is checked against central finite differences of the FORWARD
// kernel of Reference.h (never against its own formula), on fresh random inputs each run and
// on shapes with sizes 1, 7 and 33; broadcast is checked as the adjoint of reduceSum; a few
// hand-worked cases pin the conventions (relu'(0) = 0, masked softmax entries, repeated
// embedding indices). The optimizer and norm tests are in ReferenceOptimizerTest.cpp.
//
// Finite differences. For a kernel y = f(x) and a random cotangent dy, the numeric
// vector-Jacobian product is dx_i = <dy, f(x + h e_i) - f(x - h e_i)> / (2h), h = 1e-6
// max(1, |x_i|). Its error is the central-difference truncation h^2 |f'''| / 6 ~ 1e-12, plus
// rounding: each output f_j carries an ulp or two (eps |f_j|), which the division by 2h turns
// into ~eps |f_j| / h ~ 2e-10 |f_j| per output that moves. The difference is formed output
// by output before the dot with dy, so outputs that do not depend on x_i cancel exactly and
// add no noise; at most 33 outputs move here (a layerNorm or softmax row, or every term of the
// cross-entropy's log-sum-exp), each |f_j| <~ 4, so the error is a sum of <= 33 independent
// roundings of ~1e-10 each. Measured over 10000 runs of every shape: at most 3.3e-9 (layerNorm
// dx with C = 33; gelu and softmax ~2e-10), a near-Gaussian spread of sigma ~7e-10. Hence
// kFdTol = 1e-8 relative to max(1, |dx_i|): 3x the largest error seen and ~15 sigma, while a
// real bug (a wrong sign, a missing term, a wrong index) is an O(1e-2 .. 1) error.
#include "runtime/reference/ReferenceGrad.h"
#include "runtime/reference/ReferenceNorm.h"

#include "test/unit/ReferenceTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace tessel::ref {
namespace {

using testutil::expectShapeError;
using testutil::Rng;

constexpr double kStep = 1e-6;   // relative finite-difference step, see the file comment
constexpr double kFdTol = 1e-8;  // relative to max(1, |dx_i|), see the file comment

using Forward = std::function<Tensor(const Tensor&)>;

/// Central-difference vector-Jacobian product dy^T (df/dx) of a forward kernel at x.
Tensor numericVjp(const Forward& f, const Tensor& x, const Tensor& dy) {
  Tensor dx(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    Tensor plus = x, minus = x;
    double h = kStep * std::max(1.0, std::abs(x.data[i]));
    plus.data[i] += h;
    minus.data[i] -= h;
    double width = plus.data[i] - minus.data[i];  // the step actually taken, after rounding
    Tensor fp = f(plus), fm = f(minus);
    EXPECT_EQ(fp.shape, dy.shape) << "the cotangent must have the forward output's shape";
    double acc = 0.0;
    for (int64_t j = 0; j < dy.numel(); ++j) acc += dy.data[j] * (fp.data[j] - fm.data[j]);
    dx.data[i] = acc / width;
  }
  return dx;
}

void expectMatchesNumeric(const Tensor& analytic, const Tensor& numeric, const char* what) {
  ASSERT_EQ(shapeString(analytic.shape), shapeString(numeric.shape)) << what;
  for (int64_t i = 0; i < numeric.numel(); ++i)
    EXPECT_NEAR(analytic.data[i], numeric.data[i],
                kFdTol * std::max(1.0, std::abs(numeric.data[i])))
        << what << " at flat position " << i;
}

std::string shapeTrace(const std::vector<int64_t>& shape) { return "shape " + shapeString(shape); }

// ---- activations ----------------------------------------------------------------------------

TEST(ReferenceGrad, GeluMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {7}, {33}, {3, 7, 33}}) {
    SCOPED_TRACE(shapeTrace(shape));
    Tensor x = rng.tensor(shape, -4.0, 4.0), dy = rng.tensor(shape);
    expectMatchesNumeric(geluBackward(x, dy), numericVjp(gelu, x, dy), "dx");
  }
}

TEST(ReferenceGrad, GeluAtKnownPoints) {
  // gelu'(0) = 0.5 exactly; far from 0 gelu is x (slope 1) or 0 (slope 0) up to ~1e-40.
  Tensor dx = geluBackward(Tensor({3}, {0.0, 30.0, -30.0}), Tensor({3}, {2.0, 3.0, 4.0}));
  EXPECT_EQ(dx.data[0], 1.0);
  EXPECT_NEAR(dx.data[1], 3.0, 1e-15);
  EXPECT_NEAR(dx.data[2], 0.0, 1e-15);
}

TEST(ReferenceGrad, ReluMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {7}, {33}, {7, 33}}) {
    SCOPED_TRACE(shapeTrace(shape));
    // |x| >= 0.1 >> h, so no step crosses the kink at 0.
    Tensor x = rng.tensor(shape, 0.1, 2.0), dy = rng.tensor(shape);
    for (double& v : x.data)
      if (rng.uniform(0.0, 1.0) < 0.5) v = -v;
    expectMatchesNumeric(reluBackward(x, dy), numericVjp(relu, x, dy), "dx");
  }
}

TEST(ReferenceGrad, ReluSubgradientAtZeroIsZero) {
  Tensor dx = reluBackward(Tensor({4}, {-1.0, 0.0, -0.0, 2.0}), Tensor::filled({4}, 5.0));
  EXPECT_EQ(dx.data, (std::vector<double>{0.0, 0.0, 0.0, 5.0}));
}

// ---- normalisation --------------------------------------------------------------------------

TEST(ReferenceGrad, LayerNormMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const double eps = 1e-5;
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{1, 1}, {7}, {33}, {3, 33}, {33, 7}, {2, 3, 7}}) {
    SCOPED_TRACE(shapeTrace(shape));
    int64_t c = shape.back();
    Tensor x = rng.tensor(shape), gamma = rng.tensor({c}, 0.5, 1.5), beta = rng.tensor({c});
    Tensor dy = rng.tensor(shape);
    LayerNormGrads g = layerNormBackward(x, gamma, dy, eps);
    expectMatchesNumeric(
        g.dx, numericVjp([&](const Tensor& t) { return layerNorm(t, gamma, beta, eps); }, x, dy),
        "dx");
    expectMatchesNumeric(
        g.dgamma,
        numericVjp([&](const Tensor& t) { return layerNorm(x, t, beta, eps); }, gamma, dy),
        "dgamma");
    expectMatchesNumeric(
        g.dbeta, numericVjp([&](const Tensor& t) { return layerNorm(x, gamma, t, eps); }, beta, dy),
        "dbeta");
  }
}

TEST(ReferenceGrad, SoftmaxMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (bool causal : {false, true}) {
    std::vector<std::vector<int64_t>> shapes =
        causal ? std::vector<std::vector<int64_t>>{{1, 1}, {7, 7}, {2, 7, 7}, {33, 33}}
               : std::vector<std::vector<int64_t>>{{1}, {7}, {33}, {3, 33}, {2, 7, 1}};
    for (const std::vector<int64_t>& shape : shapes) {
      SCOPED_TRACE(shapeTrace(shape) + (causal ? " causal" : ""));
      Tensor x = rng.tensor(shape, -3.0, 3.0), dy = rng.tensor(shape);
      Tensor dx = softmaxBackward(softmax(x, causal), dy);
      expectMatchesNumeric(
          dx, numericVjp([&](const Tensor& t) { return softmax(t, causal); }, x, dy), "dx");
    }
  }
}

TEST(ReferenceGrad, SoftmaxTwoEqualLogitsByHand) {
  // y = [1/2, 1/2], dy = [1, 0]: sum(dy y) = 1/2, dx = y (dy - 1/2) = [1/4, -1/4] (exact).
  Tensor dx = softmaxBackward(Tensor({2}, {0.5, 0.5}), Tensor({2}, {1.0, 0.0}));
  EXPECT_EQ(dx.data, (std::vector<double>{0.25, -0.25}));
  // A causal row whose masked entry has y = 0 gets dx = 0 there, whatever dy is.
  dx = softmaxBackward(Tensor({2, 2}, {1.0, 0.0, 0.5, 0.5}), Tensor({2, 2}, {3.0, 7.0, 1.0, 0.0}));
  EXPECT_EQ(dx.data, (std::vector<double>{0.0, 0.0, 0.25, -0.25}));
}

// silu and rmsNorm (ReferenceNorm.h): the Llama block's activation and norm.
TEST(ReferenceGrad, SiluMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {7}, {33}, {3, 7, 33}}) {
    SCOPED_TRACE(shapeTrace(shape));
    Tensor x = rng.tensor(shape, -6.0, 6.0), dy = rng.tensor(shape);
    expectMatchesNumeric(siluBackward(x, dy), numericVjp(silu, x, dy), "dx");
  }
}

TEST(ReferenceGrad, SiluAtKnownPoints) {
  // silu'(0) = s(0) = 1/2; at ln 3, s = 3/4 and silu' = 3/4 (1 + ln 3 / 4); far out silu' is 1
  // (slope of x) or 0 up to ~1e-15.
  const double l3 = std::log(3.0);
  Tensor dx = siluBackward(Tensor({4}, {0.0, l3, 40.0, -40.0}), Tensor({4}, {2.0, 1.0, 3.0, 4.0}));
  EXPECT_EQ(dx.data[0], 1.0);
  EXPECT_NEAR(dx.data[1], 0.75 * (1.0 + l3 / 4.0), 1e-15);
  EXPECT_NEAR(dx.data[2], 3.0, 1e-15);
  EXPECT_NEAR(dx.data[3], 0.0, 1e-15);
}

TEST(ReferenceGrad, RmsNormMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const double eps = 1e-5;
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{1, 1}, {7}, {33}, {3, 33}, {33, 7}, {2, 3, 7}}) {
    SCOPED_TRACE(shapeTrace(shape));
    int64_t c = shape.back();
    Tensor x = rng.tensor(shape), weight = rng.tensor({c}, 0.5, 1.5), dy = rng.tensor(shape);
    RmsNormGrads g = rmsNormBackward(x, weight, dy, eps);
    expectMatchesNumeric(
        g.dx, numericVjp([&](const Tensor& t) { return rmsNorm(t, weight, eps); }, x, dy), "dx");
    expectMatchesNumeric(
        g.dweight, numericVjp([&](const Tensor& t) { return rmsNorm(x, t, eps); }, weight, dy),
        "dweight");
  }
}

// With eps = 0 and weight 1, y(a x) = y(x) for every a > 0, so the derivative along x itself
// is 0: <dx, x> = 0 for any dy (a property of the formula, not a recomputation of it).
TEST(ReferenceGrad, RmsNormGradientIsOrthogonalToTheInput) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  Tensor x = rng.tensor({33}), dy = rng.tensor({33});
  Tensor dx = rmsNormBackward(x, Tensor::filled({33}, 1.0), dy, 0.0).dx;
  double dot = 0.0;
  for (int64_t i = 0; i < 33; ++i) dot += dx.data[i] * x.data[i];
  EXPECT_NEAR(dot, 0.0, 1e-13);  // 33 O(1) products: ~1e-15 rounding
}

// ---- gather and loss ------------------------------------------------------------------------

TEST(ReferenceGrad, EmbeddingMatchesFiniteDifferencesWithRepeatedIndices) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  struct Case {
    int64_t vocab, channels;
    std::vector<int64_t> indexShape;
  };
  // 33 indices into a vocabulary of 7 (or 1) repeat by pigeonhole; 7 into 33 leave rows unused.
  for (const Case& k : {Case{1, 7, {7}}, Case{7, 1, {33}}, Case{7, 33, {3, 11}},
                        Case{33, 7, {7}}, Case{7, 7, {}}}) {
    SCOPED_TRACE(testing::Message() << "V=" << k.vocab << " C=" << k.channels << " indices "
                                    << shapeString(k.indexShape));
    Tensor indices(k.indexShape);
    for (double& v : indices.data) v = rng.index(k.vocab);
    std::vector<int64_t> outShape = k.indexShape;
    outShape.push_back(k.channels);
    Tensor table = rng.tensor({k.vocab, k.channels}), dy = rng.tensor(outShape);
    expectMatchesNumeric(
        embeddingBackward(indices, dy, k.vocab),
        numericVjp([&](const Tensor& t) { return embedding(t, indices); }, table, dy), "dtable");
  }
}

TEST(ReferenceGrad, EmbeddingRepeatedIndicesByHand) {
  // Rows 0 and 2 of dy both go to table row 2; row 1 of the table is never gathered.
  Tensor dtable = embeddingBackward(Tensor({3}, {2, 0, 2}),
                                    Tensor({3, 2}, {1.0, 2.0, 3.0, 4.0, 10.0, 20.0}), 3);
  EXPECT_EQ(shapeString(dtable.shape), "3x2");
  EXPECT_EQ(dtable.data, (std::vector<double>{3.0, 4.0, 0.0, 0.0, 11.0, 22.0}));
}

TEST(ReferenceGrad, CrossEntropyMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 1}, {7}, {33}, {3, 33}, {2, 7, 7}}) {
    SCOPED_TRACE(shapeTrace(shape));
    int64_t v = shape.back();
    Tensor logits = rng.tensor(shape, -3.0, 3.0);
    Tensor targets(std::vector<int64_t>(shape.begin(), shape.end() - 1));
    for (double& t : targets.data) t = rng.index(v);
    Tensor dloss = Tensor::filled({}, rng.uniform(-2.0, 2.0));
    expectMatchesNumeric(
        crossEntropyBackward(logits, targets, dloss),
        numericVjp([&](const Tensor& t) { return crossEntropy(t, targets); }, logits, dloss),
        "dlogits");
  }
}

TEST(ReferenceGrad, CrossEntropyUniformLogitsByHand) {
  // One token, V = 4, equal logits: softmax = 1/4, so dlogits = dloss (1/4 - onehot(1)), and
  // a second identical token halves each row (the loss is a mean over N = 2 tokens).
  Tensor one = crossEntropyBackward(Tensor({4}), Tensor::filled({}, 1.0), Tensor::filled({}, 2.0));
  EXPECT_EQ(one.data, (std::vector<double>{0.5, -1.5, 0.5, 0.5}));
  Tensor two = crossEntropyBackward(Tensor({2, 4}), Tensor({2}, {1.0, 1.0}),
                                    Tensor::filled({}, 2.0));
  EXPECT_EQ(two.data, (std::vector<double>{0.25, -0.75, 0.25, 0.25, 0.25, -0.75, 0.25, 0.25}));
}

// ---- broadcast ------------------------------------------------------------------------------

TEST(ReferenceGrad, BroadcastIsAdjointOfReduceSum) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  struct Case {
    std::vector<int64_t> shape, dims;
  };
  for (const Case& k : {Case{{7, 1, 33}, {0, 2}}, Case{{33}, {0}}, Case{{2, 7, 3}, {1}},
                        Case{{7, 33}, {}}, Case{{3, 7, 2, 5}, {0, 3}}, Case{{1, 7}, {0, 1}}}) {
    SCOPED_TRACE(testing::Message() << "shape " << shapeString(k.shape) << ", "
                                    << k.dims.size() << " inserted dims");
    std::vector<int64_t> xShape;
    for (size_t d = 0; d < k.shape.size(); ++d)
      if (std::find(k.dims.begin(), k.dims.end(), static_cast<int64_t>(d)) == k.dims.end())
        xShape.push_back(k.shape[d]);
    Tensor x = rng.tensor(xShape), y = rng.tensor(k.shape);
    Tensor bx = broadcast(x, k.shape, k.dims), ry = reduceSum(y, k.dims);
    ASSERT_EQ(shapeString(bx.shape), shapeString(k.shape));
    ASSERT_EQ(shapeString(ry.shape), shapeString(x.shape));
    // <broadcast(x), y> = <x, reduceSum(y)>: the same products summed in a different order,
    // so they agree to rounding, ~n eps sum|x y| with n <= 231 terms; 1e-13 relative to that
    // sum is ~2x the worst case and far below any indexing bug (O(1) relative).
    double lhs = 0.0, rhs = 0.0, magnitude = 0.0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      lhs += bx.data[i] * y.data[i];
      magnitude += std::abs(bx.data[i] * y.data[i]);
    }
    for (int64_t i = 0; i < x.numel(); ++i) rhs += x.data[i] * ry.data[i];
    EXPECT_NEAR(lhs, rhs, 1e-13 * magnitude);
  }
}

TEST(ReferenceGrad, BroadcastByHand) {
  Tensor x({2}, {1.0, 2.0});
  EXPECT_EQ(broadcast(x, {2, 3}, {1}).data, (std::vector<double>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(broadcast(x, {3, 2}, {0}).data, (std::vector<double>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(broadcast(Tensor::filled({}, 4.0), {2, 2}, {0, 1}).data,
            (std::vector<double>{4, 4, 4, 4}));
  EXPECT_EQ(broadcast(x, {2}, {}).data, x.data);
  EXPECT_EQ(broadcast(x, {0, 2}, {0}).numel(), 0);
}

// ---- error paths ----------------------------------------------------------------------------

TEST(ReferenceGradErrors, ElementwiseAndSoftmax) {
  expectShapeError([] { geluBackward(Tensor({2, 3}), Tensor({3, 2})); },
                   {"geluBackward", "x is 2x3", "dy is 3x2"});
  expectShapeError([] { reluBackward(Tensor({2, 3}), Tensor({6})); },
                   {"reluBackward", "x is 2x3", "dy is 6"});
  expectShapeError([] { softmaxBackward(Tensor({2, 3}), Tensor({2, 4})); },
                   {"softmaxBackward", "y is 2x3", "dy is 2x4"});
  expectShapeError([] { softmaxBackward(Tensor(), Tensor()); }, {"softmaxBackward", "scalar"});
  Tensor bad({2, 3});
  bad.data.pop_back();
  expectShapeError([&] { geluBackward(bad, Tensor({2, 3})); }, {"2x3", "5 values"});
}

TEST(ReferenceGradErrors, LayerNorm) {
  expectShapeError([] { layerNormBackward(Tensor({2, 4}), Tensor({3}), Tensor({2, 4}), 1e-5); },
                   {"layerNormBackward", "x is 2x4", "gamma is 3"});
  expectShapeError([] { layerNormBackward(Tensor({2, 4}), Tensor({4}), Tensor({4, 2}), 1e-5); },
                   {"x is 2x4", "dy is 4x2"});
  expectShapeError([] { layerNormBackward(Tensor(), Tensor({1}), Tensor(), 1e-5); }, {"scalar"});
}

TEST(ReferenceGradErrors, EmbeddingAndCrossEntropy) {
  expectShapeError([] { embeddingBackward(Tensor({3}), Tensor({4, 2}), 5); },
                   {"embeddingBackward", "indices is 3", "dy is 4x2"});
  expectShapeError([] { embeddingBackward(Tensor({3}), Tensor({3}), 5); },
                   {"indices is 3", "dy is 3"});
  expectShapeError([] { embeddingBackward(Tensor({2}, {0, 5}), Tensor({2, 2}), 5); },
                   {"index 5", "position [1]", "indices 2", "vocab 5"});
  expectShapeError([] { embeddingBackward(Tensor({1}), Tensor({1, 2}), -1); }, {"vocab is -1"});
  expectShapeError([] { crossEntropyBackward(Tensor({2, 5}), Tensor({3}), Tensor()); },
                   {"crossEntropyBackward", "logits is 2x5", "targets is 3"});
  expectShapeError([] { crossEntropyBackward(Tensor({2, 5}), Tensor({2}), Tensor({1})); },
                   {"dloss", "shape 1", "logits 2x5"});
  expectShapeError([] { crossEntropyBackward(Tensor({2, 5}), Tensor({2}, {0, 5}), Tensor()); },
                   {"target 5", "position [1]", "logits 2x5"});
}

TEST(ReferenceGradErrors, Broadcast) {
  expectShapeError([] { broadcast(Tensor({3}), {2, 4}, {0}); },
                   {"broadcast", "x of shape 3", "to 2x4", "[0]"});
  expectShapeError([] { broadcast(Tensor({3}), {2, 3, 4}, {2, 0}); }, {"[2, 0]", "2x3x4"});
  expectShapeError([] { broadcast(Tensor({3}), {3, 3}, {0, 0}); }, {"[0, 0]", "3x3"});
  expectShapeError([] { broadcast(Tensor({3}), {3, 3}, {2}); }, {"[2]", "to 3x3"});
  expectShapeError([] { broadcast(Tensor({3}), {-3, 3}, {0}); }, {"-3x3"});
}

}  // namespace
}  // namespace tessel::ref
