// Where the GPU executor's compute stream waits for the all-gathers and reduce-scatters it
// issues (runtime/cuda/CudaOverlap.h), on hand-written programs: which moves run straight
// between their tensors, and that each one is waited for exactly before the first later step
// that touches its memory (a reader or writer of its output, a writer of its input, a Temp
// reusing its bytes), or at the end. The end-to-end check that the results are unchanged on
// concurrent streams is test/standin/nccl/check_gpu_dp.py (fsdp).
#include "runtime/cuda/CudaOverlap.h"
#include "test/support/ShardedPrograms.h"

#include <gtest/gtest.h>

namespace {

using namespace tessel::rt;
using tessel::test::buffer;
using tessel::test::shardMove;
using K = CollectiveStep::Kind;
using Waits = std::vector<std::vector<size_t>>;

KernelStep kernel(std::vector<int> args) {
  KernelStep k;
  k.symbol = "k";
  k.args = std::move(args);
  return k;
}

/// f32 buffers: 0 "w" [2, 4] parameter shard, 1 %wfull [4, 4] at 0, 2 %stage [4, 4] at 64,
/// 3 %x [4] at 128, 4 %y [4] at 192, 5 %g [4, 4] at 256, 6 %gs [2, 4] at 320, 7 %z [4] at 256
/// (the bytes of %g, reused once %g is dead), 8 "w:exp_avg" [2, 4] state.
Program program(std::vector<Step> steps) {
  Program p;
  p.buffers = {buffer("w", {2, 4}, BufferKind::Parameter),   buffer("%wfull", {4, 4}, BufferKind::Temp, 0),
               buffer("%stage", {4, 4}, BufferKind::Temp, 64), buffer("%x", {4}, BufferKind::Temp, 128),
               buffer("%y", {4}, BufferKind::Temp, 192),      buffer("%g", {4, 4}, BufferKind::Temp, 256),
               buffer("%gs", {2, 4}, BufferKind::Temp, 320),  buffer("%z", {4}, BufferKind::Temp, 256),
               buffer("w:exp_avg", {2, 4}, BufferKind::State)};
  p.functions = {Function{"train_step", {}, {}, {}, std::move(steps), 384}};
  return p;
}

CollectiveStep gather() { return shardMove(K::AllGather, 0, 1, 2, 0, {"fsdp"}, 2); }
CollectiveStep scatter() { return shardMove(K::ReduceScatter, 5, 6, 2, 0, {"fsdp"}, 2, 0, "avg"); }

TEST(CudaOverlap, DimensionZeroMovesOfDisjointTensorsRunDirect) {
  const Program p = program({});
  EXPECT_TRUE(directShardMove(p, gather()));
  EXPECT_TRUE(directShardMove(p, scatter()));
  // One rank: a copy, no collective.
  CollectiveStep one = gather();
  one.group = 1;
  EXPECT_FALSE(directShardMove(p, one));
  // Dimension 1 of [4, 4]: the ranks' blocks are not the tensor's layout (4 rows before it).
  CollectiveStep columns = shardMove(K::AllGather, 6, 1, 2, 1, {"tp"}, 2);
  EXPECT_FALSE(directShardMove(p, columns));
  // ... unless every dimension before it has size 1.
  Program flat = program({});
  flat.buffers[6].shape = {1, 8};
  flat.buffers[1].shape = {1, 16};
  EXPECT_TRUE(directShardMove(flat, columns));
  // all_to_all always goes through its staging buffer.
  EXPECT_FALSE(directShardMove(p, shardMove(K::AllToAll, 5, 1, 2, 0, {"tp"}, 2, 1)));
  // Input and output sharing bytes: NCCL's in-place rules differ, so the staging path stays.
  Program shared = program({});
  shared.buffers[6].offset = 288;  // inside %g [256, 320)
  EXPECT_FALSE(directShardMove(shared, scatter()));
  // Every all-reduce keeps its own start and wait.
  EXPECT_FALSE(directShardMove(p, tessel::test::synchronousAllReduce(K::AllReduceStart, 0, 2, 3, "avg", {"dp"}, 2)));
}

TEST(CudaOverlap, EachMoveIsWaitedForBeforeTheFirstStepTouchingItsMemory) {
  const Program p = program({gather(),                    // 0: w -> %wfull
                             CopyStep{3, 4},               // 1: unrelated: overlaps the gather
                             kernel({1, 3}),               // 2: reads %wfull: waits for 0
                             scatter(),                    // 3: %g -> %gs
                             CopyStep{3, 4},               // 4: unrelated
                             kernel({7}),                  // 5: %z reuses %g's bytes: waits for 3
                             gather()});                   // 6: never touched again: waited at the end
  EXPECT_EQ(shardMoveWaits(p, p.functions[0]), (Waits{{}, {}, {0}, {}, {}, {3}, {}, {6}}));
}

TEST(CudaOverlap, WritersOfTheInputAndLaterCollectivesWait) {
  // The optimizer writing the parameter shard the gather still reads (write after read), a
  // second gather into the same output (write after write), and a step touching both pending
  // moves waits for both, in issue order.
  const Program p = program({gather(),                  // 0
                             kernel({0, 8}),            // 1: writes w: waits for 0
                             gather(),                  // 2
                             scatter(),                 // 3
                             gather(),                  // 4: writes %wfull again: waits for 2
                             kernel({1, 6})});          // 5: %wfull and %gs: waits for 3 and 4
  EXPECT_EQ(shardMoveWaits(p, p.functions[0]), (Waits{{}, {0}, {}, {}, {2}, {3, 4}, {}}));
  // A move that must go through staging is not deferred at all: nothing to wait for later.
  Program staged = p;
  for (Step& s : staged.functions[0].steps)
    if (auto* c = std::get_if<CollectiveStep>(&s)) c->group = 1;
  EXPECT_EQ(shardMoveWaits(staged, staged.functions[0]), (Waits(7)));
}

TEST(CudaOverlap, BuffersOfNoBytesNeverConflict) {
  Program p = program({gather(), kernel({3})});
  p.buffers[3].shape = {0};
  p.buffers[3].offset = 0;  // at %wfull's offset, but empty
  EXPECT_EQ(shardMoveWaits(p, p.functions[0]), (Waits{{}, {}, {0}}));
}

}  // namespace
