// The compiled program's memory per rank (runtime/exec/MemoryBreakdown.h) and the executor's
// measured allocations (runtime/exec/AllocationCounter.h), on a hand-built fsdp=2 program whose
// bytes are counted by hand below:
//   w [3, 4] f32, a shard of [5, 4] split over fsdp with 1 row of padding (rank 0 holds rows
//   0-2, rank 1 rows 3-4 and one padding row); w:exp_avg and w:grad_accum laid out alike;
//   step.x [2, 4] an input. Each is 48 or 32 bytes, one 64-byte aligned block each.
//   @step: s0 all_gathers w into %g [6, 4] through staging %s [24]; s1 computes %grad [3, 4]
//   from %g and x; s2 (an AdamW-like update reading w:exp_avg) writes %new [3, 4] from %grad,
//   w and w:exp_avg; s3 copies %new into w. Arena offsets: %g 0, %s 128, %grad 256, %new 320,
//   so the arena is 384 bytes; live at s0: %g (96 -> 128) and %s (96 -> 128) = 256 bytes, the
//   most at any step (s1: 128 + 64, s2: 64 + 64, s3: 64).
#include "runtime/exec/AllocationCounter.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/MemoryBreakdown.h"
#include "test/support/ShardedPrograms.h"

#include <gtest/gtest.h>

#include <cstring>

