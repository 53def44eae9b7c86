// Tests of the f64 reference kernels (runtime/reference/Reference.h): values.
//
// Promise: every kernel is checked against something it does not compute itself: values
// worked out by hand (closed forms), a naive recomputation written here, or an identity
// between kernels. Error paths are in ReferenceErrorTest.cpp.
//
// Tolerances. Unless a test says otherwise, comparisons use 1e-12 relative (plus 1e-14
// absolute for values near zero). The inputs are O(1) and the longest sum is 33 terms, so
// the f64 rounding error is a few dozen ulps (~1e-14 relative) at most; 1e-12 leaves two
// orders of margin while still catching any real bug (a wrong index or sign is O(1e-1)).
#include "runtime/reference/Reference.h"
#include "runtime/reference/ReferenceNorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

namespace tessel::ref {
namespace {

constexpr double kRelTol = 1e-12;  // see the file comment
constexpr double kAbsTol = 1e-14;  // for expected values near 0, same reasoning

/// A tensor of uniform values in [-1, 1) from a fixed seed, so failures reproduce.
Tensor randomTensor(std::vector<int64_t> shape, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Tensor t(std::move(shape));
  for (double& v : t.data) v = dist(gen);
  return t;
}

void expectClose(const Tensor& actual, const Tensor& expected, double rel = kRelTol,
                 double abs = kAbsTol) {
  ASSERT_EQ(shapeString(actual.shape), shapeString(expected.shape));
  ASSERT_EQ(actual.numel(), expected.numel());
  for (int64_t i = 0; i < actual.numel(); ++i)
    EXPECT_NEAR(actual.data[i], expected.data[i], abs + rel * std::abs(expected.data[i]))
        << "at flat position " << i;
}

// ---- Tensor and shapeString -----------------------------------------------------------------

TEST(ReferenceTensor, DefaultIsScalarZero) {
  Tensor s;
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.at({}), 0.0);
}

TEST(ReferenceTensor, FillAndRowMajorAt) {
  Tensor f = Tensor::filled({2, 3}, 1.5);
  EXPECT_EQ(f.numel(), 6);
  EXPECT_EQ(f.at({1, 2}), 1.5);
  Tensor t({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(t.at({0, 2}), 2.0);
  EXPECT_EQ(t.at({1, 0}), 3.0);  // last dimension contiguous
}

TEST(ReferenceTensor, ShapeString) {
  EXPECT_EQ(shapeString({4, 32, 64}), "4x32x64");
  EXPECT_EQ(shapeString({7}), "7");
  EXPECT_EQ(shapeString({0, 3}), "0x3");
  EXPECT_EQ(shapeString({}), "scalar");
}

// ---- matmul ---------------------------------------------------------------------------------

TEST(ReferenceMatmul, HandComputed2x2) {
  // [[1,2],[3,4]] [[5,6],[7,8]] = [[19,22],[43,50]]; small integers, so exact.
  Tensor a({2, 2}, {1, 2, 3, 4}), b({2, 2}, {5, 6, 7, 8});
  EXPECT_EQ(matmul(a, b, false, false).data, (std::vector<double>{19, 22, 43, 50}));
  // a^T b = [[1,3],[2,4]] b = [[26,30],[38,44]].
  EXPECT_EQ(matmul(a, b, true, false).data, (std::vector<double>{26, 30, 38, 44}));
}

/// Naive product of one [M, K] and one [K, N] matrix, each given as an element accessor.
template <typename A, typename B>
std::vector<double> naiveProduct(int64_t m, int64_t k, int64_t n, A elemA, B elemB) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) c[i * n + j] += elemA(i, p) * elemB(p, j);
  return c;
}

TEST(ReferenceMatmul, NaiveOddSizesAllTranspositions) {
  const std::vector<int64_t> sizes = {1, 7, 33};
  unsigned seed = 1;
  for (int64_t m : sizes)
    for (int64_t k : sizes)
      for (int64_t n : sizes)
        for (int ta = 0; ta < 2; ++ta)
          for (int tb = 0; tb < 2; ++tb) {
            SCOPED_TRACE(testing::Message() << "M=" << m << " K=" << k << " N=" << n
                                            << " transposeA=" << ta << " transposeB=" << tb);
            Tensor a = randomTensor(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                                    seed++);
            Tensor b = randomTensor(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                                    seed++);
            auto elemA = [&](int64_t i, int64_t p) { return ta ? a.at({p, i}) : a.at({i, p}); };
            auto elemB = [&](int64_t p, int64_t j) { return tb ? b.at({j, p}) : b.at({p, j}); };
            expectClose(matmul(a, b, ta, tb), Tensor({m, n}, naiveProduct(m, k, n, elemA, elemB)));
          }
}

TEST(ReferenceMatmul, BatchedWithBatchedAndSharedB) {
  const int64_t m = 7, k = 33, n = 1;
  Tensor a = randomTensor({2, 3, m, k}, 11);
  Tensor bBatched = randomTensor({2, 3, k, n}, 12);
  Tensor bShared = randomTensor({k, n}, 13);
  Tensor outBatched = matmul(a, bBatched, false, false);
  Tensor outShared = matmul(a, bShared, false, false);
  ASSERT_EQ(shapeString(outBatched.shape), "2x3x7x1");
  ASSERT_EQ(shapeString(outShared.shape), "2x3x7x1");
  for (int64_t x = 0; x < 2; ++x)
    for (int64_t y = 0; y < 3; ++y) {
      auto elemA = [&](int64_t i, int64_t p) { return a.at({x, y, i, p}); };
      auto batched = naiveProduct(m, k, n, elemA, [&](int64_t p, int64_t j) {
        return bBatched.at({x, y, p, j});
      });
      auto shared = naiveProduct(m, k, n, elemA, [&](int64_t p, int64_t j) {
        return bShared.at({p, j});
      });
      for (int64_t i = 0; i < m; ++i) {
        EXPECT_NEAR(outBatched.at({x, y, i, 0}), batched[i], kAbsTol + kRelTol * std::abs(batched[i]));
        EXPECT_NEAR(outShared.at({x, y, i, 0}), shared[i], kAbsTol + kRelTol * std::abs(shared[i]));
      }
    }
}

// ---- elementwise ----------------------------------------------------------------------------

TEST(ReferenceElementwise, EqualShapes) {
  Tensor a({3}, {1, 2, 3}), b({3}, {10, 20, 30});
  EXPECT_EQ(add(a, b).data, (std::vector<double>{11, 22, 33}));
  EXPECT_EQ(sub(a, b).data, (std::vector<double>{-9, -18, -27}));
  EXPECT_EQ(mul(a, b).data, (std::vector<double>{10, 40, 90}));
  EXPECT_EQ(scale(a, -2.0).data, (std::vector<double>{-2, -4, -6}));
}

TEST(ReferenceElementwise, SuffixBroadcastKeepsOperandOrder) {
  Tensor m({2, 3}, {1, 2, 3, 4, 5, 6}), row({3}, {10, 20, 30});
  Tensor s = add(m, row);
  EXPECT_EQ(shapeString(s.shape), "2x3");
  EXPECT_EQ(s.data, (std::vector<double>{11, 22, 33, 14, 25, 36}));
  // The shorter operand first: row - m, not m - row.
  EXPECT_EQ(sub(row, m).data, (std::vector<double>{9, 18, 27, 6, 15, 24}));
  // A scalar is the empty suffix of every shape.
  EXPECT_EQ(mul(Tensor::filled({}, 2.0), m).data, (std::vector<double>{2, 4, 6, 8, 10, 12}));
}

TEST(ReferenceElementwise, GeluAtKnownPoints) {
  // Expected values: the tanh formula evaluated with 30-digit mpmath, rounded to 17 digits
  // (gelu(1) also matches PyTorch's gelu(1.0, approximate="tanh") = 0.8411919906082768).
  Tensor x({6}, {0.0, 1.0, -1.0, 2.0, -0.5, 3.0});
  Tensor expected({6}, {0.0, 0.84119199060827670, -0.15880800939172330, 1.9545976940877750,
                        -0.15428599017485608, 2.9963626079182270});
  expectClose(gelu(x), expected);
  // Far tails: gelu(x) -> x for large x and -> 0 for very negative x (tanh saturates to +-1 in
  // f64, so these are exact).
  Tensor tails = gelu(Tensor({2}, {30.0, -30.0}));
  EXPECT_EQ(tails.data[0], 30.0);
  EXPECT_EQ(tails.data[1], 0.0);
}

TEST(ReferenceElementwise, Relu) {
  EXPECT_EQ(relu(Tensor({4}, {-2.0, 0.0, 0.5, 3.0})).data, (std::vector<double>{0, 0, 0.5, 3}));
}

// ---- layerNorm and softmax ------------------------------------------------------------------

TEST(ReferenceLayerNorm, OneTwoThreeClosedForm) {
  // x = [1,2,3]: mean 2, biased variance 2/3, so (x - mean) / sqrt(var) = [-1, 0, 1] * sqrt(3/2).
  const double r = std::sqrt(1.5);
  Tensor x({3}, {1, 2, 3});
  expectClose(layerNorm(x, Tensor::filled({3}, 1.0), Tensor::filled({3}, 0.0), 0.0), Tensor({3}, {-r, 0, r}));
  // gamma and beta apply per channel; eps adds to the variance: 1/sqrt(2/3 + 1/3) = 1.
  Tensor y = layerNorm(x, Tensor({3}, {2.0, 5.0, 0.5}), Tensor({3}, {1.0, -1.0, 0.25}), 1.0 / 3);
  expectClose(y, Tensor({3}, {-1.0, -1.0, 0.75}));
}

TEST(ReferenceLayerNorm, EveryRowHasZeroMeanUnitVariance) {
  Tensor x = randomTensor({2, 3, 33}, 21);
  Tensor y = layerNorm(x, Tensor::filled({33}, 1.0), Tensor::filled({33}, 0.0), 0.0);
  for (int64_t r = 0; r < 6; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < 33; ++i) mean += y.data[r * 33 + i] / 33;
    for (int64_t i = 0; i < 33; ++i) var += (y.data[r * 33 + i] - mean) * (y.data[r * 33 + i] - mean) / 33;
    EXPECT_NEAR(mean, 0.0, 1e-14);  // sum of 33 O(1) terms: ~1e-15 rounding
    EXPECT_NEAR(var, 1.0, kRelTol);
  }
}

