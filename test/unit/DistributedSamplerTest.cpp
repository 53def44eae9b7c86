// The distributed sampler: partitions, per-epoch shuffles, reruns, independence from the
// data-parallel degree, evaluation padding, the documented permutation, bad arguments, and the
// text windows it indexes.
#include "runtime/data/DistributedSampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <utility>

using tessel::DataError;
using tessel::DistributedSampler;

namespace {

constexpr int64_t kBatch = 12;  // divisible by 1, 2, 3 and 4

TEST(DistributedSampler, RanksPartitionEachEpochsUsedSamples) {
  for (int world : {1, 2, 3, 4}) {
    for (int64_t n : {int64_t{12}, int64_t{97}, int64_t{103}}) {  // 97, 103: prime
      std::vector<DistributedSampler> ranks;
      for (int r = 0; r < world; ++r) ranks.emplace_back(n, kBatch, r, world, 42);
      const int64_t perEpoch = n / kBatch;
      ASSERT_EQ(ranks[0].batchesPerEpoch(), perEpoch);
      std::vector<std::vector<int64_t>> epochs;
      for (int64_t epoch = 0; epoch < 3; ++epoch) {
        std::vector<int64_t> seen;
        for (int64_t g = 0; g < perEpoch; ++g) {
          const int64_t step = epoch * perEpoch + g;
          std::vector<int64_t> joined;
          for (int r = 0; r < world; ++r) {
            std::vector<int64_t> mine = ranks[r].rankBatch(step);
            ASSERT_EQ(static_cast<int64_t>(mine.size()), kBatch / world);
            joined.insert(joined.end(), mine.begin(), mine.end());
          }
          EXPECT_EQ(joined, ranks[0].globalBatch(step));  // rank slices in rank order
          seen.insert(seen.end(), joined.begin(), joined.end());
        }
        // The used part: the first floor(n / B) * B entries of a permutation of [0, n).
        std::vector<int64_t> sorted = seen;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
            << "a sample repeats within an epoch (world " << world << ", n " << n << ")";
        EXPECT_EQ(static_cast<int64_t>(seen.size()), perEpoch * kBatch);
        for (int64_t id : seen) ASSERT_TRUE(id >= 0 && id < n);
        std::vector<int64_t> order = ranks[0].epochOrder(epoch);
        EXPECT_TRUE(std::equal(seen.begin(), seen.end(), order.begin()));
        std::vector<int64_t> perm = order;
        std::sort(perm.begin(), perm.end());
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(perm[i], i) << "not a permutation";
        epochs.push_back(order);
      }
      EXPECT_NE(epochs[0], epochs[1]);
      EXPECT_NE(epochs[1], epochs[2]);
    }
  }
}

TEST(DistributedSampler, GlobalBatchesDoNotDependOnTheDataParallelDegree) {
  const int64_t n = 103;
  DistributedSampler one(n, kBatch, 0, 1, 9);
  for (int world : {2, 4}) {
    for (int64_t step = 0; step < 3 * one.batchesPerEpoch(); ++step) {
      std::vector<int64_t> joined;
      for (int r = 0; r < world; ++r) {
        std::vector<int64_t> mine = DistributedSampler(n, kBatch, r, world, 9).rankBatch(step);
        joined.insert(joined.end(), mine.begin(), mine.end());
      }
      ASSERT_EQ(joined, one.rankBatch(step)) << "world " << world << " step " << step;
    }
  }
}

TEST(DistributedSampler, RerunsRepeatAndSeedsDiffer) {
  DistributedSampler a(97, kBatch, 1, 3, 5), b(97, kBatch, 1, 3, 5), c(97, kBatch, 1, 3, 6);
  bool differs = false;
  for (int64_t step = 20; step >= 0; --step) {  // any order: no hidden state
    EXPECT_EQ(a.rankBatch(step), b.rankBatch(step));
    differs |= a.rankBatch(step) != c.rankBatch(step);
  }
  EXPECT_TRUE(differs);
}

/// The permutation as DistributedSampler.h writes it down, implemented from that text.
std::vector<int64_t> documentedPermutation(uint64_t seed, int64_t epoch, int64_t n) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::mt19937_64 rng(mix(mix(seed) ^ static_cast<uint64_t>(epoch)));
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i >= 1; --i) {
    const uint64_t m = static_cast<uint64_t>(i + 1);
    uint64_t r;
    do r = rng(); while (r < (0 - m) % m);
    std::swap(p[i], p[r % m]);
  }
  return p;
}