namespace {

using namespace tessel::rt;
using tessel::test::buffer;

Buffer sharded(Buffer b) {
  b.globalShape = {5, 4};
  b.sharding = {ShardDim{{"fsdp"}, 1, 1}, ShardDim{}};
  return b;
}

Program program() {
  Program p;
  p.mesh = {{"fsdp", 2}};
  p.buffers = {sharded(buffer("w", {3, 4}, BufferKind::Parameter)),
               sharded(buffer("w:exp_avg", {3, 4}, BufferKind::State)),
               sharded(buffer("w:grad_accum", {3, 4}, BufferKind::State)),
               buffer("step.x", {2, 4}, BufferKind::Input),
               buffer("%g", {6, 4}, BufferKind::Temp, 0),
               buffer("%s", {24}, BufferKind::Temp, 128),
               buffer("%grad", {3, 4}, BufferKind::Temp, 256),
               buffer("%new", {3, 4}, BufferKind::Temp, 320)};
  p.kernels["grad"] = {KernelArg{DType::F32, 12}, KernelArg{DType::F32, 24}, KernelArg{DType::F32, 8}};
  p.kernels["update"] = {KernelArg{DType::F32, 12}, KernelArg{DType::F32, 12}, KernelArg{DType::F32, 12},
                         KernelArg{DType::F32, 12}};
  Function f;
  f.name = "step";
  f.inputs = {3};
  f.steps = {tessel::test::shardMove(CollectiveStep::Kind::AllGather, 0, 4, 5, 0, {"fsdp"}, 2),
             KernelStep{"grad", {6, 4, 3}, "", std::nullopt}, KernelStep{"update", {7, 6, 0, 1}, "", std::nullopt},
             CopyStep{7, 0}};
  f.arenaBytes = 384;
  p.functions = {f};
  return p;
}

TEST(MemoryBreakdown, RolesAndBytesAsTheExecutorAllocatesThem) {
  const MemoryBreakdown m = memoryBreakdown(program());
  EXPECT_EQ(m.get(MemoryRole::Parameters), 64);      // 48 bytes, one aligned block
  EXPECT_EQ(m.get(MemoryRole::Gradients), 64);       // w:grad_accum
  EXPECT_EQ(m.get(MemoryRole::OptimizerState), 64);  // w:exp_avg
  EXPECT_EQ(m.get(MemoryRole::Inputs), 64);          // 32 bytes
  EXPECT_EQ(m.get(MemoryRole::GemmScratch), 0);      // no bf16 GEMM
  EXPECT_EQ(m.get(MemoryRole::Arena), 384);
  EXPECT_EQ(m.total(), 640);
  EXPECT_EQ(m.largest(), MemoryRole::Arena);
  EXPECT_EQ(m.parameterElements, 20);  // the global [5, 4]
}

TEST(MemoryBreakdown, ArenaContentsAtItsPeakStep) {
  const MemoryBreakdown m = memoryBreakdown(program());
  EXPECT_EQ(m.peakFunction, "step");
  EXPECT_EQ(m.peakStep, 0);
  EXPECT_EQ(m.peak.gatheredParameters, 128);  // %g, gathered from the parameter shard
  EXPECT_EQ(m.peak.communication, 128);       // %s, the gather's staging
  EXPECT_EQ(m.peak.gradients, 0);
  EXPECT_EQ(m.peak.activations, 0);
  // %grad is read by the update (which reads optimizer state) and has w's size; %new is the
  // update's output (copied into w), not a gradient.
  EXPECT_EQ(m.gradientTemporaries, 64);
  const nlohmann::json j = memoryJson(m);
  EXPECT_EQ(j["total"], 640);
  EXPECT_EQ(j["arena_peak"]["fragmentation"], 384 - 256);
}

TEST(MemoryBreakdown, PaddingDiffersByRank) {
  // Rank 0 holds rows 0-2 of 5: no padding. Rank 1 holds rows 3-4 and one padding row of 4
  // floats, in w and in both state buffers: 3 x 16 bytes.
  EXPECT_EQ(paddingBytes(program(), 0), 0);
  EXPECT_EQ(paddingBytes(program(), 1), 48);
  Program even = program();
  for (Buffer& b : even.buffers)
    if (!b.sharding.empty()) b.sharding[0].padding = 0, b.globalShape = {6, 4};
  EXPECT_EQ(paddingBytes(even, 1), 0);
}

TEST(MemoryBreakdown, RefusalNamesRankBytesBudgetAndLargestPart) {
  const MemoryBreakdown m = memoryBreakdown(program());
  EXPECT_EQ(deviceMemoryRefusal(m, 640, 1), "");
  const std::string why = deviceMemoryRefusal(m, 639, 1);
  EXPECT_NE(why.find("rank 1 needs"), std::string::npos) << why;
  EXPECT_NE(why.find("needs 640 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("the 639 bytes (0.00 MiB, 0.00 MB) of --device-memory, 1 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("largest part is the arena, 384 bytes"), std::string::npos) << why;
}

TEST(MemoryBreakdown, GradientBlocksOfZeroStageOneAndTwo) {
  // ZeRO-1/2's update: w [4, 4] replicated, its state a [2, 4] block; the update reads the
  // gradient's block %gb (from a reduce_scatter of %g) and the parameter's block %wb (sliced
  // from w), writes %nb. Only %gb is a gradient: %wb has the block's size but is the
  // parameter's own block.
  Program p;
  p.mesh = {{"fsdp", 2}};
  Buffer m = buffer("w:exp_avg", {2, 4}, BufferKind::State);
  m.globalShape = {4, 4};
  m.sharding = {ShardDim{{"fsdp"}, 1}, ShardDim{}};
  p.buffers = {buffer("w", {4, 4}, BufferKind::Parameter), m,
               buffer("%g", {4, 4}, BufferKind::Temp, 0),   buffer("%s", {16}, BufferKind::Temp, 64),
               buffer("%gb", {2, 4}, BufferKind::Temp, 128), buffer("%wb", {2, 4}, BufferKind::Temp, 192),
               buffer("%nb", {2, 4}, BufferKind::Temp, 256)};
  p.kernels["grad"] = {KernelArg{DType::F32, 16}, KernelArg{DType::F32, 16}};
  p.kernels["slice"] = {KernelArg{DType::F32, 8}, KernelArg{DType::F32, 16}};
  p.kernels["update"] = {KernelArg{DType::F32, 8}, KernelArg{DType::F32, 8}, KernelArg{DType::F32, 8},
                         KernelArg{DType::F32, 8}};
  Function f;
  f.name = "step";
  f.steps = {KernelStep{"grad", {2, 0}, "", std::nullopt},
             tessel::test::shardMove(CollectiveStep::Kind::ReduceScatter, 2, 4, 3, 0, {"fsdp"}, 2),
             KernelStep{"slice", {5, 0}, "", std::nullopt}, KernelStep{"update", {6, 4, 5, 1}, "", std::nullopt}};
  f.arenaBytes = 320;
  p.functions = {f};
  validateProgram(p, "test");
  EXPECT_EQ(memoryBreakdown(p).gradientTemporaries, 64);  // %gb: 32 bytes, aligned
}

void noKernel(void**) {}

TEST(AllocationCounter, ExecutorAllocatesExactlyThePrediction) {
  Executor ex(program(), [](const std::string&) { return reinterpret_cast<void*>(&noKernel); });
  const AllocationCounter* c = ex.allocationCounter();
  ASSERT_NE(c, nullptr);
  // Counted from the blocks really allocated: the arena and one per persistent buffer.
  EXPECT_EQ(c->allocations(), 5);
  EXPECT_EQ(c->peak(), 640);
  EXPECT_EQ(c->live(), 640);
  EXPECT_EQ(c->peak(MemoryRole::Arena), 384);
  EXPECT_EQ(c->peak(MemoryRole::Parameters), 64);
  EXPECT_EQ(c->peak(MemoryRole::Gradients), 64);
  EXPECT_EQ(c->peak(MemoryRole::OptimizerState), 64);
  EXPECT_EQ(c->peak(MemoryRole::Inputs), 64);
}

TEST(AllocationCounter, CountsLiveBytesAndThePeak) {
  AllocationCounter c;
  {
    AllocationCounter::Block a = c.allocate(100, MemoryRole::Parameters);  // 128 with alignment
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.get()) % kAllocationAlignment, 0u);
    EXPECT_EQ(static_cast<int>(a.get()[99]), 0);  // zero-filled
    {
      AllocationCounter::Block b = c.allocate(64, MemoryRole::Arena);
      EXPECT_EQ(c.live(), 192);
    }
    EXPECT_EQ(c.live(), 128);
    AllocationCounter::Block d = c.allocate(1, MemoryRole::Arena);
    EXPECT_EQ(c.live(), 192);
    EXPECT_EQ(c.peak(MemoryRole::Arena), 64);
  }
  EXPECT_EQ(c.live(), 0);
  EXPECT_EQ(c.peak(), 192);
  EXPECT_EQ(c.allocations(), 3);
  EXPECT_THROW(c.allocate(0, MemoryRole::Arena), std::logic_error);
}