TEST(ReferenceSoftmax, ZeroAndLnTwoGiveThirds) {
  // exp(0) : exp(ln 2) = 1 : 2.
  expectClose(softmax(Tensor({2}, {0.0, std::log(2.0)}), false), Tensor({2}, {1.0 / 3, 2.0 / 3}));
  // Max subtraction: an offset of +1000 overflows exp() without it, and -1000 underflows it
  // to 0/0; the result must be unchanged.
  for (double offset : {1000.0, -1000.0})
    expectClose(softmax(Tensor({2}, {offset, offset + std::log(2.0)}), false),
                Tensor({2}, {1.0 / 3, 2.0 / 3}));
}

TEST(ReferenceSoftmax, RowsSumToOne) {
  Tensor y = softmax(randomTensor({2, 5, 7}, 31), false);
  for (int64_t r = 0; r < 10; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < 7; ++i) {
      EXPECT_GT(y.data[r * 7 + i], 0.0);
      sum += y.data[r * 7 + i];
    }
    EXPECT_NEAR(sum, 1.0, kRelTol);
  }
}

TEST(ReferenceSoftmax, CausalMasksUpperTriangleExactly) {
  // By hand: row 0 keeps only column 0 (weight 1); row 1 is softmax([0, ln 2]).
  expectClose(softmax(Tensor({2, 2}, {5.0, -7.0, 0.0, std::log(2.0)}), true),
              Tensor({2, 2}, {1.0, 0.0, 1.0 / 3, 2.0 / 3}));

  const int64_t t = 6;
  Tensor x = randomTensor({2, 3, t, t}, 41);
  Tensor y = softmax(x, true);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t r = 0; r < t; ++r) {
        double sum = 0;
        for (int64_t c = 0; c < t; ++c) {
          if (c > r) {
            EXPECT_EQ(y.at({b, h, r, c}), 0.0) << "row " << r << " col " << c;
          }
          sum += y.at({b, h, r, c});
        }
        EXPECT_NEAR(sum, 1.0, kRelTol);
        // The kept prefix is the plain softmax of that prefix.
        Tensor prefix({r + 1}), rowOut({r + 1});
        for (int64_t c = 0; c <= r; ++c) {
          prefix.data[c] = x.at({b, h, r, c});
          rowOut.data[c] = y.at({b, h, r, c});
        }
        expectClose(rowOut, softmax(prefix, false));
      }
}

