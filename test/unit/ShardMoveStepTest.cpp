// The one-step collectives that move shards (CollectiveStep kinds AllGather, ReduceScatter,
// AllToAll; runtime/exec/Program.h) in a program: they survive save/load, validation names
// every inconsistency (shapes against the group along the dimension, divisibility, dtypes,
// staging size, reduce, dims, aliasing), --explain lists them with their bytes per kind, and
// on one rank (group 1) they are the identity in the CPU executor. The multi-rank values
// are tested in test/mpi/ShardMoveMpiTest.cpp, the repacking in NcclTest.cpp.
#include "runtime/exec/Collectives.h"
#include "runtime/exec/Executor.h"
#include "test/support/ShardedPrograms.h"
#include "test/unit/ProgramCheckTestUtil.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace {

using namespace tessel::rt;
namespace fs = std::filesystem;
using tessel::test::buffer;
using tessel::test::shardMove;
using K = CollectiveStep::Kind;

/// dp=2,tp=2; @step gathers x [2, 4, 4] over tp along dim 1 into g [2, 8, 4] (staging 64),
/// reduce-scatters g over dp,tp along dim 1 into s [2, 2, 4] (avg; staging 64) and exchanges
/// g over tp, split dim 1 and concat dim 2, into a [2, 4, 8] (staging 128).
Program program() {
  Program p;
  p.mesh = {{"dp", 2}, {"tp", 2}};
  p.buffers = {buffer("step.x", {2, 4, 4}, BufferKind::Input), buffer("%g", {2, 8, 4}, BufferKind::Temp, 0),
               buffer("%s1", {64}, BufferKind::Temp, 256),     buffer("%s", {2, 2, 4}, BufferKind::Temp, 512),
               buffer("%s2", {64}, BufferKind::Temp, 576),     buffer("%a", {2, 4, 8}, BufferKind::Temp, 832),
               buffer("%s3", {128}, BufferKind::Temp, 1088)};
  CollectiveStep gather = shardMove(K::AllGather, 0, 1, 2, 1, {"tp"}, 2);
  gather.location = "model.h:3:1";
  gather.names = {"seq.gather"};
  p.functions = {Function{"step",
                          {0},
                          {3, 5},
                          {"s", "a"},
                          {gather, shardMove(K::ReduceScatter, 1, 3, 4, 1, {"dp", "tp"}, 4, 0, "avg"),
                           shardMove(K::AllToAll, 1, 5, 6, 1, {"tp"}, 2, 2)},
                          1600}};
  return p;
}

CollectiveStep& step(Program& p, size_t i) { return std::get<CollectiveStep>(p.functions[0].steps[i]); }

using tessel::test::expectInvalid;

