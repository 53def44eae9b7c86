// Saving under one plan and world size and loading under another (runtime/ckpt/Checkpoint.h):
// every rank's buffers after the load must equal, bit for bit, the shard of the saved global
// tensors that globalIndices places there (padding zero). Plus pipeline stages with a tied
// parameter, the strict and --allow-partial checks, and weights-only checkpoints.
#include "CkptTestRanks.h"

#include "runtime/ckpt/Checkpoint.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

namespace tessel::ckpt {
namespace {

using test::TensorSpec;
constexpr rt::BufferKind kState = rt::BufferKind::State;

using test::Layout;
using test::layoutNamed;
using test::modelUnder;

/// Throws naming the first buffer of `ex` (rank `rank`) that is not its shard of save `salt`.
void expectLoaded(const test::HostExecutor& ex, int rank, int salt, const std::vector<std::string>& skip = {}) {
  if (std::string problem = test::loadedProblem(ex, rank, salt, skip); !problem.empty())
    throw std::runtime_error(problem);
}

/// Saves the model under `layout` (values of `salt`) as step `step` in `root`; returns the
/// bytes each rank writes per save.
std::vector<int64_t> saveUnder(const Layout& layout, const std::string& root, int64_t step, int salt,
                               SaveOptions options = {}) {
  options.root = root;
  std::vector<int64_t> bytes(static_cast<size_t>(layout.world));
  const std::vector<std::string> errors = test::runRanks(layout.world, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(modelUnder(layout));
    test::fillBuffers(ex, r, salt);
    Checkpointer ck(ex, world, options);
    bytes[static_cast<size_t>(r)] = ck.bytesPerSave();
    ck.save(step, {{"step", step}});
    ck.wait();
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return bytes;
}

class CkptReshard : public testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(CkptReshard, LoadsBitwiseUnderAnotherPlan) {
  const Layout saved = layoutNamed(GetParam().first), loaded = layoutNamed(GetParam().second);
  const std::string root = test::freshFolder(fmt::format("reshard_{}_{}", GetParam().first, GetParam().second));
  const std::vector<int64_t> bytes = saveUnder(saved, root, 5, 1);
  // Each element is written once, whatever the replicas: the ranks' bytes add up to the model.
  int64_t total = 0, model = 0;
  for (int64_t b : bytes) total += b;
  for (const rt::Buffer& b : modelUnder(layoutNamed("one")).buffers) model += b.bytes();
  EXPECT_EQ(total, model);
  const std::vector<std::string> errors = test::runRanks(loaded.world, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(modelUnder(loaded));
    test::fillBuffers(ex, r, 9);  // anything but the saved values, padding included
    const LoadResult result = loadCheckpoint(ex, world, root);
    if (result.dir != root + "/step_00000005") throw std::runtime_error("loaded " + result.dir);
    if (result.index.step != 5 || result.index.trainer.value("step", -1) != 5) throw std::runtime_error("wrong step");
    expectLoaded(ex, r, 1);
  }, /*nullWorld=*/true);
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

INSTANTIATE_TEST_SUITE_P(Pairs, CkptReshard,
                         testing::Values(std::pair{"fsdp4", "one"}, std::pair{"one", "fsdp4"},
                                         std::pair{"fsdp4", "tp2"}, std::pair{"fsdp2tp2", "dp2tp2"},
                                         std::pair{"dp2tp2", "fsdp2tp2"}, std::pair{"dp4", "fsdp4"},
                                         std::pair{"tp2", "fsdp2tp2"}, std::pair{"fsdp2tp2", "tp2"}),
                         [](const auto& info) { return std::string(info.param.first) + "_to_" + info.param.second; });

TEST(CkptEngine, EmptyShardsAreNotStored) {
  // Under fsdp=4, ranks 2 and 3 hold only padding of tiny.bias: two shards, not four.
  const std::string root = test::freshFolder("empty_shards");
  saveUnder(layoutNamed("fsdp4"), root, 3, 1);
  const Index index = readIndex(root + "/step_00000003");
  ASSERT_TRUE(index.tensors.count("tiny.bias"));
  EXPECT_EQ(index.tensors.at("tiny.bias").shards.size(), 2u);
  EXPECT_EQ(index.tensors.at("fc.weight").shards.size(), 4u);  // 2 + 2 + 2 + 1 rows
  EXPECT_EQ(index.tensors.at("ln.scale").shards.size(), 1u);   // replicated: written once
  EXPECT_EQ(index.tensors.at("ln.scale").kind, "parameter");
  EXPECT_EQ(index.tensors.at("ln.scale:exp_avg").kind, "optimizer_state");
  // The committed folder holds the index and the shard files only (no markers, no temporaries).
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(root + "/step_00000003"))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"index.json", "rank_00000.safetensors", "rank_00001.safetensors",
                                             "rank_00002.safetensors", "rank_00003.safetensors"}));
}