// ---- silu and rmsNorm (ReferenceNorm.h) ------------------------------------------------------

TEST(ReferenceSilu, ClosedForms) {
  // sigmoid(ln 3) = 1 / (1 + 1/3) = 3/4 and sigmoid(-ln 3) = 1/4, so silu(+-ln 3) = +-ln 3 * (3/4
  // or 1/4); sigmoid(0) = 1/2 gives silu(0) = 0.
  const double l3 = std::log(3.0);
  expectClose(silu(Tensor({3}, {0.0, l3, -l3})), Tensor({3}, {0.0, 0.75 * l3, -0.25 * l3}));
  // Tails: sigmoid(40) rounds to 1 in f64 (1 - 4e-18), and exp(800) overflows to inf, so
  // sigmoid(-800) is exactly 0.
  Tensor tails = silu(Tensor({2}, {40.0, -800.0}));
  EXPECT_EQ(tails.data[0], 40.0);
  EXPECT_EQ(tails.data[1], 0.0);
}

TEST(ReferenceRmsNorm, ClosedForms) {
  // x = [1, 7]: mean(x^2) = 25, so with eps = 0 the row is divided by 5.
  expectClose(rmsNorm(Tensor({2}, {1.0, 7.0}), Tensor::filled({2}, 1.0), 0.0), Tensor({2}, {0.2, 1.4}));
  // x = [1, 2, 3]: mean(x^2) = 14/3, and eps = 1/3 makes it 5; the weight applies per channel.
  const double r = 1.0 / std::sqrt(5.0);
  Tensor y = rmsNorm(Tensor({3}, {1, 2, 3}), Tensor({3}, {2.0, -1.0, 0.5}), 1.0 / 3);
  expectClose(y, Tensor({3}, {2.0 * r, -2.0 * r, 1.5 * r}));
  // No mean is subtracted: a constant row stays constant (and keeps its sign).
  expectClose(rmsNorm(Tensor({2, 4}, {-3, -3, -3, -3, 2, 2, 2, 2}), Tensor::filled({4}, 1.0), 0.0),
              Tensor({2, 4}, {-1, -1, -1, -1, 1, 1, 1, 1}));
}

