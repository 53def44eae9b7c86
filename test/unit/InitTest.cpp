// Tests for runtime/Init: parameter values depend only on (seed, name, element index), any
// range of elements can be generated on its own, and Normal init really draws N(0, std^2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "runtime/Init.h"
#include "runtime/numeric/Fnv1a.h"
#include "runtime/numeric/Philox.h"

namespace tessel {
namespace {

bool bitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(InitTest, SameSeedAndNameGiveBitwiseIdenticalValues) {
  auto a = initParameter(1001, InitKind::Normal, 0.02, 1234, "blocks.0.attn.qkv.weight");
  auto b = initParameter(1001, InitKind::Normal, 0.02, 1234, "blocks.0.attn.qkv.weight");
  EXPECT_TRUE(bitwiseEqual(a, b));
}

TEST(InitTest, ValuesDoNotDependOnCreationOrder) {
  // Initialising other parameters in between must not shift any stream (no hidden state).
  auto aFirst = initParameter(300, InitKind::Normal, 0.02, 7, "a.weight");
  auto bSecond = initParameter(300, InitKind::Normal, 0.02, 7, "b.weight");
  auto bFirst = initParameter(300, InitKind::Normal, 0.02, 7, "b.weight");
  (void)initParameter(5000, InitKind::Normal, 0.02, 7, "c.weight");
  auto aSecond = initParameter(300, InitKind::Normal, 0.02, 7, "a.weight");
  EXPECT_TRUE(bitwiseEqual(aFirst, aSecond));
  EXPECT_TRUE(bitwiseEqual(bFirst, bSecond));
}

TEST(InitTest, PrefixOfStreamIsIndependentOfLength) {
  // A shard can be reproduced from the full tensor's stream: element i is the same for any n,
  // including odd n where the last Box-Muller pair is cut in half.
  auto full = initParameter(1000, InitKind::Normal, 0.02, 99, "wte.weight");
  for (int64_t n : {1, 2, 7, 64, 999}) {
    auto part = initParameter(n, InitKind::Normal, 0.02, 99, "wte.weight");
    std::vector<float> prefix(full.begin(), full.begin() + n);
    EXPECT_TRUE(bitwiseEqual(part, prefix)) << "n = " << n;
  }
}

TEST(InitTest, RawPointerOverloadMatchesVectorOverload) {
  std::vector<float> buf(257, -1.0f);
  initParameter(buf.data(), 257, InitKind::Normal, 0.5, 3, "x");
  EXPECT_TRUE(bitwiseEqual(buf, initParameter(257, InitKind::Normal, 0.5, 3, "x")));
}

/// Number of equal elements at the same index.
int64_t countEqual(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return same;
}

TEST(InitTest, DifferentNamesAndSeedsGiveDifferentStreams) {
  // Independent continuous streams essentially never agree element-wise; allow 2 coincidences
  // in 1000 (float rounding makes exact ties possible but vanishingly rare).
  const auto base = initParameter(1000, InitKind::Normal, 0.02, 1, "blocks.0.mlp.fc.weight");
  for (const char* name : {"blocks.1.mlp.fc.weight", "blocks.0.mlp.fc.weigh",
                           "blocks.0.mlp.fc.weight ", "", "blocks.10.mlp.fc.weight"}) {
    EXPECT_LE(countEqual(base, initParameter(1000, InitKind::Normal, 0.02, 1, name)), 2)
        << "name '" << name << "'";
  }
  for (uint64_t seed : {0ull, 2ull, 1ull << 32, ~0ull}) {
    EXPECT_LE(countEqual(base, initParameter(1000, InitKind::Normal, 0.02, seed,
                                             "blocks.0.mlp.fc.weight")),
              2)
        << "seed " << seed;
  }
}

TEST(InitTest, GoldenValuesPinTheAlgorithm) {
  // Computed by an independent Python implementation of the documented algorithm (FNV-1a 64,
  // splitmix64, Philox-4x32-10 checked against its published known-answer vectors, Box-Muller
  // on 53-bit uniforms in (0, 1]). A change here silently changes every model's initial
  // weights, so it must be deliberate.
  // Tolerance: std::log/cos/sin may differ by an ulp between C libraries; 1e-6 relative is
  // ~8 float ulps, far below any algorithmic change (which moves values by O(std)).
  const std::vector<double> expected1 = {0.00032265855493459825, -0.0014941712222260274,
                                         -0.01295368551135465, 0.006726431207076072,
                                         0.0019507455890073432};
  const auto got1 = initParameter(5, InitKind::Normal, 0.02, 1234, "blocks.0.attn.qkv.weight");
  const std::vector<double> expected2 = {-0.0330433802162067, -0.016887133454978547,
                                         0.015451983430414009, -0.011816686846056664,
                                         0.009277604444336259};
  const auto got2 = initParameter(5, InitKind::Normal, 0.02, 0, "wte.weight");
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(got1[i], expected1[i], 1e-6 * std::abs(expected1[i])) << "i = " << i;
    EXPECT_NEAR(got2[i], expected2[i], 1e-6 * std::abs(expected2[i])) << "i = " << i;
  }
  // Far into a tensor (the last elements of a 2^34-element one, an odd start): the counter's
  // high word is in use, and nothing before the range is generated.
  const std::vector<double> expected3 = {-1.260786057948083, -0.28200798421416556, -0.03629131657348856};
  float got3[3];
  initParameterRange(got3, (int64_t{1} << 34) - 3, 3, InitKind::Normal, 1.0, 7, "huge.weight");
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got3[i], expected3[i], 1e-6 * std::abs(expected3[i])) << "i = " << i;
}