TEST(DistributedSampler, FollowsTheDocumentedPermutation) {
  // The C++ standard fixes mt19937_64: its 10000th output from the default seed.
  std::mt19937_64 check;
  check.discard(9999);
  ASSERT_EQ(check(), 9981545732273789042ull);
  // splitmix64's first output for state 0 (Vigna's reference implementation).
  EXPECT_EQ(tessel::splitmix64(0), 0xe220a8397b1dcdafull);
  DistributedSampler s(1000, 10, 0, 1, 123);
  for (int64_t epoch : {0, 1, 7}) EXPECT_EQ(s.epochOrder(epoch), documentedPermutation(123, epoch, 1000));
}

TEST(EvalShard, PaddingMasksSoEverySampleCountsOnce) {
  for (int world : {1, 2, 3, 4}) {
    for (int64_t n : {int64_t{1}, int64_t{12}, int64_t{97}, int64_t{103}}) {
      std::vector<int> count(n, 0);
      const int64_t batches = tessel::evalBatchCount(n, kBatch);
      EXPECT_EQ(batches, (n + kBatch - 1) / kBatch);
      for (int64_t b = 0; b < batches; ++b)
        for (int r = 0; r < world; ++r) {
          tessel::EvalShard shard = tessel::evalShard(n, kBatch, r, world, b);
          ASSERT_EQ(static_cast<int64_t>(shard.ids.size()), kBatch / world);
          ASSERT_EQ(shard.valid.size(), shard.ids.size());
          for (size_t i = 0; i < shard.ids.size(); ++i) {
            ASSERT_TRUE(shard.ids[i] >= 0 && shard.ids[i] < n);
            if (shard.valid[i]) ++count[shard.ids[i]];
          }
        }
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(count[i], 1) << "sample " << i << " (world " << world << ", n " << n << ")";
    }
  }
}

std::string errorOf(auto&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DistributedSampler, BadArgumentsAreNamed) {
  EXPECT_EQ(errorOf([] { DistributedSampler(100, 10, 0, 3, 1); }),
            "the global batch size 10 is not divisible by the data-parallel degree 3: every rank "
            "needs the same local batch size");
  EXPECT_EQ(errorOf([] { DistributedSampler(8, 12, 0, 4, 1); }),
            "the global batch size 12 exceeds the 8 samples: an epoch would hold no complete "
            "batch (the last partial batch of an epoch is dropped)");
  EXPECT_EQ(errorOf([] { DistributedSampler(0, 12, 0, 4, 1); }),
            "the sampler needs at least one sample, got 0");
  EXPECT_EQ(errorOf([] { DistributedSampler(100, 0, 0, 1, 1); }),
            "the global batch size must be at least 1, got 0");
  EXPECT_EQ(errorOf([] { DistributedSampler(100, 12, 4, 4, 1); }), "rank 4 is outside [0, 4)");
  EXPECT_EQ(errorOf([] { DistributedSampler(100, 12, 0, 4, 1).rankBatch(-1); }),
            "the step must be >= 0, got -1");
  EXPECT_EQ(errorOf([] { tessel::evalShard(10, 4, 0, 2, 3); }),
            "evaluation batch 3 is outside [0, 3) (10 samples, batches of 4)");
}

TEST(TextWindows, WindowsAreTheSplitsBytesAtMultiplesOfSeq) {
  EXPECT_EQ(tessel::textWindowCount(9, 4), 2);   // offsets 0 and 4, 5 bytes each
  EXPECT_EQ(tessel::textWindowCount(8, 4), 1);
  EXPECT_EQ(tessel::textWindowCount(4, 4), 0);
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("sampler_windows_" + std::to_string(::getpid()) + ".txt");
  std::string text;
  for (int i = 0; i < 100; ++i) text += static_cast<char>('a' + i % 26);
  std::ofstream(file) << text;
  tessel::TextDataset data(file.string());  // train: bytes [0, 90)
  const int64_t seq = 8;
  const int64_t windows = tessel::textWindowCount(data.trainSize(), seq);
  EXPECT_EQ(windows, (90 - 1) / 8);
  tessel::DistributedSampler sampler(windows, 2, 1, 2, 3);
  std::vector<int64_t> ids = sampler.rankBatch(0), offsets;
  for (int64_t id : ids) offsets.push_back(tessel::textWindowOffset(id, seq));
  tessel::TokenBatch b = data.windows(tessel::Split::Train, offsets, seq);
  ASSERT_EQ(b.batch, 1);
  for (int64_t t = 0; t < seq; ++t) {
    EXPECT_EQ(b.tokens[t], text[offsets[0] + t]);
    EXPECT_EQ(b.targets[t], text[offsets[0] + t + 1]);
  }
  EXPECT_NE(errorOf([&] { data.windows(tessel::Split::Train, {82}, seq); }).find(
                "window offset 82 with sequence length 8 does not fit in the training split"),
            std::string::npos);
  std::filesystem::remove(file);
}

}  // namespace