TEST(ReferenceRmsNorm, EveryRowHasUnitRmsAndScaleDoesNotMatter) {
  Tensor x = randomTensor({2, 3, 33}, 23);
  Tensor ones = Tensor::filled({33}, 1.0);
  Tensor y = rmsNorm(x, ones, 0.0);
  for (int64_t r = 0; r < 6; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < 33; ++i) ms += y.data[r * 33 + i] * y.data[r * 33 + i] / 33;
    EXPECT_NEAR(ms, 1.0, kRelTol);
  }
  // With eps = 0 the norm is invariant under a positive scale of the input.
  expectClose(rmsNorm(scale(x, 7.5), ones, 0.0), y);
}

// ---- empty dimensions -----------------------------------------------------------------------

TEST(ReferenceEmpty, ZeroSizedDimensionsAreValid) {
  // An empty contraction sums nothing: a 2x3 of exact zeros.
  Tensor p = matmul(Tensor({2, 0}), Tensor({0, 3}), false, false);
  EXPECT_EQ(shapeString(p.shape), "2x3");
  EXPECT_EQ(p.data, std::vector<double>(6, 0.0));
  EXPECT_EQ(reduceSum(Tensor({2, 0}), {1}).data, std::vector<double>(2, 0.0));
  EXPECT_EQ(shapeString(transpose(Tensor({0, 3}), {1, 0}).shape), "3x0");
  EXPECT_EQ(shapeString(softmax(Tensor({2, 0}), false).shape), "2x0");
  EXPECT_EQ(concat({Tensor({2, 0}), Tensor({2, 1}, {4, 5})}, 1).data, (std::vector<double>{4, 5}));
}

// ---- embedding, reshape, transpose, split, concat -------------------------------------------

