// Sharded programs (runtime/exec/Program.h, Sharding.h, Replicas.h, ExportParams.h): the mesh,
// sharded buffers and collectives over axes lists survive save/load and are validated; a
// sharded parameter's shard is the slice of the global initialisation that the layout rule
// names, computed here independently from the rule as ShardDim states it (blocks, parts, row-major
// part index); the replica check compares each buffer within its own replica group only; one
// rank exports its parameters in their global shapes.
#include "runtime/Init.h"
#include "runtime/exec/Collectives.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExportParams.h"
#include "runtime/exec/Replicas.h"
#include "runtime/exec/Sharding.h"
#include "test/support/ShardedPrograms.h"
#include "test/unit/ProgramCheckTestUtil.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

namespace {

using namespace tessel::rt;
namespace fs = std::filesystem;

using tessel::test::buffer;

/// dp=2,tp=2 (test/support/ShardedPrograms.h meshParameters: w, w:exp_avg, b), an input
/// step.x [3] and @step's synchronous all-reduce sum of it over tp into y.
Program meshProgram() {
  Program p;
  p.mesh = {{"dp", 2}, {"tp", 2}};
  p.buffers = tessel::test::meshParameters(0.02);
  for (Buffer b : {buffer("step.x", {3}, BufferKind::Input), buffer("%sync", {3}, BufferKind::Temp, 0),
                   buffer("%out", {3}, BufferKind::Temp, 64)})
    p.buffers.push_back(b);
  using K = CollectiveStep::Kind;
  CollectiveStep start = tessel::test::synchronousAllReduce(K::AllReduceStart, 0, 4, 3, "sum", {"tp"}, 2);
  start.names = {"mlp.proj"};
  start.location = "model.h:7:3";
  CollectiveStep wait = tessel::test::synchronousAllReduce(K::AllReduceWait, 0, 4, 5, "sum", {"tp"}, 2);
  wait.location = start.location;
  p.functions = {Function{"step", {3}, {5}, {"y"}, {start, wait}, 128}};
  return p;
}

using tessel::test::expectInvalid;

TEST(ShardedProgram, SaveLoadRoundTripKeepsMeshShardingAndAxes) {
  std::string dir = (fs::path(testing::TempDir()) / "tessel_sharded_roundtrip").string();
  fs::remove_all(dir);
  Program p = meshProgram();
  p.buffers[0].sharding[0].blocks = 2;
  saveProgram(p, dir);
  EXPECT_TRUE(loadProgram(dir) == p);
  Program padded = meshProgram();  // padding round-trips too
  padded.buffers[0].globalShape[0] = 3;
  padded.buffers[0].sharding[0].padding = 1;
  saveProgram(padded, dir);
  EXPECT_TRUE(loadProgram(dir) == padded);
  // The previous format is refused with the recompile message.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(fs::path(dir) / "program.json"));
  EXPECT_EQ(j["version"], kProgramFormatVersionCpu);
  j["version"] = 3;
  std::ofstream(fs::path(dir) / "program.json") << j.dump();
  try {
    loadProgram(dir);
    ADD_FAILURE() << "version 3 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("compile the program again"), std::string::npos) << e.what();
  }
}

TEST(ShardedProgram, ExplainListsSynchronousCollectivesApartFromBuckets) {
  const std::string report = explainCollectives(meshProgram(), "step");
  EXPECT_NE(report.find("collectives of @step: 0 buckets, 1 forward/backward collective\n"), std::string::npos)
      << report;
  EXPECT_NE(report.find("forward/backward collective 0: all_reduce sum over tp (2 ranks), 12 bytes"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("model.h:7:3 [mlp.proj]"), std::string::npos) << report;
  EXPECT_EQ(report.find("bucket 0:"), std::string::npos) << report;
  // The schedule hash sees the axes: the same sizes over dp instead of tp differ.
  Program overDp = meshProgram();
  for (Step& s : overDp.functions[0].steps) std::get<CollectiveStep>(s).axes = {"dp"};
  EXPECT_NE(collectiveScheduleHash(overDp), collectiveScheduleHash(meshProgram()));
}

TEST(ShardedProgram, ExplainShowsEachParameterLayoutAndReplicaGroup) {
  Program p = meshProgram();
  p.buffers[0].sharding[0].blocks = 2;
  EXPECT_EQ(explainShardings(p),
            "parameters on the mesh dp=2,tp=2:\n"
            "  w  local [2, 3] of [4, 3], dim 0 over [tp] in 2 blocks; replicas over [dp]\n"
            "  b  local [3] replicated; replicas over [dp, tp]\n");
  for (Buffer& b : p.buffers) b.globalShape.clear(), b.sharding.clear();
  EXPECT_EQ(explainShardings(p), "");  // a mesh with every parameter replicated: data parallelism
  p.mesh.clear();
  EXPECT_EQ(explainShardings(p), "");
}

TEST(ShardedProgram, ValidationNamesEveryInconsistency) {
  EXPECT_NO_THROW(validateProgram(meshProgram(), "test"));
  Program unknownAxis = meshProgram();
  unknownAxis.buffers[0].sharding[0].axes = {"pp"};
  expectInvalid(unknownAxis, "'pp' is not an axis of the mesh [dp=2,tp=2]");
  Program twice = meshProgram();
  twice.buffers[0].sharding[1].axes = {"tp"};
  twice.buffers[0].globalShape[1] = 6;
  expectInvalid(twice, "'tp' splits 'w' twice");
  Program wrongGlobal = meshProgram();
  wrongGlobal.buffers[0].globalShape[0] = 6;
  expectInvalid(wrongGlobal, "global dimension 6 but local dimension 2 over 2 part(s)");
  Program padded = meshProgram();  // 3 rows over 2 ranks: 2 each, one of padding
  padded.buffers[0].globalShape[0] = 3;
  padded.buffers[0].sharding[0].padding = 1;
  EXPECT_NO_THROW(validateProgram(padded, "test"));
  Program overPadded = padded;
  overPadded.buffers[0].sharding[0].padding = 2;
  overPadded.buffers[0].globalShape[0] = 2;
  expectInvalid(overPadded, "'w' dimension 0 has padding 2; it must be in [0, 2)");
  Program wrongPadded = padded;
  wrongPadded.buffers[0].globalShape[0] = 2;
  expectInvalid(wrongPadded, "global dimension 2 (padded by 1) but local dimension 2 over 2 part(s)");
  Program blockedPadding = padded;
  blockedPadding.buffers[0].sharding[0].blocks = 2;
  expectInvalid(blockedPadding, "only on an unblocked dimension");
  Program blocks = meshProgram();
  blocks.buffers[0].sharding[0].blocks = 3;
  expectInvalid(blocks, "3 blocks do not divide dimension 0 of 'w'");
  Program temp = meshProgram();
  temp.buffers[4].globalShape = {6};
  temp.buffers[4].sharding = {ShardDim{{"tp"}, 1}};
  expectInvalid(temp, "is not a parameter or optimizer state");
  Program rank = meshProgram();
  rank.buffers[0].sharding.pop_back();
  expectInvalid(rank, "'w' has 2 dimensions but a global shape of 2 and 1 sharded dimensions");
  Program group = meshProgram();
  for (Step& s : group.functions[0].steps) std::get<CollectiveStep>(s).group = 4;
  expectInvalid(group, "4 ranks, but axes [tp] of the mesh [dp=2,tp=2] span 2");
  Program order = meshProgram();
  for (Step& s : order.functions[0].steps) {
    std::get<CollectiveStep>(s).axes = {"tp", "dp"};
    std::get<CollectiveStep>(s).group = 4;
  }
  expectInvalid(order, "'dp' is repeated or out of mesh order in [tp, dp]");
  Program noAxes = meshProgram();
  for (Step& s : noAxes.functions[0].steps) std::get<CollectiveStep>(s).axes = {};
  expectInvalid(noAxes, "a collective needs at least one axis");
  Program badMesh = meshProgram();
  badMesh.mesh.push_back({"dp", 1});
  expectInvalid(badMesh, "axis 'dp' is given twice");
  Program late = meshProgram();
  late.functions[0].steps.insert(late.functions[0].steps.begin() + 1, CopyStep{2, 3});
  expectInvalid(late, "the synchronous all-reduce of bucket 0 is not waited for in the next step");
  Program waitDiffers = meshProgram();
  std::get<CollectiveStep>(waitDiffers.functions[0].steps[1]).axes = {"dp"};
  expectInvalid(waitDiffers, "does not match its start");
}

/// The rows (or columns) of a dimension of global size `global` that the rank with part index
/// `part` of `parts` holds with `blocks` blocks: for each block, its part's contiguous run.
std::vector<int64_t> heldIndices(int64_t global, int64_t blocks, int64_t part, int64_t parts) {
  std::vector<int64_t> out;
  const int64_t block = global / blocks, run = block / parts;
  for (int64_t j = 0; j < blocks; ++j)
    for (int64_t k = 0; k < run; ++k) out.push_back(j * block + part * run + k);
  return out;
}

TEST(ShardedProgram, ShardIsTheGlobalInitialisationSliced) {
  // A fused [24, 5] weight whose rows are 3 blocks (q, k, v), each split over dp then tp of a
  // 2x2 mesh: every rank holds 2 rows of each block, 6 in all.
  const MeshLayout mesh({{"dp", 2}, {"tp", 2}});
  Buffer w = buffer("blocks.0.attn.qkv.weight", {6, 5}, BufferKind::Parameter);
  w.globalShape = {24, 5};
  w.sharding = {ShardDim{{"dp", "tp"}, 3}, ShardDim{}};
  const std::vector<float> global = tessel::initParameter(24 * 5, tessel::InitKind::Normal, 0.02, 7, w.name);
  std::multiset<int64_t> covered;
  for (int r = 0; r < 4; ++r) {
    const std::vector<int> at = mesh.coordinates(r);
    std::vector<float> shard(30);
    initParameterShard(w, &mesh, at, 7, shard.data());
    const std::vector<int64_t> rows = heldIndices(24, 3, at[0] * 2 + at[1], 4);
    ASSERT_EQ(rows.size(), 6u);
    for (size_t i = 0; i < rows.size(); ++i)
      for (int64_t c = 0; c < 5; ++c) {
        EXPECT_EQ(shard[i * 5 + static_cast<size_t>(c)], global[static_cast<size_t>(rows[i] * 5 + c)])
            << "rank " << r << " local row " << i << " column " << c;
        covered.insert(rows[i] * 5 + c);
      }
  }
  // The four shards tile the global tensor exactly once.
  EXPECT_EQ(covered.size(), 120u);
  EXPECT_EQ(std::set<int64_t>(covered.begin(), covered.end()).size(), 120u);

  // Both dimensions split (rows over tp, columns over dp): each rank's block of the matrix.
  Buffer v = buffer("v", {2, 3}, BufferKind::Parameter);
  v.globalShape = {4, 6};
  v.sharding = {ShardDim{{"tp"}, 1}, ShardDim{{"dp"}, 1}};
  const std::vector<float> whole = tessel::initParameter(24, tessel::InitKind::Normal, 0.02, 7, "v");
  for (int r = 0; r < 4; ++r) {
    const std::vector<int> at = mesh.coordinates(r);
    std::vector<float> shard(6);
    initParameterShard(v, &mesh, at, 7, shard.data());
    const std::vector<int64_t> rows = heldIndices(4, 1, at[1], 2), cols = heldIndices(6, 1, at[0], 2);
    for (size_t i = 0; i < 2; ++i)
      for (size_t c = 0; c < 3; ++c)
        EXPECT_EQ(shard[i * 3 + c], whole[static_cast<size_t>(rows[i] * 6 + cols[c])]) << "rank " << r;
  }
  // A sharded parameter without a mesh to place it is an error, not a wrong shard.
  std::vector<float> out(6);
  EXPECT_THROW(initParameterShard(v, nullptr, {}, 7, out.data()), std::runtime_error);
}

TEST(ShardedProgram, PaddedShardsTileTheTensorOnceAndStartTheirPaddingAtZero) {
  // 7 rows over tp = 4: 2 rows each, the global tensor padded to 8, so rank 3 holds row 6 and
  // one row of padding. "ones" shows that padding is zero whatever the parameter's init.
  const MeshLayout mesh({{"dp", 2}, {"tp", 4}});
  for (const std::string init : {"normal", "ones"}) {
    SCOPED_TRACE(init);
    Buffer w = buffer("mlp.fc.weight", {2, 3}, BufferKind::Parameter, 0, 0.02);
    w.init = init;
    w.globalShape = {7, 3};
    w.sharding = {ShardDim{{"tp"}, 1, 1}, ShardDim{}};
    const tessel::InitKind kind = init == "ones" ? tessel::InitKind::Ones : tessel::InitKind::Normal;
    const std::vector<float> global = tessel::initParameter(21, kind, 0.02, 7, w.name);
    std::multiset<int64_t> covered;
    for (int r = 0; r < 8; ++r) {
      const std::vector<int> at = mesh.coordinates(r);
      std::vector<float> shard(6);
      initParameterShard(w, &mesh, at, 7, shard.data());
      const std::vector<int64_t> index = globalIndices(w, mesh, at);
      for (size_t i = 0; i < 6; ++i) {
        const int64_t row = at[1] * 2 + static_cast<int64_t>(i / 3), col = static_cast<int64_t>(i % 3);
        if (row >= 7) {  // padding: no global element, zero
          EXPECT_EQ(index[i], -1) << "rank " << r << " local " << i;
          EXPECT_EQ(shard[i], 0.0f) << "rank " << r << " local " << i;
          continue;
        }
        EXPECT_EQ(index[i], row * 3 + col);
        EXPECT_EQ(shard[i], global[static_cast<size_t>(row * 3 + col)]);
        if (at[0] == 0) covered.insert(index[i]);
      }
      EXPECT_EQ(nonZeroPadding(w, mesh, at, shard.data()), -1);
      if (at[1] == 3) {  // the rank that holds padding: a non-zero there is found
        shard[4] = 1e-30f;
        EXPECT_EQ(nonZeroPadding(w, mesh, at, shard.data()), 4);
      }
    }
    EXPECT_EQ(covered.size(), 21u);
    EXPECT_EQ(std::set<int64_t>(covered.begin(), covered.end()).size(), 21u);
  }
}

TEST(ShardedProgram, ShardWithBlocksInTheLastDimensionAndPaddedRowsIsTheSlice) {
  // The shard is generated run by run along the last dimension; here that dimension has 3
  // blocks split over tp (runs of 2 of each block of 4) and the rows are padded (5 over dp = 2:
  // 3 each, one of padding). Every element equals the whole tensor's at globalIndices (checked
  // against the layout rule above), and padding is 0.
  const MeshLayout mesh({{"dp", 2}, {"tp", 2}});
  Buffer w = buffer("blocks.0.attn.qkv.weight", {3, 6}, BufferKind::Parameter);
  w.globalShape = {5, 12};
  w.sharding = {ShardDim{{"dp"}, 1, 1}, ShardDim{{"tp"}, 3}};
  const std::vector<float> whole = tessel::initParameter(60, tessel::InitKind::Normal, 0.02, 7, w.name);
  std::set<int64_t> covered;
  for (int r = 0; r < 4; ++r) {
    const std::vector<int> at = mesh.coordinates(r);
    std::vector<float> shard(18, -7.0f);
    initParameterShard(w, &mesh, at, 7, shard.data());
    const std::vector<int64_t> index = globalIndices(w, mesh, at);
    for (size_t i = 0; i < 18; ++i) {
      EXPECT_EQ(shard[i], index[i] < 0 ? 0.0f : whole[static_cast<size_t>(index[i])]) << "rank " << r << " local " << i;
      if (index[i] >= 0) covered.insert(index[i]);
    }
  }
  EXPECT_EQ(covered.size(), 60u);
}

TEST(ShardedProgram, ShardOfAHugeParameterIsGeneratedWithoutTheGlobalTensor) {
  // A [2^24, 1024] weight (2^34 elements, 64 GiB of f32) split by rows over tp = 2^20: the
  // last rank holds its last 16 rows. Building the global tensor first would need 64 GiB and
  // ~2^34 Box-Muller draws (minutes); generating the shard alone is 16K draws (microseconds).
  // The values are those of the elements' global indices (runtime/Init.h), and with the rows
  // padded (2^24 - 3 rows: 3 rows of padding on the last rank) the padding is zero.
  const MeshLayout mesh({{"dp", 1}, {"tp", 1 << 20}});
  const std::vector<int> lastRank = {0, (1 << 20) - 1};
  for (int64_t padding : {0, 3}) {
    SCOPED_TRACE(padding);
    Buffer w = buffer("huge.weight", {16, 1024}, BufferKind::Parameter, 0, 1.0);
    w.globalShape = {(int64_t{1} << 24) - padding, 1024};
    w.sharding = {ShardDim{{"tp"}, 1, padding}, ShardDim{}};
    std::vector<float> shard(16 * 1024, -7.0f);
    const auto start = std::chrono::steady_clock::now();
    initParameterShard(w, &mesh, lastRank, 7, shard.data());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // 10 s: the shard takes well under 0.1 s even on a loaded 2-core machine; the old
    // whole-tensor path takes minutes (or fails to allocate 64 GiB).
    EXPECT_LT(seconds, 10.0);
    const int64_t firstRow = (int64_t{1} << 24) - 16, realRows = 16 - padding;
    std::vector<float> expected(static_cast<size_t>(realRows * 1024));
    tessel::initParameterRange(expected.data(), firstRow * 1024, realRows * 1024, tessel::InitKind::Normal, 1.0, 7,
                               w.name);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), shard.begin()));
    for (size_t i = expected.size(); i < shard.size(); ++i) ASSERT_EQ(shard[i], 0.0f) << "padding at local " << i;
  }
}

