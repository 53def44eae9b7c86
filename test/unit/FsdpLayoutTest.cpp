// The runtime's layout maths for fully sharded parameters (runtime/exec/Sharding.h,
// BlockLayout.h, Program.h ShardDim), checked against indices written out here from the
// layout as the docs state it:
//   - FSDP x TP: a first dimension split over [tp, fsdp] (tp major, fsdp minor) on the mesh
//     fsdp=2,tp=2 (fsdp outermost in the mesh, as `--plan fsdp=2,tp=2` makes it): rank
//     (f, t) holds rows t * G/2 + f * G/4 + i, so the gather over fsdp alone (the
//     all-gather's unpack from the group's blocks) rebuilds exactly the tensor-parallel
//     block that the [tp] layout gives rank t; the same per block for a dimension in blocks
//     (the fused q, k, v weight, gathered between two reshapes);
//   - an uneven first dimension under fsdp: padded at its end, -1 (padding) in globalIndices
//     and zero in the initialised shard; the all-gather's unpack trims the padding off and
//     the reduce-scatter's pack leaves it to the zeroed staging;
//   - validation accepts exactly the trimmed gather and the padded reduce-scatter.
#include "runtime/Init.h"
#include "runtime/exec/BlockLayout.h"
#include "runtime/exec/Sharding.h"
#include "test/support/ShardedPrograms.h"
#include "test/unit/ProgramCheckTestUtil.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace {

using namespace tessel::rt;
using tessel::test::buffer;
using K = CollectiveStep::Kind;

/// Runs the gather of `shards` (one per group rank, each `shardShape`) along `dim` into a
/// tensor of `outShape` the way the executor does: the communicator concatenates the shards
/// in group order into staging, and shardMovePlan's unpack copies staging into the output.
std::vector<float> gather(const std::vector<std::vector<float>>& shards, const std::vector<int64_t>& shardShape,
                          const std::vector<int64_t>& outShape, int64_t dim) {
  Program p;
  const auto group = static_cast<int64_t>(shards.size());
  const int64_t shardNumel = std::accumulate(shardShape.begin(), shardShape.end(), int64_t{1}, std::multiplies<>());
  p.buffers = {buffer("in", shardShape, BufferKind::Temp, 0), buffer("out", outShape, BufferKind::Temp, 0),
               buffer("staging", {shardNumel * group}, BufferKind::Temp, 0)};
  const CollectiveStep c = tessel::test::shardMove(K::AllGather, 0, 1, 2, dim, {"fsdp"}, group);
  const ShardMovePlan plan = shardMovePlan(p, c);
  EXPECT_EQ(plan.count, shardNumel * group);
  std::vector<float> staging;
  for (const auto& s : shards) staging.insert(staging.end(), s.begin(), s.end());
  std::vector<float> out(static_cast<size_t>(p.buffers[1].numel()), -99.0f);
  copyStrided(plan.unpack, staging.data(), out.data(), sizeof(float));
  return out;
}

/// The shard of `b` on the rank at `at`: the global tensor `whole` read at globalIndices
/// (0 for padding).
std::vector<float> shardOf(const Buffer& b, const MeshLayout& mesh, const std::vector<int>& at,
                           const std::vector<float>& whole) {
  std::vector<float> out;
  for (int64_t g : globalIndices(b, mesh, at)) out.push_back(g < 0 ? 0.0f : whole[static_cast<size_t>(g)]);
  return out;
}