TEST(ReferenceLayout, EmbeddingGathersRows) {
  Tensor table({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Tensor out = embedding(table, Tensor({2, 2}, {3, 0, 1, 1}));
  EXPECT_EQ(shapeString(out.shape), "2x2x2");
  EXPECT_EQ(out.data, (std::vector<double>{30, 31, 0, 1, 10, 11, 10, 11}));
}

TEST(ReferenceLayout, ReshapeKeepsData) {
  Tensor x = randomTensor({2, 3, 4}, 51);
  Tensor y = reshape(x, {4, 6});
  EXPECT_EQ(shapeString(y.shape), "4x6");
  EXPECT_EQ(y.data, x.data);
}

TEST(ReferenceLayout, TransposeByHandAndInverseIsIdentity) {
  EXPECT_EQ(transpose(Tensor({2, 3}, {1, 2, 3, 4, 5, 6}), {1, 0}).data,
            (std::vector<double>{1, 4, 2, 5, 3, 6}));

  Tensor x = randomTensor({2, 3, 4, 5}, 61);
  const std::vector<int64_t> perm = {2, 0, 3, 1}, inverse = {1, 3, 0, 2};
  Tensor y = transpose(x, perm);
  EXPECT_EQ(shapeString(y.shape), "4x2x5x3");
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 5; ++k)
        for (int64_t l = 0; l < 3; ++l)  // y[i,j,k,l] = x[j,l,i,k] since y.dim(d) = x.dim(perm[d])
          EXPECT_EQ(y.at({i, j, k, l}), x.at({j, l, i, k}));
  Tensor back = transpose(y, inverse);
  EXPECT_EQ(back.shape, x.shape);
  EXPECT_EQ(back.data, x.data);  // pure data movement: exact
}

TEST(ReferenceLayout, SplitByHandAndConcatIsInverse) {
  auto halves = split(Tensor({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}), 1, 2);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[0].data, (std::vector<double>{0, 1, 4, 5}));
  EXPECT_EQ(halves[1].data, (std::vector<double>{2, 3, 6, 7}));

  Tensor x = randomTensor({4, 6, 9}, 71);
  for (int64_t axis = 0; axis < 3; ++axis)
    for (int64_t parts : {1, 2, 3}) {
      if (x.shape[axis] % parts != 0) continue;
      auto pieces = split(x, axis, parts);
      ASSERT_EQ(static_cast<int64_t>(pieces.size()), parts);
      EXPECT_EQ(pieces[0].shape[axis], x.shape[axis] / parts);
      Tensor back = concat(pieces, axis);
      EXPECT_EQ(back.shape, x.shape) << "axis " << axis << " parts " << parts;
      EXPECT_EQ(back.data, x.data) << "axis " << axis << " parts " << parts;
    }
}

TEST(ReferenceLayout, ConcatUnequalPieces) {
  Tensor a({2, 1}, {1, 2}), b({2, 2}, {3, 4, 5, 6});
  Tensor c = concat({a, b}, 1);
  EXPECT_EQ(shapeString(c.shape), "2x3");
  EXPECT_EQ(c.data, (std::vector<double>{1, 3, 4, 2, 5, 6}));
}

// ---- causalAttention ------------------------------------------------------------------------

/// Attention built from the other kernels, one head at a time: split qkv into q, k, v, each
/// into NH heads of HS channels; per head softmax_causal(q k^T * (1/sqrt(HS))) v; concat heads.
Tensor composedAttention(const Tensor& qkv, int64_t numHeads) {
  auto qkvParts = split(qkv, 2, 3);
  auto q = split(qkvParts[0], 2, numHeads), k = split(qkvParts[1], 2, numHeads),
       v = split(qkvParts[2], 2, numHeads);
  double hs = static_cast<double>(q[0].shape[2]);
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < numHeads; ++h) {
    Tensor att = softmax(scale(matmul(q[h], k[h], false, true), 1.0 / std::sqrt(hs)), true);
    heads.push_back(matmul(att, v[h], false, false));
  }
  return concat(heads, 2);
}

TEST(ReferenceAttention, MatchesPerHeadComposition) {
  for (int64_t numHeads : {1, 3, 4}) {
    SCOPED_TRACE(testing::Message() << "NH=" << numHeads);
    Tensor qkv = scale(randomTensor({2, 7, 3 * 12}, 81 + static_cast<unsigned>(numHeads)), 3.0);
    expectClose(causalAttention(qkv, numHeads), composedAttention(qkv, numHeads));
  }
}

TEST(ReferenceAttention, FirstTokenCopiesItsValue) {
  // Token 0 attends only to itself with weight exp(0)/exp(0) = 1 exactly, so y = v bit for bit.
  const int64_t c = 12;
  Tensor qkv = randomTensor({3, 5, 3 * c}, 91);
  Tensor y = causalAttention(qkv, 4);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t ch = 0; ch < c; ++ch) EXPECT_EQ(y.at({b, 0, ch}), qkv.at({b, 0, 2 * c + ch}));
}