TEST(ShardedProgram, ReplicasAreComparedWithinTheirGroupOnly) {
  const Program p = meshProgram();
  // Persistent buffers in order: w (split over tp: replicas across dp), w:exp_avg (the same),
  // b (replicated over dp and tp). Rank r = 2 dp + tp.
  auto hashes = [](uint64_t w0, uint64_t w1, std::vector<uint64_t> b) {
    std::vector<std::vector<uint64_t>> h(4);
    for (int r = 0; r < 4; ++r) {
      const uint64_t w = r % 2 == 0 ? w0 : w1;  // tp coordinate r % 2
      h[static_cast<size_t>(r)] = {w, w + 100, b[static_cast<size_t>(r)]};
    }
    return h;
  };
  // Shards differ across tp, as they must; nothing is reported.
  EXPECT_EQ(replicaMismatches(p, hashes(1, 2, {5, 5, 5, 5})), "");
  // Rank 3's w differs from its dp replica, rank 1.
  auto bad = hashes(1, 2, {5, 5, 5, 5});
  bad[3][0] = 9;
  EXPECT_EQ(replicaMismatches(p, bad),
            "'w' differs across its replica group over [dp] (ranks 1, 3): rank(s) 3 differ from rank 1");
  // b is compared over the whole mesh.
  EXPECT_EQ(replicaMismatches(p, hashes(1, 2, {5, 5, 6, 5})),
            "'b' differs across its replica group over [dp, tp] (ranks 0, 1, 2, 3): rank(s) 2 differ from rank 0");
  // A world that is not the mesh is refused.
  EXPECT_THROW(replicaMismatches(p, std::vector<std::vector<uint64_t>>(2, {1, 1, 1})), std::runtime_error);
  // Without a mesh, everything is compared over the world.
  Program flat = p;
  flat.mesh.clear();
  for (Buffer& b : flat.buffers) b.globalShape.clear(), b.sharding.clear();
  EXPECT_EQ(replicaMismatches(flat, {{1, 2, 3}, {1, 2, 4}}),
            "'b' differs across its replica group over the world: rank(s) 1 differ from rank 0");
}

