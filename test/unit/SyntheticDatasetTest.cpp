// The synthetic classification set (runtime/data/SyntheticDataset.h): determinism, the
// documented draws, its statistics and learnability, and how the distributed sampler feeds
// it: global batches independent of the world size, a new shuffle every epoch.
#include "runtime/data/SyntheticDataset.h"

#include "runtime/data/DistributedSampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <set>

using tessel::DataError;
using tessel::DistributedSampler;
using tessel::ImageDataset;
using tessel::SyntheticOptions;

namespace {

bool sameData(const ImageDataset& a, const ImageDataset& b) {
  return a.count == b.count && a.cols == b.cols && a.images == b.images && a.labels == b.labels;
}

TEST(SyntheticDataset, SameSeedSameBytesOtherSeedOtherBytes) {
  const SyntheticOptions o;
  auto a = tessel::makeSyntheticClassification(o, 7), b = tessel::makeSyntheticClassification(o, 7);
  EXPECT_TRUE(sameData(a.train, b.train));
  EXPECT_TRUE(sameData(a.heldOut, b.heldOut));
  auto c = tessel::makeSyntheticClassification(o, 8);
  EXPECT_NE(a.train.images, c.train.images);
  EXPECT_NE(a.train.labels, c.train.labels);
  // The shapes the labs feed: [N, F] features, N labels in [0, K).
  EXPECT_EQ(a.train.count, 1000);
  EXPECT_EQ(a.heldOut.count, 256);
  EXPECT_EQ(a.train.pixels(), 64);
  EXPECT_EQ(a.train.images.size(), size_t{1000 * 64});
  for (int32_t y : a.train.labels) ASSERT_TRUE(y >= 0 && y < 5) << y;
  // The held-out samples are other draws, not copies of training ones.
  EXPECT_NE(std::vector<float>(a.train.images.begin(), a.train.images.begin() + 64),
            std::vector<float>(a.heldOut.images.begin(), a.heldOut.images.begin() + 64));
}

// The header's recipe, recomputed here from its text: the first centre coordinate is the first
// Box-Muller normal of the seeded mt19937_64, and with noise 0 every sample is its centre.
TEST(SyntheticDataset, FollowsTheDocumentedDraws) {
  SyntheticOptions o;
  o.noise = 0;
  o.spread = 3.0;
  const uint64_t seed = 1337;
  std::mt19937_64 rng(tessel::splitmix64(tessel::splitmix64(seed) ^ 0x73796e7468657469ull));
  const double u1 = static_cast<double>(rng() >> 11) * 0x1.0p-53, u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  const double first = 3.0 * std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2);
  const std::vector<double> centres = tessel::syntheticCentres(o, seed);
  ASSERT_EQ(centres.size(), size_t{5 * 64});
  EXPECT_EQ(centres[0], first);
  auto s = tessel::makeSyntheticClassification(o, seed);
  for (int64_t i = 0; i < s.train.count; ++i) {
    const int32_t y = s.train.labels[static_cast<size_t>(i)];
    for (int64_t f = 0; f < o.features; ++f)
      ASSERT_EQ(s.train.images[static_cast<size_t>(i * o.features + f)],
                static_cast<float>(centres[static_cast<size_t>(y * o.features + f)]));
  }
}

// The mixture's statistics: each class's mean is its centre, its spread the noise, and the
// labels are uniform. Bounds are 5 standard errors (a false failure has probability ~1e-6 per
// check, and the draws are fixed by the seed anyway).
TEST(SyntheticDataset, ClassMeansAreTheCentres) {
  SyntheticOptions o;
  o.samples = 20000;
  const auto s = tessel::makeSyntheticClassification(o, 3);
  const std::vector<double> centres = tessel::syntheticCentres(o, 3);
  std::vector<double> sum(centres.size(), 0.0), sq(centres.size(), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(o.classes), 0);
  for (int64_t i = 0; i < s.train.count; ++i) {
    const int32_t y = s.train.labels[static_cast<size_t>(i)];
    ++count[static_cast<size_t>(y)];
    for (int64_t f = 0; f < o.features; ++f) {
      const double x = s.train.images[static_cast<size_t>(i * o.features + f)];
      const double d = x - centres[static_cast<size_t>(y * o.features + f)];
      sum[static_cast<size_t>(y * o.features + f)] += x;
      sq[static_cast<size_t>(y * o.features + f)] += d * d;
    }
  }
  const double p = 1.0 / static_cast<double>(o.classes), n = static_cast<double>(o.samples);
  for (int64_t k = 0; k < o.classes; ++k) {
    const double nk = static_cast<double>(count[static_cast<size_t>(k)]);
    EXPECT_NEAR(nk, n * p, 5 * std::sqrt(n * p * (1 - p))) << "class " << k;
    for (int64_t f = 0; f < o.features; ++f) {
      const size_t at = static_cast<size_t>(k * o.features + f);
      EXPECT_NEAR(sum[at] / nk, centres[at], 5 * o.noise / std::sqrt(nk)) << "class " << k << " feature " << f;
      // The variance estimate of a normal has standard error sigma^2 sqrt(2 / n).
      EXPECT_NEAR(sq[at] / nk, o.noise * o.noise, 5 * o.noise * o.noise * std::sqrt(2.0 / nk));
    }
  }
}