TEST(FsdpLayout, TwoAxisFirstDimensionIsTpMajorFsdpMinor) {
  // --plan fsdp=2,tp=2: mesh coordinates (f, t), fsdp outermost. A [12, 2] weight stored
  // [3, 2] per rank over [tp, fsdp].
  const MeshLayout mesh({{"fsdp", 2}, {"tp", 2}});
  Buffer w = buffer("blocks.0.mlp.fc.weight", {3, 2}, BufferKind::Parameter);
  w.globalShape = {12, 2};
  w.sharding = {ShardDim{{"tp", "fsdp"}, 1}, ShardDim{}};
  Buffer tpBlock = buffer("blocks.0.mlp.fc.weight", {6, 2}, BufferKind::Parameter);  // the compute layout
  tpBlock.globalShape = {12, 2};
  tpBlock.sharding = {ShardDim{{"tp"}, 1}, ShardDim{}};
  const std::vector<float> whole = tessel::initParameter(24, tessel::InitKind::Normal, 0.02, 7, w.name);
  std::set<int64_t> covered;
  for (int t = 0; t < 2; ++t) {
    std::vector<std::vector<float>> group;  // the fsdp group of tp rank t, in fsdp order
    for (int f = 0; f < 2; ++f) {
      const std::vector<int> at{f, t};
      const std::vector<int64_t> index = globalIndices(w, mesh, at);
      ASSERT_EQ(index.size(), 6u);
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t c = 0; c < 2; ++c) {
          EXPECT_EQ(index[static_cast<size_t>(i * 2 + c)], (t * 6 + f * 3 + i) * 2 + c) << "rank (" << f << ", " << t << ")";
          covered.insert(index[static_cast<size_t>(i * 2 + c)]);
        }
      std::vector<float> shard(6);
      initParameterShard(w, &mesh, at, 7, shard.data());
      EXPECT_EQ(shard, shardOf(w, mesh, at, whole));
      group.push_back(shard);
    }
    // The gather over fsdp is tp rank t's compute block (the [tp] layout's shard).
    EXPECT_EQ(gather(group, {3, 2}, {6, 2}, 0), shardOf(tpBlock, mesh, {0, t}, whole)) << "tp rank " << t;
  }
  EXPECT_EQ(covered.size(), 24u);  // the four shards tile the tensor once
}

TEST(FsdpLayout, TwoAxisDimensionInBlocksIsGatheredPerBlock) {
  // A fused q, k, v weight [24, 2]: 3 blocks of 8 rows, each split over [tp, fsdp]; rank
  // (f, t) holds rows j * 8 + (2 t + f) * 2 + i of block j. Gathering per block ([3, 2, 2]
  // along dimension 1) gives the tp block [q_t; k_t; v_t] of the [tp] layout in 3 blocks.
  const MeshLayout mesh({{"fsdp", 2}, {"tp", 2}});
  Buffer w = buffer("blocks.0.attn.qkv.weight", {6, 2}, BufferKind::Parameter);
  w.globalShape = {24, 2};
  w.sharding = {ShardDim{{"tp", "fsdp"}, 3}, ShardDim{}};
  Buffer tpBlock = buffer("blocks.0.attn.qkv.weight", {12, 2}, BufferKind::Parameter);
  tpBlock.globalShape = {24, 2};
  tpBlock.sharding = {ShardDim{{"tp"}, 3}, ShardDim{}};
  const std::vector<float> whole = tessel::initParameter(48, tessel::InitKind::Normal, 0.02, 7, w.name);
  for (int t = 0; t < 2; ++t) {
    std::vector<std::vector<float>> group;
    for (int f = 0; f < 2; ++f) {
      const std::vector<int64_t> index = globalIndices(w, mesh, {f, t});
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t i = 0; i < 2; ++i)
          EXPECT_EQ(index[static_cast<size_t>((j * 2 + i) * 2)], (j * 8 + (2 * t + f) * 2 + i) * 2);
      group.push_back(shardOf(w, mesh, {f, t}, whole));
    }
    EXPECT_EQ(gather(group, {3, 2, 2}, {3, 4, 2}, 1), shardOf(tpBlock, mesh, {0, t}, whole)) << "tp rank " << t;
  }
}

