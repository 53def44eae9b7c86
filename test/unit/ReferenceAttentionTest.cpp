// Tests of the reference kernels of rope and grouped attention
// (runtime/reference/ReferenceAttention.h), each against a path it does not share code with:
// - rope against the closed form of a rotation as a complex product: the pair (x1, x2) is
//   z = x1 + i x2 and rope gives z e^{i a} (Su et al. 2021, eq. 12), with the angle written
//   out here as t / theta^(2i/D);
// - grouped attention with kv_heads < heads against the existing multi-head causalAttention
//   on a fused qkv whose k and v heads were repeated G times (what "grouped" means), so the
//   two kernels share neither loops nor indexing;
// - the error paths, each naming the shapes.
//
// Tolerances: 1e-12 relative plus 1e-14 absolute, as ReferenceTest.cpp: O(1) inputs, at most
// a 33-term sum, so f64 rounding stays a few dozen ulps (~1e-14); a wrong index, sign or
// angle is an O(1e-2 .. 1) error.
#include "runtime/reference/ReferenceAttention.h"

#include "test/unit/ReferenceTestUtil.h"
#include "test/unit/RepeatedKv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <fmt/format.h>

namespace tessel::ref {
namespace {

using testutil::expectShapeError;
using testutil::repeatedQkv;
using testutil::Rng;

constexpr double kRelTol = 1e-12;  // see the file comment
constexpr double kAbsTol = 1e-14;

void expectClose(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(shapeString(actual.shape), shapeString(expected.shape));
  for (int64_t i = 0; i < actual.numel(); ++i)
    EXPECT_NEAR(actual.data[i], expected.data[i], kAbsTol + kRelTol * std::abs(expected.data[i]))
        << "at flat position " << i;
}

/// rope by complex multiplication: each pair (x[h*D + i], x[h*D + i + D/2]) is a complex
/// number turned by e^{i a}, a = t / theta^(2i/D) (negated for the inverse).
Tensor ropeAsComplex(const Tensor& x, int64_t heads, double theta, bool inverse) {
  Tensor out(x.shape);
  int64_t b = x.shape[0], t = x.shape[1], c = x.shape[2], d = c / heads;
  for (int64_t n = 0; n < b * t; ++n)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < d / 2; ++i) {
        double angle = static_cast<double>(n % t) / std::pow(theta, 2.0 * i / d);
        std::complex<double> z(x.data[n * c + h * d + i], x.data[n * c + h * d + i + d / 2]);
        std::complex<double> turned = z * std::polar(1.0, inverse ? -angle : angle);
        out.data[n * c + h * d + i] = turned.real();
        out.data[n * c + h * d + i + d / 2] = turned.imag();
      }
  return out;
}

TEST(ReferenceRope, IsAComplexRotationPerPair) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  // D = 2 (one pair), D = 8 over 3 heads, a long sequence (angles up to 32 rad), theta 500000.
  for (auto [shape, heads, theta] :
       {std::tuple{std::vector<int64_t>{1, 5, 2}, int64_t{1}, 10000.0},
        {{2, 7, 24}, 3, 10000.0},
        {{1, 33, 16}, 2, 500000.0},
        {{3, 4, 8}, 1, 2.0}}) {
    Tensor x = rng.tensor(shape);
    for (bool inverse : {false, true}) {
      SCOPED_TRACE(shapeString(shape) + (inverse ? " inverse" : ""));
      expectClose(rope(x, heads, theta, inverse), ropeAsComplex(x, heads, theta, inverse));
    }
  }
}

TEST(ReferenceRope, PositionZeroIsTheIdentityAndInverseUndoesIt) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  Tensor x = rng.tensor({2, 9, 32});
  Tensor y = rope(x, 4, 10000.0, false);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 32; ++c) EXPECT_EQ(y.at({b, 0, c}), x.at({b, 0, c}));
  expectClose(rope(y, 4, 10000.0, true), x);
}

TEST(ReferenceGroupedAttention, EqualsMultiHeadAttentionWithRepeatedKeysAndValues) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  // G = 2, G = 4 (multi-query: NKV = 1), G = 1, G = 3 with odd sizes, T = 33 (long causal rows).
  for (auto [b, t, heads, kvHeads, d] :
       {std::tuple{int64_t{2}, int64_t{7}, int64_t{4}, int64_t{2}, int64_t{4}},
        {1, 5, 4, 1, 6},
        {2, 3, 3, 3, 2},
        {1, 6, 6, 2, 3},
        {1, 33, 2, 1, 8}}) {
    SCOPED_TRACE(fmt::format("B={} T={} NH={} NKV={} D={}", b, t, heads, kvHeads, d));
    Tensor q = rng.tensor({b, t, heads * d}, -2.0, 2.0);
    Tensor k = rng.tensor({b, t, kvHeads * d}, -2.0, 2.0);
    Tensor v = rng.tensor({b, t, kvHeads * d});
    expectClose(groupedAttention(q, k, v, heads, kvHeads),
                causalAttention(repeatedQkv(q, k, v, heads, kvHeads), heads));
  }
}

TEST(ReferenceAttentionErrors, NameTheShapes) {
  Tensor x({2, 4, 12});
  expectShapeError([&] { rope(Tensor({4, 12}), 2, 1e4, false); }, {"rope", "4x12"});
  expectShapeError([&] { rope(x, 5, 1e4, false); }, {"numHeads = 5", "2x4x12"});
  expectShapeError([&] { rope(x, 4, 1e4, false); }, {"D > 0 even", "2x4x12"});  // D = 3
  expectShapeError([&] { rope(x, 2, 0.0, false); }, {"theta", "> 0"});
  expectShapeError([&] { groupedAttention(x, Tensor({2, 4, 6}), Tensor({2, 4, 6}), 4, 3); },
                   {"NH=4", "NKV=3"});
  expectShapeError([&] { groupedAttention(x, Tensor({2, 4, 6}), Tensor({2, 4, 3}), 4, 2); },
                   {"k", "v", "2x4x6", "2x4x3"});
  expectShapeError([&] { groupedAttention(x, Tensor({2, 5, 6}), Tensor({2, 5, 6}), 4, 2); },
                   {"2x4x12", "2x5x6"});
  expectShapeError([&] { groupedAttention(x, Tensor({2, 4, 12}), Tensor({2, 4, 12}), 4, 2); },
                   {"NKV=2", "2x4x12"});
}

}  // namespace
}  // namespace tessel::ref