// The documented algorithm written out once more, scalar, with the C library's log, cos and
// sin (the form of the Python reference behind the golden values): element i of `name`.
float libmNormal(uint64_t seed, std::string_view name, int64_t i, double stddev) {
  auto splitmix64 = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  const uint64_t key = splitmix64(numeric::fnv1a(numeric::kFnv1aOffsetBasis, name) ^ splitmix64(seed));
  const uint64_t p = static_cast<uint64_t>(i) / 2;
  const auto w = numeric::philox4x32_10({static_cast<uint32_t>(p), static_cast<uint32_t>(p >> 32), 0, 0},
                                        {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
  auto uniform = [](uint32_t lo, uint32_t hi) {
    return static_cast<double>((((static_cast<uint64_t>(hi) << 32) | lo) >> 11) + 1) * 0x1p-53;
  };
  const double r = std::sqrt(-2.0 * std::log(uniform(w[0], w[1])));
  const double angle = 6.283185307179586476925286766559 * uniform(w[2], w[3]);
  return static_cast<float>(stddev * (i % 2 == 0 ? r * std::cos(angle) : r * std::sin(angle)));
}

TEST(InitTest, NormalsAreTheCLibraryFormulasToWithinOneFloatUlp) {
  // Init.cpp evaluates log, sin and cos with its own vectorised double polynomials (a few
  // double ulps, ~1e-15 relative) instead of the C library's. Rounded to float, the two agree
  // except where the double result lies within ~1e-15 of a float rounding boundary, which
  // happens for about 1e-15 / 2^-24 ~ 2e-8 of the elements (measured: 2 of 31 million), and
  // then by exactly one ulp. Bounds: every element within 1 ulp, and at most 1e-6 of them
  // differing at all (50x the expected rate); a wrong coefficient, quadrant or scale changes
  // nearly every element by far more. Two ranges: the start (odd length) and past 2^32 pairs.
  for (int64_t first : {int64_t{0}, (int64_t{1} << 33) + 3}) {
    SCOPED_TRACE(first);
    const int64_t n = 2'000'001;
    std::vector<float> v(n);
    initParameterRange(v.data(), first, n, InitKind::Normal, 0.02, 42, "blocks.0.mlp.fc.weight");
    int64_t differing = 0;
    for (int64_t k = 0; k < n; ++k) {
      const float ref = libmNormal(42, "blocks.0.mlp.fc.weight", first + k, 0.02);
      if (std::memcmp(&ref, &v[static_cast<size_t>(k)], sizeof(float)) == 0) continue;
      ++differing;
      ASSERT_EQ(std::nextafter(ref, v[static_cast<size_t>(k)]), v[static_cast<size_t>(k)])
          << "element " << first + k << ": " << v[static_cast<size_t>(k)] << " vs " << ref;
    }
    EXPECT_LE(differing, n / 1'000'000) << differing << " of " << n << " elements differ";
  }
}

TEST(InitTest, AnyRangeEqualsTheSliceOfTheWhole) {
  // Every (first, n), odd and even ends included (a Box-Muller pair split across ranges), is
  // bitwise the slice of the whole tensor: the element is a function of its index alone.
  const auto whole = initParameter(203, InitKind::Normal, 0.02, 11, "blocks.0.mlp.fc.weight");
  for (int64_t first = 0; first <= 203; first += 7)
    for (int64_t n : {0, 1, 2, 3, 64}) {
      if (first + n > 203) continue;
      std::vector<float> part(static_cast<size_t>(n) + 1, -7.0f);
      initParameterRange(part.data(), first, n, InitKind::Normal, 0.02, 11, "blocks.0.mlp.fc.weight");
      EXPECT_TRUE(std::memcmp(part.data(), whole.data() + first, static_cast<size_t>(n) * sizeof(float)) == 0)
          << "first " << first << " n " << n;
      EXPECT_EQ(part[static_cast<size_t>(n)], -7.0f) << "wrote past n";  // exactly n written
    }
  // Ranges past 2^62 (where first + n could overflow) are refused, naming the parameter.
  float x = 0;
  EXPECT_THROW(initParameterRange(&x, -1, 1, InitKind::Normal, 0.02, 1, "w"), std::invalid_argument);
  EXPECT_THROW(initParameterRange(&x, int64_t{1} << 62, 1, InitKind::Normal, 0.02, 1, "w"), std::invalid_argument);
  EXPECT_THROW(initParameterRange(&x, INT64_MAX, 1, InitKind::Normal, 0.02, 1, "w"), std::invalid_argument);
}

TEST(InitTest, ZerosAndOnesAreExactAndIgnoreStd) {
  for (double stddev : {0.0, 0.02, 123.0}) {
    auto z = initParameter(513, InitKind::Zeros, stddev, 5, "ln.bias");
    auto o = initParameter(513, InitKind::Ones, stddev, 5, "ln.weight");
    for (size_t i = 0; i < 513; ++i) {
      ASSERT_EQ(z[i], 0.0f);
      ASSERT_FALSE(std::signbit(z[i]));  // +0, not -0
      ASSERT_EQ(o[i], 1.0f);
    }
  }
}

TEST(InitTest, NormalWithZeroStdIsZero) {
  for (float v : initParameter(64, InitKind::Normal, 0.0, 5, "w")) ASSERT_EQ(v, 0.0f);
}

TEST(InitTest, EmptyParameterIsFine) {
  EXPECT_TRUE(initParameter(0, InitKind::Normal, 0.02, 1, "empty").empty());
  initParameter(nullptr, 0, InitKind::Ones, 0.0, 1, "empty");  // must not touch `out`
}

TEST(InitTest, InvalidArgumentsThrowNamingTheParameter) {
  try {
    initParameter(-1, InitKind::Normal, 0.02, 1, "bad.weight");
    FAIL() << "negative n accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad.weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(initParameter(4, InitKind::Normal, -0.1, 1, "w"), std::invalid_argument);
  EXPECT_THROW(initParameter(4, InitKind::Normal, NAN, 1, "w"), std::invalid_argument);
  EXPECT_THROW(initParameter(4, InitKind::Normal, INFINITY, 1, "w"), std::invalid_argument);
  EXPECT_THROW(initParameter(nullptr, 4, InitKind::Zeros, 0.0, 1, "w"), std::invalid_argument);
}

TEST(InitTest, NormalSamplesHaveTheRequestedMeanAndStd) {
  // From the start of a tensor and from far into one (counters past 2^32, an odd first index),
  // since a shard draws from anywhere.
  for (int64_t first : {int64_t{0}, (int64_t{1} << 40) + 1}) {
    SCOPED_TRACE(first);
    const int64_t n = 1'000'000;
    const double sigma = 0.02;
    std::vector<float> v(n);
    initParameterRange(v.data(), first, n, InitKind::Normal, sigma, 2024, "blocks.3.mlp.proj.weight");
    double sum = 0.0;
    for (float x : v) sum += x;
    const double mean = sum / n;
    double sq = 0.0, fourth = 0.0, lag1 = 0.0;
    int64_t withinOneSigma = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = v[static_cast<size_t>(i)] - mean;
      sq += d * d;
      fourth += d * d * d * d;
      withinOneSigma += std::abs(v[static_cast<size_t>(i)]) <= sigma;
      if (i + 1 < n) lag1 += d * (v[static_cast<size_t>(i + 1)] - mean);
    }
    const double sd = std::sqrt(sq / (n - 1));
    const double kurtosis = (fourth / n) / ((sq / n) * (sq / n));
    const double correlation = lag1 / sq;

    // Each tolerance is 5 standard errors of the statistic for a true N(0, sigma^2) sample,
    // so a correct generator fails with probability < 1e-6 per check (and the seed is fixed,
    // so the test is deterministic); a wrong scale, offset or shape misses by far more.
    // Mean: standard error sigma / sqrt(n) = 2e-5  -> tolerance 1e-4.
    EXPECT_NEAR(mean, 0.0, 5 * sigma / std::sqrt(double(n)));
    // Std: the sample std of a normal has standard error sigma / sqrt(2n) ~ 1.41e-5 -> 7.1e-5.
    EXPECT_NEAR(sd, sigma, 5 * sigma / std::sqrt(2.0 * n));
    // Shape, P(|x| <= sigma) = 0.682689: binomial standard error sqrt(p(1-p)/n) ~ 4.65e-4.
    // Catches e.g. a uniform of the right variance (which has 0.577 inside one sigma).
    const double p = 0.6826894921370859;
    EXPECT_NEAR(double(withinOneSigma) / n, p, 5 * std::sqrt(p * (1 - p) / n));
    // Kurtosis 3 for a normal; its standard error is sqrt(24 / n) ~ 4.9e-3 -> tolerance 0.0245.
    EXPECT_NEAR(kurtosis, 3.0, 5 * std::sqrt(24.0 / n));
    // Neighbours (within a Box-Muller pair and across consecutive counters) are independent:
    // lag-1 correlation 0 with standard error 1 / sqrt(n) = 1e-3 -> tolerance 5e-3.
    EXPECT_NEAR(correlation, 0.0, 5 / std::sqrt(double(n)));
  }
}

}  // namespace
}  // namespace tessel
