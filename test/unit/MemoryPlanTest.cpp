// The memory plan: no two live buffers overlap, offsets are aligned, and the arena size
// matches hand-worked cases and the live-bytes lower bound where that bound is achievable.
#include "codegen/MemoryPlan.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using tessel::LiveBuffer;
using tessel::planMemory;

void expectValid(const std::vector<LiveBuffer>& bs, const tessel::MemoryPlan& p, int64_t align) {
  ASSERT_EQ(p.offsets.size(), bs.size());
  for (size_t i = 0; i < bs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % align, 0);
    EXPECT_LE(p.offsets[i] + bs[i].bytes, p.arenaBytes);
    for (size_t j = i + 1; j < bs.size(); ++j) {
      bool liveTogether = bs[i].firstUse <= bs[j].lastUse && bs[j].firstUse <= bs[i].lastUse;
      bool overlap = p.offsets[i] < p.offsets[j] + bs[j].bytes &&
                     p.offsets[j] < p.offsets[i] + bs[i].bytes;
      EXPECT_FALSE(liveTogether && overlap) << "buffers " << i << " and " << j;
    }
  }
  EXPECT_GE(p.arenaBytes, p.liveLowerBound);
}

TEST(MemoryPlan, DisjointLifetimesShareMemory) {
  // A chain a -> b -> c where each dies when the next is made: two slots suffice.
  std::vector<LiveBuffer> bs{{128, 0, 1}, {128, 1, 2}, {128, 2, 3}};
  auto p = planMemory(bs);
  expectValid(bs, p, 64);
  EXPECT_EQ(p.arenaBytes, 256);
  EXPECT_EQ(p.liveLowerBound, 256);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
}

TEST(MemoryPlan, OverlappingLifetimesAddUp) {
  std::vector<LiveBuffer> bs{{100, 0, 5}, {30, 1, 4}, {1, 2, 3}};
  auto p = planMemory(bs, 64);
  expectValid(bs, p, 64);
  EXPECT_EQ(p.arenaBytes, 128 + 64 + 64);  // each rounded up to 64
}

TEST(MemoryPlan, FillsGapsLeftByDeadBuffers) {
  // The big buffer lives throughout; two small ones at different times reuse one slot.
  std::vector<LiveBuffer> bs{{1024, 0, 10}, {64, 0, 2}, {64, 5, 7}};
  auto p = planMemory(bs);
  expectValid(bs, p, 64);
  EXPECT_EQ(p.arenaBytes, 1088);
}

TEST(MemoryPlan, RandomProgramsAreValid) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LiveBuffer> bs;
    for (int i = 0; i < 40; ++i) {
      int64_t first = static_cast<int64_t>(rng() % 30);
      bs.push_back({static_cast<int64_t>(rng() % 5000), first, first + static_cast<int64_t>(rng() % 10)});
    }
    expectValid(bs, planMemory(bs, 64), 64);
  }
}

TEST(MemoryPlan, RejectsBadLifetimes) {
  EXPECT_THROW(planMemory({{10, 3, 2}}), std::invalid_argument);
  EXPECT_THROW(planMemory({{-1, 0, 0}}), std::invalid_argument);
}

}  // namespace