// Learnable: the nearest-centre rule (the Bayes classifier of this mixture, equal class
// priors and isotropic noise) classifies the held-out samples far above chance (1/K = 20%).
// With F = 64, spread 1 and noise 2 the centres are ~sqrt(2 F) = 11.3 apart, 2.8 noise
// standard deviations from the midpoint, so the Bayes error is about (K - 1) x 0.25% ~ 1%;
// the bound 95% leaves room for the seed.
TEST(SyntheticDataset, NearestCentreClassifiesTheHeldOutSplit) {
  const SyntheticOptions o;
  const auto s = tessel::makeSyntheticClassification(o, 1337);
  const std::vector<double> centres = tessel::syntheticCentres(o, 1337);
  int64_t correct = 0;
  for (int64_t i = 0; i < s.heldOut.count; ++i) {
    int64_t best = -1;
    double bestDistance = INFINITY;
    for (int64_t k = 0; k < o.classes; ++k) {
      double d = 0;
      for (int64_t f = 0; f < o.features; ++f) {
        const double x = s.heldOut.images[static_cast<size_t>(i * o.features + f)];
        d += (x - centres[static_cast<size_t>(k * o.features + f)]) * (x - centres[static_cast<size_t>(k * o.features + f)]);
      }
      if (d < bestDistance) bestDistance = d, best = k;
    }
    correct += best == s.heldOut.labels[static_cast<size_t>(i)];
  }
  EXPECT_GT(static_cast<double>(correct) / static_cast<double>(s.heldOut.count), 0.95);
}

// What a rank of N trains on at step s: its rows of the sampler's global batch. Concatenated
// over the ranks, those rows are the one-rank batch, bit for bit, for every N that divides B.
TEST(SyntheticDataset, GlobalBatchDoesNotDependOnTheWorldSize) {
  const auto s = tessel::makeSyntheticClassification(SyntheticOptions{}, 5);
  const int64_t batch = 32;
  DistributedSampler one(s.train.count, batch, 0, 1, 5);
  for (int world : {2, 4, 8}) {
    for (int64_t step : {int64_t{0}, int64_t{30}, int64_t{31}, int64_t{100}}) {
      const tessel::ImageBatch whole = tessel::gatherImages(s.train, one.globalBatch(step), 0, batch);
      std::vector<float> features;
      std::vector<int32_t> labels;
      for (int r = 0; r < world; ++r) {
        DistributedSampler rank(s.train.count, batch, r, world, 5);
        const std::vector<int64_t> ids = rank.rankBatch(step);
        const tessel::ImageBatch mine = tessel::gatherImages(s.train, ids, 0, static_cast<int64_t>(ids.size()));
        features.insert(features.end(), mine.images.begin(), mine.images.end());
        labels.insert(labels.end(), mine.labels.begin(), mine.labels.end());
      }
      EXPECT_EQ(features, whole.images) << "world " << world << " step " << step;
      EXPECT_EQ(labels, whole.labels) << "world " << world << " step " << step;
    }
  }
}

// Every epoch (31 global batches of 32 of the 1000 samples) is a new shuffle: its first batch
// differs from the previous epoch's, and no sample repeats within an epoch.
TEST(SyntheticDataset, SamplerReshufflesEveryEpoch) {
  const auto s = tessel::makeSyntheticClassification(SyntheticOptions{}, 5);
  DistributedSampler sampler(s.train.count, 32, 0, 1, 5);
  ASSERT_EQ(sampler.batchesPerEpoch(), 31);
  std::vector<std::vector<int64_t>> firsts;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    std::set<int64_t> seen;
    for (int64_t g = 0; g < 31; ++g)
      for (int64_t id : sampler.globalBatch(epoch * 31 + g)) EXPECT_TRUE(seen.insert(id).second) << id;
    EXPECT_EQ(seen.size(), size_t{31 * 32});
    firsts.push_back(sampler.globalBatch(epoch * 31));
  }
  for (size_t e = 1; e < firsts.size(); ++e) EXPECT_NE(firsts[e], firsts[e - 1]) << "epoch " << e;
}