TEST(FsdpLayout, UnevenFirstDimensionIsPaddedAtTheEndAndTrimmedByTheGather) {
  // 7 rows over fsdp = 3: shards of ceil(7 / 3) = 3 rows, the last holding row 6 and 2 rows
  // of padding. And 9 rows over 4: shards of 3, the last all padding.
  for (auto [rows, ranks] : {std::pair<int64_t, int>{7, 3}, {9, 4}}) {
    SCOPED_TRACE(std::to_string(rows) + " rows over " + std::to_string(ranks));
    const int64_t chunk = (rows + ranks - 1) / ranks;
    const MeshLayout mesh({{"fsdp", ranks}});
    Buffer w = buffer("wte.weight", {chunk, 2}, BufferKind::Parameter);
    w.init = "ones";  // padding is zero whatever the init
    w.globalShape = {rows, 2};
    w.sharding = {ShardDim{{"fsdp"}, 1, chunk * ranks - rows}, ShardDim{}};
    const std::vector<float> whole = tessel::initParameter(rows * 2, tessel::InitKind::Ones, 0.02, 7, w.name);
    std::vector<std::vector<float>> group;
    for (int f = 0; f < ranks; ++f) {
      const std::vector<int64_t> index = globalIndices(w, mesh, {f});
      std::vector<float> shard(static_cast<size_t>(chunk * 2));
      initParameterShard(w, &mesh, {f}, 7, shard.data());
      for (int64_t i = 0; i < chunk * 2; ++i) {
        const int64_t row = f * chunk + i / 2;
        EXPECT_EQ(index[static_cast<size_t>(i)], row < rows ? row * 2 + i % 2 : -1) << "rank " << f << " local " << i;
        EXPECT_EQ(shard[static_cast<size_t>(i)], row < rows ? 1.0f : 0.0f);
      }
      EXPECT_EQ(nonZeroPadding(w, mesh, {f}, shard.data()), -1);
      group.push_back(shard);
    }
    // Gather-then-trim: the whole tensor, not one padding row in it.
    EXPECT_EQ(gather(group, {chunk, 2}, {rows, 2}, 0), whole);

    // The reduce-scatter's transpose: the gradient [rows, 2] is packed into zeroed staging
    // [ranks][chunk, 2]; the padding rows stay zero, so every rank's shard of the sum has zero
    // padding and AdamW never moves it.
    Program p;
    p.buffers = {buffer("dw", {rows, 2}, BufferKind::Temp, 0), buffer("shard", {chunk, 2}, BufferKind::Temp, 0),
                 buffer("staging", {chunk * 2 * ranks}, BufferKind::Temp, 0)};
    const ShardMovePlan plan = shardMovePlan(p, tessel::test::shardMove(K::ReduceScatter, 0, 1, 2, 0, {"fsdp"}, ranks));
    EXPECT_TRUE(plan.zeroStaging);
    EXPECT_EQ(plan.count, chunk * 2 * ranks);
    EXPECT_EQ(plan.payloadBytes, chunk * 2 * ranks * 4);
    std::vector<float> grad(static_cast<size_t>(rows * 2));
    std::iota(grad.begin(), grad.end(), 1.0f);
    std::vector<float> staging(static_cast<size_t>(chunk * 2 * ranks), 0.0f);
    copyStrided(plan.pack, grad.data(), staging.data(), sizeof(float));
    for (int64_t i = 0; i < chunk * 2 * ranks; ++i)
      EXPECT_EQ(staging[static_cast<size_t>(i)], i < rows * 2 ? grad[static_cast<size_t>(i)] : 0.0f) << i;
  }
}

/// fsdp=3: a [7, 2] parameter gathered from its [3, 2] shards into [7, 2] (trimmed) and its
/// gradient reduce-scattered back (padded), with stagings of 3 x 6 elements.
Program unevenProgram() {
  Program p;
  p.mesh = {{"fsdp", 3}};
  p.buffers = {buffer("step.x", {3, 2}, BufferKind::Input), buffer("%g", {7, 2}, BufferKind::Temp, 0),
               buffer("%s1", {18}, BufferKind::Temp, 128),   buffer("%d", {3, 2}, BufferKind::Temp, 256),
               buffer("%s2", {18}, BufferKind::Temp, 320)};
  p.functions = {Function{"step",
                          {0},
                          {3},
                          {"d"},
                          {tessel::test::shardMove(K::AllGather, 0, 1, 2, 0, {"fsdp"}, 3),
                           tessel::test::shardMove(K::ReduceScatter, 1, 3, 4, 0, {"fsdp"}, 3, 0, "sum")},
                          512}};
  return p;
}

TEST(FsdpLayout, ValidationAcceptsTheTrimmedGatherAndThePaddedReduceScatterOnly) {
  EXPECT_NO_THROW(validateProgram(unevenProgram(), "test"));
  Program overTrimmed = unevenProgram();
  overTrimmed.buffers[1].shape = {6, 2};  // a whole shard dropped: not padding
  tessel::test::expectInvalid(overTrimmed, "all_gather over 3 ranks along dimension 0 makes [9, 2] of [3, 2], not [6, 2]");
  Program tooLong = unevenProgram();
  tooLong.buffers[1].shape = {10, 2};
  tessel::test::expectInvalid(tooLong, "all_gather over 3 ranks along dimension 0 makes [9, 2] of [3, 2], not [10, 2]");
  Program staging = unevenProgram();
  staging.buffers[4].shape = {14};  // the unpadded input's size: too small for the padded blocks
  tessel::test::expectInvalid(staging, "reduce_scatter: staging buffer 4 '%s2' holds 14 elements, not 18");
}

}  // namespace