TEST(CkptEngine, ReplicasShareTheWriting) {
  // Under dp=4 every rank holds every tensor whole. The writers are balanced greedily (largest
  // box first, to the holder with the fewest bytes so far), so no rank writes more than a
  // quarter of the model plus one box (the greedy bound), and each writes something; writing
  // everything on the lowest rank, as a first-holder rule would, fails both.
  const std::string root = test::freshFolder("replicas_share");
  const std::vector<int64_t> bytes = saveUnder(layoutNamed("dp4"), root, 2, 1);
  int64_t total = 0, largest = 0;
  for (const rt::Buffer& b : modelUnder(layoutNamed("one")).buffers) {
    total += b.bytes();
    largest = std::max(largest, b.bytes());
  }
  for (size_t r = 0; r < bytes.size(); ++r) {
    EXPECT_GT(bytes[r], 0) << "rank " << r;
    EXPECT_LE(bytes[r], total / 4 + largest) << "rank " << r;
  }
  // Every rank computed the same assignment: the index covers each tensor exactly once.
  const Index index = readIndex(root + "/step_00000002");
  for (const auto& [name, t] : index.tensors) EXPECT_EQ(t.shards.size(), 1u) << name;
}

TEST(CkptEngine, EachRankReadsOnlyItsOwnShards) {
  // Loaded under the plan that saved it, each rank's boxes are exactly shards of the index, so
  // it reads those bytes and no others (the CRC blocks, 1 MiB, are larger than any shard).
  const std::string root = test::freshFolder("own_shards");
  saveUnder(layoutNamed("fsdp2tp2"), root, 3, 1);
  const auto errors = test::runRanks(4, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(modelUnder(layoutNamed("fsdp2tp2")));
    const LoadResult result = loadCheckpoint(ex, world, root);
    int64_t own = 0;  // this rank's non-padding bytes
    const rt::Program& p = ex.program();
    const rt::MeshLayout mesh(p.mesh);
    for (const rt::Buffer& b : p.buffers)
      for (int64_t g : rt::globalIndices(b, mesh, mesh.coordinates(r))) own += g >= 0 ? 4 : 0;
    if (result.stats.bytesNeeded != own || result.stats.bytesRead != own)
      throw std::runtime_error(fmt::format("rank {} read {} bytes for {} needed; it holds {}", r,
                                           result.stats.bytesRead, result.stats.bytesNeeded, own));
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

TEST(CkptEngine, BoxesOfOneBufferReadEachBlockOnce) {
  // Saved on one rank, every shard is a whole tensor smaller than one CRC block. Under tp=2 the
  // fused qkv weight is three boxes per rank (its q, k and v column blocks), all in that one
  // block: read together, each rank reads every block at most once, so no more than the whole
  // checkpoint; reading each box alone would read the qkv block (and its state's) three times.
  const std::string root = test::freshFolder("blocks_once");
  saveUnder(layoutNamed("one"), root, 4, 1);
  int64_t total = 0;
  for (const rt::Buffer& b : modelUnder(layoutNamed("one")).buffers) total += b.bytes();
  const auto errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(modelUnder(layoutNamed("tp2")));
    const LoadResult result = loadCheckpoint(ex, world, root);
    expectLoaded(ex, r, 1);
    if (result.stats.bytesRead > total)
      throw std::runtime_error(fmt::format("rank {} read {} bytes of a {}-byte checkpoint", r,
                                           result.stats.bytesRead, total));
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

TEST(CkptEngine, MeshOfAnotherWorldSizeIsRefusedOnEveryRank) {
  const std::string root = test::freshFolder("world_size");
  saveUnder(layoutNamed("one"), root, 1, 1);
  const auto errors = test::runRanks(2, [&](int, rt::Communicator* world) {
    test::HostExecutor ex(modelUnder(layoutNamed("fsdp4")));
    loadCheckpoint(ex, world, root);
  });
  EXPECT_NE(errors[0].find("the program's mesh fsdp=4 has 4 ranks but the world has 2"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0], errors[1]);
}

TEST(CkptEngine, PipelineStagesAndTiedParameter) {
  // Two stages with different parameters; "tied.weight" lives on both (a tied embedding).
  const std::vector<rt::MeshAxis> mesh{{"pp", 2}};
  auto stage = [&](int s) {
    std::vector<TensorSpec> t{{"tied.weight", {4, 6}, {}, rt::BufferKind::Parameter}};
    t.push_back(s == 0 ? TensorSpec{"emb.pos", {5, 6}, {}, rt::BufferKind::Parameter}
                       : TensorSpec{"head.bias", {3}, {}, rt::BufferKind::Parameter});
    return test::makeProgram(mesh, t);
  };
  const std::string root = test::freshFolder("pipeline");
  std::vector<std::string> errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(stage(r));
    test::fillBuffers(ex, r, 2);
    Checkpointer ck(ex, world, {root});
    ck.save(7, {{"step", 7}});
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  const Index index = readIndex(root + "/step_00000007");
  EXPECT_EQ(index.tensors.size(), 3u);
  ASSERT_TRUE(index.tensors.count("tied.weight") && index.tensors.count("head.bias"));
  EXPECT_EQ(index.tensors.at("tied.weight").shards.size(), 1u);  // written once, by the lower rank
  EXPECT_EQ(index.tensors.at("head.bias").shards[0].file, "rank_00001.safetensors");
  // One rank holding every stage's parameters loads the union.
  errors = test::runRanks(1, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(test::makeProgram({}, {{"emb.pos", {5, 6}, {}, rt::BufferKind::Parameter},
                                                 {"head.bias", {3}, {}, rt::BufferKind::Parameter},
                                                 {"tied.weight", {4, 6}, {}, rt::BufferKind::Parameter}}));
    loadCheckpoint(ex, world, root);
    expectLoaded(ex, r, 2);
  });
  EXPECT_EQ(errors[0], "");
}

TEST(CkptEngine, StrictLoadListsMissingAndUnexpectedOnEveryRank) {
  const std::string root = test::freshFolder("strict");
  saveUnder(layoutNamed("one"), root, 4, 1);
  const Layout two{{}, 2, {}};
  // Rank 0 lacks ln.scale but rank 1 has it (not unexpected: some rank's program has it);
  // rank 1 has a tensor the checkpoint lacks.
  const TensorSpec extra{"extra.weight", {3}, {}, rt::BufferKind::Parameter};
  std::vector<std::string> errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(r == 0 ? modelUnder(two, {"ln.scale"}) : modelUnder(two, {}, {extra}));
    loadCheckpoint(ex, world, root);
  });
  EXPECT_NE(errors[0].find("not in the checkpoint: extra.weight"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0].find("ln.scale"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0], errors[1]);
  // Both lack ln.scale and its state: unexpected, listed; --allow-partial loads the rest.
  for (bool partial : {false, true}) {
    errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
      test::HostExecutor ex(modelUnder(two, {"ln.scale", "ln.scale:exp_avg"}, {extra}));
      test::fillBuffers(ex, r, 9);
      const LoadResult result = loadCheckpoint(ex, world, root, {partial});
      expectLoaded(ex, r, 1, {"extra.weight"});
      expectLoaded(ex, r, 9, {"emb.weight", "qkv.weight", "fc.weight", "tiny.bias", "emb.weight:exp_avg",
                              "qkv.weight:exp_avg", "fc.weight:exp_avg", "tiny.bias:exp_avg", "optimizer.step"});
      if (result.notes.size() != 2) throw std::runtime_error("notes: " + fmt::format("{}", fmt::join(result.notes, "|")));
      throw std::runtime_error(result.notes[0] + " | " + result.notes[1]);
    });
    for (const std::string& e : errors) {
      EXPECT_NE(e.find("not in the checkpoint: extra.weight"), std::string::npos) << e;
      EXPECT_NE(e.find("in no rank's program: ln.scale, ln.scale:exp_avg"), std::string::npos) << e;
      EXPECT_EQ(e.find("cannot load") != std::string::npos, !partial) << e;
    }
    EXPECT_EQ(errors[0], errors[1]);
  }
}