std::string refusal(const SyntheticOptions& o) {
  try {
    tessel::makeSyntheticClassification(o, 1);
  } catch (const DataError& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

TEST(SyntheticDataset, BadOptionsAreNamed) {
  SyntheticOptions o;
  o.classes = 1;
  EXPECT_EQ(refusal(o), "synthetic data: the class count must be from 2 to 65536, got 1");
  o = {};
  o.samples = 0;
  EXPECT_EQ(refusal(o), "synthetic data: the sample count must be from 1 to 16777216, got 0");
  o = {};
  o.noise = -1;
  EXPECT_EQ(refusal(o), "synthetic data: the noise must be finite, >= 0 and <= 1e+06, got -1");
  o = {};
  o.features = 0;
  EXPECT_EQ(refusal(o), "synthetic data: the feature count must be from 1 to 65536, got 0");
  o = {};
  o.spread = NAN;
  EXPECT_EQ(refusal(o), "synthetic data: the centre spread must be finite, > 0 and <= 1e+06, got nan");
  o = {};
  o.noise = INFINITY;
  EXPECT_EQ(refusal(o), "synthetic data: the noise must be finite, >= 0 and <= 1e+06, got inf");
}

// Every count, at any int64 value, is refused naming it before anything is allocated: no
// product or sum of options wraps (classes x features once wrapped to 0 and left the centres
// empty; samples + held-out samples overflowed).
TEST(SyntheticDataset, AnyIntegerIsRefusedWithoutOverflow) {
  const int64_t max = std::numeric_limits<int64_t>::max(), min = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> bad = {max, min, int64_t{1} << 62, -1, (int64_t{1} << 24) + 1, int64_t{1} << 32};
  struct Field {
    int64_t SyntheticOptions::*member;
    const char* name;
    int64_t hi;
  };
  for (const Field& f : {Field{&SyntheticOptions::samples, "the sample count", int64_t{1} << 24},
                         Field{&SyntheticOptions::heldOut, "the held-out sample count", int64_t{1} << 24},
                         Field{&SyntheticOptions::features, "the feature count", int64_t{1} << 16},
                         Field{&SyntheticOptions::classes, "the class count", int64_t{1} << 16}})
    for (int64_t v : bad) {
      if (v > 0 && v <= f.hi) continue;  // in range: see the limits below
      SyntheticOptions o;
      o.*f.member = v;
      EXPECT_EQ(refusal(o).rfind(std::string("synthetic data: ") + f.name + " must be from", 0), 0u)
          << f.name << " = " << v << ": " << refusal(o);
    }
  // The hostile test's case (classes x features wrapped to 0 in 64 bits), and each count within
  // its range with a product past 2^31 values.
  SyntheticOptions o;
  o.classes = int64_t{1} << 62;
  o.features = 4;
  EXPECT_EQ(refusal(o), "synthetic data: the class count must be from 2 to 65536, got 4611686018427387904");
  o = {};
  o.classes = int64_t{1} << 16;
  o.features = (int64_t{1} << 15) + 1;
  EXPECT_EQ(refusal(o), "synthetic data: 65536 class centres x 32769 features exceed 2147483648 values");
  o = {};
  o.samples = int64_t{1} << 24;
  o.heldOut = int64_t{1} << 24;
  o.features = 65;
  EXPECT_EQ(refusal(o), "synthetic data: (16777216 samples + 16777216 held-out samples) x 65 features exceed "
                        "2147483648 values");
}

// The limits themselves are accepted: exactly 2^31 feature values, and 2^31 centre coordinates
// (checked without drawing: that would take 8 and 16 GiB).
TEST(SyntheticDataset, TheLimitsAreInclusive) {
  SyntheticOptions o;
  o.samples = int64_t{1} << 24;
  o.heldOut = int64_t{1} << 24;
  o.features = 64;
  EXPECT_NO_THROW(tessel::checkSyntheticOptions(o));
  o = {};
  o.classes = int64_t{1} << 16;
  o.features = int64_t{1} << 15;
  o.samples = 1;
  o.heldOut = 1;
  EXPECT_NO_THROW(tessel::checkSyntheticOptions(o));
  o.classes = 2;
  o.features = 1;
  o.noise = 0;
  o.spread = 1e6;
  EXPECT_NO_THROW(tessel::checkSyntheticOptions(o));
}

}  // namespace