TEST(ReferenceAttention, EqualKeysAverageValues) {
  // All keys equal: every score in a row is the same, so token t gets the mean of v[0..t].
  // B=1, T=3, C=2, NH=1; q = (s, s), k = (kv, kv), v = (t, -t) for token t: means 0, 0.5, 1.
  // Scores of +-1800/sqrt(2) overflow or underflow exp() unless the max is subtracted.
  for (auto [s, kv] : {std::pair{1.0, 1.0}, std::pair{30.0, 30.0}, std::pair{30.0, -30.0}}) {
    SCOPED_TRACE(testing::Message() << "q=" << s << " k=" << kv);
    Tensor qkv({1, 3, 6}, {s, s, kv, kv, 0, 0, /**/ s, s, kv, kv, 1, -1, /**/ s, s, kv, kv, 2, -2});
    expectClose(causalAttention(qkv, 1), Tensor({1, 3, 2}, {0, 0, 0.5, -0.5, 1, -1}));
  }
}

// ---- crossEntropy ---------------------------------------------------------------------------

TEST(ReferenceCrossEntropy, UniformLogitsGiveLogV) {
  // One token, zero logits: log-sum-exp is exactly log(V) and the target logit is 0.
  EXPECT_EQ(crossEntropy(Tensor::filled({256}, 0.0), Tensor::filled({}, 17.0)).data[0], std::log(256.0));
  // Many tokens and a constant offset: (7 + log V) - 7 and the mean over 6 tokens round by a
  // few ulps, so compare at 1e-14 relative.
  Tensor loss = crossEntropy(Tensor::filled({2, 3, 50}, 7.0), Tensor({2, 3}, {0, 1, 2, 47, 48, 49}));
  EXPECT_EQ(loss.rank(), 0);
  EXPECT_NEAR(loss.data[0], std::log(50.0), 1e-14 * std::log(50.0));
}

TEST(ReferenceCrossEntropy, HandComputedTwoTokens) {
  // softmax([0, ln 2]) = [1/3, 2/3]: target 0 costs log 3, target 1 costs log(3/2). The same
  // with offsets of +-1000, which overflow or underflow exp() unless the max is subtracted.
  double expected = (std::log(3.0) + std::log(1.5)) / 2;
  for (double offset : {0.0, 1000.0, -1000.0}) {
    Tensor logits({2, 2}, {offset, offset + std::log(2.0), offset, offset + std::log(2.0)});
    EXPECT_NEAR(crossEntropy(logits, Tensor({2}, {0, 1})).data[0], expected, kRelTol * expected)
        << "offset " << offset;
  }
}

// ---- reductions -----------------------------------------------------------------------------

TEST(ReferenceReduce, SumByHand) {
  Tensor x({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(reduceSum(x, {0}).data, (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(reduceSum(x, {1}).data, (std::vector<double>{6, 15}));
  Tensor all = reduceSum(x, {1, 0});
  EXPECT_EQ(all.rank(), 0);
  EXPECT_EQ(all.data, (std::vector<double>{21}));
  EXPECT_EQ(reduceSum(x, {}).data, x.data);  // nothing reduced
}

TEST(ReferenceReduce, SumMatchesNaiveAndMeanIsSumOverCount) {
  Tensor x = randomTensor({3, 4, 5}, 101);
  // Dims {0, 2}: naive loop over the removed dimensions.
  Tensor s = reduceSum(x, {2, 0});
  ASSERT_EQ(shapeString(s.shape), "4");
  for (int64_t j = 0; j < 4; ++j) {
    double naive = 0;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < 5; ++k) naive += x.at({i, j, k});
    EXPECT_NEAR(s.data[j], naive, kAbsTol + kRelTol * std::abs(naive));
  }
  const std::vector<std::vector<int64_t>> dimSets = {{}, {1}, {0, 2}, {0, 1, 2}};
  for (const auto& dims : dimSets) {
    double count = 1;
    for (int64_t d : dims) count *= static_cast<double>(x.shape[d]);
    expectClose(reduceMean(x, dims), scale(reduceSum(x, dims), 1.0 / count));
  }
}

}  // namespace
}  // namespace tessel::ref