TEST(CkptEngine, ShapeMismatchIsAnErrorEvenWhenPartial) {
  const std::string root = test::freshFolder("mismatch");
  saveUnder(layoutNamed("one"), root, 4, 1);
  for (bool partial : {false, true}) {
    const std::vector<std::string> errors = test::runRanks(1, [&](int, rt::Communicator* world) {
      test::HostExecutor ex(modelUnder(layoutNamed("one"), {"fc.weight"}, {{"fc.weight", {7, 5}, {}, rt::BufferKind::Parameter}}));
      loadCheckpoint(ex, world, root, {partial});
    });
    EXPECT_NE(errors[0].find("tensor 'fc.weight' is parameter F32 [7, 4] in the checkpoint but parameter F32 [7, 5] in "
                             "the program"), std::string::npos) << errors[0];
  }
}

TEST(CkptEngine, WeightsOnlyCheckpointZeroesOptimizerState) {
  const std::string root = test::freshFolder("weights_only");
  saveUnder(layoutNamed("one"), root, 0, 1);
  // Rewrite its index as an import would: parameters only, optimizer_state false.
  const std::string dir = root + "/step_00000000";
  Index index = readIndex(dir);
  index.optimizerState = false;
  std::erase_if(index.tensors, [](const auto& t) { return t.second.kind == "optimizer_state"; });
  std::ofstream(dir + "/index.json") << serializeIndex(index);
  const std::vector<std::string> errors = test::runRanks(4, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(modelUnder(layoutNamed("fsdp2tp2")));
    test::fillBuffers(ex, r, 9);
    loadCheckpoint(ex, world, root);
    const rt::Program& p = ex.program();
    for (size_t i = 0; i < p.buffers.size(); ++i)
      if (p.buffers[i].kind == kState)
        for (uint8_t byte : ex.bytes(static_cast<int>(i)))
          if (byte != 0) throw std::runtime_error(p.buffers[i].name + " is not zero");
    expectLoaded(ex, r, 1, {"emb.weight:exp_avg", "qkv.weight:exp_avg", "fc.weight:exp_avg", "tiny.bias:exp_avg",
                            "ln.scale:exp_avg", "optimizer.step"});
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace tessel::ckpt