TEST(AllocationCounter, ZeroBlockRangeZeroesExactlyTheRange) {
  // Every kind of block (a mapped one of huge pages, a mapped one, a small heap one) and
  // ranges with unaligned ends, shorter than a page, and whole: written with 0xA5 first, the
  // range must read back zero and every byte outside it must keep 0xA5.
  AllocationCounter c;
  for (int64_t size : {int64_t{6} << 20, int64_t{1} << 20, int64_t{5000}}) {
    AllocationCounter::Block block = c.allocate(size, MemoryRole::OptimizerState);
    std::byte* p = block.get();
    const std::vector<std::pair<int64_t, int64_t>> ranges = {
        {123, size - 123 - 77}, {0, size}, {4090, 12}, {64, size / 2}, {size - 1, 1}};
    for (auto [at, n] : ranges) {
      SCOPED_TRACE(testing::Message() << "block " << size << " range [" << at << ", +" << n << ")");
      std::memset(p, 0xA5, static_cast<size_t>(size));
      zeroBlockRange(p + at, n);
      int64_t wrong = 0;
      for (int64_t i = 0; i < size; ++i) {
        const auto want = (i >= at && i < at + n) ? std::byte{0} : std::byte{0xA5};
        wrong += p[i] != want;
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

}  // namespace