TEST(ShardedProgram, OneRankExportWritesGlobalF32ParametersOnly) {
  Program p;
  p.buffers = {buffer("fc.weight", {3, 2}, BufferKind::Parameter), buffer("fc.weight:exp_avg", {3, 2}, BufferKind::State),
               buffer("fc.bias", {3}, BufferKind::Parameter)};
  p.buffers[2].init = "ones";
  p.functions = {Function{"noop", {}, {}, {}, {}, 0}};
  Executor ex(p, [](const std::string&) { return nullptr; });
  ex.initParameters(3);
  const std::string path = (fs::path(testing::TempDir()) / "tessel_export_one.safetensors").string();
  exportParameters(ex, nullptr, path);
  tessel::SafeTensorsFile file = tessel::readSafeTensors(path);
  ASSERT_EQ(file.tensors.size(), 2u);  // no optimizer state
  const tessel::StTensor& w = file.tensors.at("fc.weight");
  EXPECT_EQ(w.dtype, tessel::StDType::F32);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 2}));
  const std::vector<float> want = tessel::initParameter(6, tessel::InitKind::Normal, 0.02, 3, "fc.weight");
  std::vector<double> got = w.toF64();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], static_cast<double>(want[i]));
  EXPECT_EQ(file.tensors.at("fc.bias").toF64(), (std::vector<double>{1, 1, 1}));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

}  // namespace