TEST(ShardMoveStep, SaveLoadRoundTrip) {
  const std::string dir = (fs::path(testing::TempDir()) / "tessel_shard_move_roundtrip").string();
  fs::remove_all(dir);
  Program p = program();
  step(p, 0).dim = 1;
  saveProgram(p, dir);
  EXPECT_TRUE(loadProgram(dir) == p);
  // A key of another kind (all_gather has no reduce) and a missing dim are refused by name.
  const fs::path json = fs::path(dir) / "program.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(json));
  auto refused = [&](nlohmann::json edited, const std::string& message) {
    std::ofstream(json) << edited.dump();
    try {
      loadProgram(dir);
      ADD_FAILURE() << "loaded; expected: " << message;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  nlohmann::json withReduce = j;
  withReduce["functions"][0]["steps"][0]["reduce"] = "sum";
  refused(withReduce, "functions[0].steps[0]: unknown field 'reduce'");
  nlohmann::json withoutDim = j;
  withoutDim["functions"][0]["steps"][2].erase("concat_dim");
  refused(withoutDim, "functions[0].steps[2].concat_dim");
}

TEST(ShardMoveStep, ValidationNamesEveryInconsistency) {
  EXPECT_NO_THROW(validateProgram(program(), "test"));
  Program shape = program();
  shape.buffers[1].shape = {2, 4, 8};  // gathered along dim 2 instead of 1
  expectInvalid(shape, "all_gather over 2 ranks along dimension 1 makes [2, 8, 4] of [2, 4, 4], not [2, 4, 8]");
  Program indivisible = program();
  indivisible.mesh.clear();  // without a mesh any group runs (on the world), so only the sizes
  step(indivisible, 2).group = 3;  // 8 rows over 3 ranks
  expectInvalid(indivisible, "all_to_all: dimension 1 of buffer 1 '%g' (8) is not divisible by the group of 3");
  Program dtype = program();
  dtype.buffers[2].dtype = DType::BF16;
  expectInvalid(dtype, "all_gather: the input, output and staging buffers differ in dtype");
  Program i32 = program();
  for (int id : {0, 1, 2}) i32.buffers[static_cast<size_t>(id)].dtype = DType::I32;
  expectInvalid(i32, "is not f32 or bf16");
  Program staging = program();
  staging.buffers[6].shape = {64};
  expectInvalid(staging, "all_to_all: staging buffer 6 '%s3' holds 64 elements, not 128");
  Program huge = program();
  huge.mesh.clear();
  step(huge, 0).group = int64_t{1} << 40;
  expectInvalid(huge, "steps[0].group: 1099511627776 ranks");
  Program reduce = program();
  step(reduce, 1).reduce = "max";
  expectInvalid(reduce, "'max' (expected sum or avg)");
  Program dim = program();
  step(dim, 2).concatDim = 3;
  expectInvalid(dim, "concat_dim: dimension 3 of a rank-3 tensor");
  Program alias = program();
  step(alias, 0).buffer = 1;  // the staging is the output
  expectInvalid(alias, "share memory");
  Program axes = program();
  step(axes, 1).axes = {"tp", "dp"};
  expectInvalid(axes, "out of mesh order");
}

TEST(ShardMoveStep, ExplainListsEachWithItsBytesPerKind) {
  const std::string report = explainCollectives(program(), "step");
  // Payloads (Communicator.h): all_gather the gathered 64 f32, reduce_scatter and
  // all_to_all their 64-element f32 input: 256 bytes each.
  EXPECT_NE(report.find("collectives of @step: 0 buckets, 3 forward/backward collectives\n"), std::string::npos)
      << report;
  EXPECT_NE(report.find("all_gather over tp (2 ranks) dim 1 [2x4x4] -> [2x8x4], 256 bytes"), std::string::npos)
      << report;
  EXPECT_NE(report.find("model.h:3:1 [seq.gather]"), std::string::npos) << report;
  EXPECT_NE(report.find("reduce_scatter avg over dp,tp (4 ranks) dim 1 [2x8x4] -> [2x2x4], 256 bytes"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("all_to_all over tp (2 ranks) split dim 1 concat dim 2 [2x8x4] -> [2x4x8], 256 bytes"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("per rank per step by kind: all_reduce 0 bytes, all_gather 256 bytes, reduce_scatter 256 "
                        "bytes, all_to_all 256 bytes\n"),
            std::string::npos)
      << report;
  // Wire: (N - 1) / N x payload each: 128 + 192 + 128.
  EXPECT_NE(report.find("= 448 bytes (N = 4)"), std::string::npos) << report;
  // The schedule hash sees the dimension.
  Program otherDim = program();
  step(otherDim, 2).concatDim = 0;
  otherDim.buffers[5].shape = {4, 4, 4};
  EXPECT_NE(collectiveScheduleHash(otherDim), collectiveScheduleHash(program()));
}

TEST(ShardMoveStep, OneRankIsTheIdentityAndCountsNothing) {
  // A mesh of one rank per axis: every group has one member.
  Program p = program();
  p.mesh = {{"dp", 1}, {"tp", 1}};
  p.buffers = {buffer("step.x", {2, 4, 4}, BufferKind::Input), buffer("%g", {2, 4, 4}, BufferKind::Temp, 0),
               buffer("%s1", {32}, BufferKind::Temp, 128), buffer("%s", {2, 4, 4}, BufferKind::Temp, 256),
               buffer("%s2", {32}, BufferKind::Temp, 384), buffer("%a", {2, 4, 4}, BufferKind::Temp, 512),
               buffer("%s3", {64}, BufferKind::Temp, 640)};
  for (Step& s : p.functions[0].steps) std::get<CollectiveStep>(s).group = 1;
  p.functions[0].arenaBytes = 896;
  Executor ex(p, [](const std::string&) { return nullptr; });
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 0.5f;
  ex.setInput("step", 0, x.data(), x.size() * sizeof(float));
  ex.run("step");
  for (const OutputView& o : ex.outputs("step"))
    for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(o.value(i), x[static_cast<size_t>(i)]) << o.name << "[" << i << "]";
  EXPECT_EQ(ex.collectiveCounters().collectives, 0);
}

TEST(ShardMoveStep, AGroupWithoutACommunicatorIsAnError) {
  Program p = program();
  p.mesh.clear();  // without a mesh a collective runs on the world communicator, unset here
  Executor ex(p, [](const std::string&) { return nullptr; });
  try {
    ex.run("step");
    ADD_FAILURE() << "ran without a communicator";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("all_gather along dim 1 of @step over tp runs over 2 ranks (tp), but no "
                                        "communicator was set"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
