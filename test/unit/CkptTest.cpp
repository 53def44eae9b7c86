// Tests for runtime/ckpt/Index.h: index round trips, readRegion of sub-boxes against an
// independent slice (CkptTestUtil.h), reading only the CRC blocks a box needs, CRC mismatch
// detection per block, verifyCheckpoint, resolveCheckpoint and the CRC itself.
#include "runtime/ckpt/Checkpoint.h"
#include "test/unit/CkptTestUtil.h"

#include <chrono>

namespace tessel::ckpt {
namespace {

using namespace tessel::ckpt::testing;

TEST(CkptIndexTest, SerializeParseRoundTrip) {
  Index index;
  index.step = 42;
  index.optimizerState = false;
  index.trainer = {{"step", 42}, {"seed", 3}, {"plan", "dp=2"}};
  TensorEntry w;
  w.shape = {4, 3};
  w.shards.push_back({{0, 0}, {2, 3}, "rank_00000.safetensors", "w@0,0", 80, 104, 16, {1, 2}});
  w.shards.push_back({{2, 0}, {2, 3}, "rank_00001.safetensors", "w@2,0", 80, 104, 16, {0xFFFFFFFFu, 0}});
  index.tensors["w"] = w;
  TensorEntry s;
  s.kind = "optimizer_state";
  s.dtype = StDType::I64;
  s.shape = {};
  s.shards.push_back({{}, {}, "rank_00000.safetensors", "s", 104, 112, kDefaultBlockBytes, {7}});
  index.tensors["w:exp_avg"] = s;
  TensorEntry empty;
  empty.shape = {0, 5};
  index.tensors["empty"] = empty;
  const std::string text = serializeIndex(index);
  EXPECT_EQ(parseIndex(text, "mem"), index);
  EXPECT_EQ(serializeIndex(parseIndex(text, "mem")), text);  // deterministic
}

TEST(CkptIndexTest, Crc32MatchesTheStandardCheckValue) {
  // The CRC-32 (ISO-HDLC, as zlib/gzip/PNG) check value of "123456789" is 0xCBF43926.
  EXPECT_EQ(crc32Of("123456789", 9), 0xCBF43926u);
  const std::string text = "123456789123456789";
  const auto blocks = blockCrcs(text.data(), text.size(), 9);
  EXPECT_EQ(blocks, (std::vector<uint32_t>{0xCBF43926u, 0xCBF43926u}));
  EXPECT_EQ(blockCrcs(text.data(), 10, 9).size(), 2u);  // last block shorter
  EXPECT_TRUE(blockCrcs(text.data(), 0, 9).empty());
  EXPECT_THROW(blockCrcs(text.data(), 3, 0), CheckpointError);
}

TEST(CkptIndexTest, ElementCountChecksOverflowAndSign) {
  EXPECT_EQ(elementCount({}, "x"), 1);
  EXPECT_EQ(elementCount({3, 0, 5}, "x"), 0);
  EXPECT_NE(messageOf([] { elementCount({int64_t{1} << 32, int64_t{1} << 32}, "w"); }).find("overflows"),
            std::string::npos);
  EXPECT_NE(messageOf([] { elementCount({2, -1}, "w"); }).find("negative"), std::string::npos);
}

TEST(CkptReaderTest, EveryBoxEqualsAnIndependentSlice) {
  const TempDir dir("slices");
  const FullTensor w = makeTensor({7, 5, 6}, 0);
  const FullTensor v = makeTensor({13}, 1000);
  const FullTensor s = makeTensor({}, -5);
  // Blocks of 40 bytes (10 floats): boxes straddle block and shard edges in every dimension.
  const Index index = writeCheckpoint(dir.str(),
                                      {{"w", {w, gridBoxes(w.shape, {3, 2, 2}, 3)}},
                                       {"v", {v, gridBoxes(v.shape, {4}, 2)}},
                                       {"s", {s, gridBoxes(s.shape, {}, 1)}}},
                                      /*step=*/7, /*blockBytes=*/40);
  EXPECT_EQ(readIndex(dir.str()), index);
  std::mt19937 rng(13);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> off, len;
    for (int64_t d : w.shape) {
      const int64_t lo = std::uniform_int_distribution<int64_t>(0, d - 1)(rng);
      off.push_back(lo);
      len.push_back(std::uniform_int_distribution<int64_t>(1, d - lo)(rng));
    }
    std::vector<float> out(slice(w, off, len).size(), -1.f);
    ReadStats stats;
    readRegion(dir.str(), index, "w", off, len, out.data(), &stats);
    ASSERT_EQ(out, slice(w, off, len)) << "box at " << ::testing::PrintToString(off) << " of "
                                       << ::testing::PrintToString(len);
    EXPECT_EQ(stats.bytesNeeded, int64_t(out.size() * 4));
    EXPECT_GE(stats.bytesRead, stats.bytesNeeded);
  }
  std::vector<float> whole(w.values.size());
  readRegion(dir.str(), index, "w", {0, 0, 0}, w.shape, whole.data());
  EXPECT_EQ(whole, w.values);
  std::vector<float> part(6);
  readRegion(dir.str(), index, "v", {5}, {6}, part.data());
  EXPECT_EQ(part, slice(v, {5}, {6}));
  float scalar = 0;
  readRegion(dir.str(), index, "s", {}, {}, &scalar);
  EXPECT_EQ(scalar, s.values[0]);
  // A box outside the tensor, a wrong rank and an unknown tensor are refused by name.
  EXPECT_NE(messageOf([&] { readRegion(dir.str(), index, "v", {10}, {4}, part.data()); }).find("outside its shape"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { readRegion(dir.str(), index, "v", {0, 0}, {1, 1}, part.data()); }).find("rank"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { readRegion(dir.str(), index, "nope", {}, {}, part.data()); }).find("no tensor 'nope'"),
            std::string::npos);
}

TEST(CkptReaderTest, ReadsOnlyTheBlocksABoxNeeds) {
  const TempDir dir("partial");
  // 100000 floats in 4 shards of 25000 (100000 bytes each), CRC blocks of 1024 bytes.
  const FullTensor v = makeTensor({100000}, 0);
  const Index index = writeCheckpoint(dir.str(), {{"v", {v, gridBoxes(v.shape, {4}, 4)}}}, 1, 1024);
  std::vector<float> out(10);
  ReadStats stats;
  readRegion(dir.str(), index, "v", {60000}, {10}, out.data(), &stats);
  EXPECT_EQ(out, slice(v, {60000}, {10}));
  // 40 bytes need at most two 1024-byte blocks of one file.
  EXPECT_LE(stats.bytesRead, 2048);
  EXPECT_EQ(stats.files, 1);
  // A column of a 2-D tensor reads one block per row band, not the whole shard.
  const TempDir dir2("column");
  const FullTensor m = makeTensor({64, 1024}, 0);
  const Index index2 = writeCheckpoint(dir2.str(), {{"m", {m, gridBoxes(m.shape, {1, 1}, 1)}}}, 1, 4096);
  std::vector<float> column(64);
  ReadStats stats2;
  readRegion(dir2.str(), index2, "m", {0, 3}, {64, 1}, column.data(), &stats2);
  EXPECT_EQ(column, slice(m, {0, 3}, {64, 1}));
  EXPECT_EQ(stats2.bytesRead, 64 * 4096);  // each 4096-byte row is one block; all 64 rows touched
  std::vector<float> corner(4);
  ReadStats stats3;
  readRegion(dir2.str(), index2, "m", {10, 1000}, {2, 2}, corner.data(), &stats3);
  EXPECT_EQ(corner, slice(m, {10, 1000}, {2, 2}));
  EXPECT_EQ(stats3.bytesRead, 2 * 4096);
}

TEST(CkptReaderTest, CrcMismatchIsFoundInTheBlockItLiesIn) {
  const TempDir dir("crc");
  const FullTensor v = makeTensor({1000}, 0);
  const Index index = writeCheckpoint(dir.str(), {{"v", {v, gridBoxes(v.shape, {2}, 1)}}}, 3, 400);
  // Flip one bit of element 700 (in the second shard, its block 2 of 100-float blocks).
  const ShardEntry& shard = index.tensors.at("v").shards[1];
  const fs::path file = dir.path / shard.file;
  std::vector<uint8_t> bytes = readFileBytes(file);
  bytes[size_t(shard.begin + (700 - 500) * 4)] ^= 0x01;
  writeFileBytes(file, bytes);
  std::vector<float> out(1000);
  const std::string msg = messageOf([&] { readRegion(dir.str(), index, "v", {0}, {1000}, out.data()); });
  EXPECT_NE(msg.find("'" + file.string() + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CRC mismatch in block 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor 'v'"), std::string::npos) << msg;
  // Elements in other blocks still read: only the needed blocks are checked.
  readRegion(dir.str(), index, "v", {500}, {100}, out.data());
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 100), slice(v, {500}, {100}));
  EXPECT_NE(messageOf([&] { verifyCheckpoint(dir.str()); }).find("CRC mismatch"), std::string::npos);
}

TEST(CkptReaderTest, VerifyCountsWhatItChecked) {
  const TempDir dir("verify");
  const FullTensor w = makeTensor({9, 4}, 0);
  const FullTensor b = makeTensor({4}, 0);
  writeCheckpoint(dir.str(), {{"w", {w, gridBoxes(w.shape, {3, 1}, 2)}}, {"b", {b, gridBoxes(b.shape, {1}, 1)}}},
                  5, 16);
  const VerifyReport r = verifyCheckpoint(dir.str());
  EXPECT_EQ(r.tensors, 2);
  EXPECT_EQ(r.shards, 4);
  EXPECT_EQ(r.files, 2);
  EXPECT_EQ(r.bytes, (36 + 4) * 4);
}

TEST(CkptReaderTest, ResolveFollowsLatestAndNotesUncommittedSaves) {
  const TempDir root("resolve");
  const FullTensor b = makeTensor({4}, 0);
  for (const char* step : {"step_00000010", "step_00000020"}) {
    fs::create_directories(root.path / step);
    writeCheckpoint((root.path / step).string(), {{"b", {b, gridBoxes(b.shape, {1}, 1)}}});
  }
  fs::create_directories(root.path / "step_00000030.tmp");
  fs::create_directories(root.path / "step_00000005.tmp");
  std::ofstream(root.path / "latest") << "step_00000020\n";
  std::vector<std::string> notes;
  EXPECT_EQ(resolveCheckpoint(root.str(), &notes), root.str() + "/step_00000020");
  EXPECT_EQ(notes, std::vector<std::string>{"skipped '" + root.str() +
                                            "/step_00000030.tmp': a save that did not commit"});
  EXPECT_EQ(resolveCheckpoint(root.str() + "/step_00000010"), root.str() + "/step_00000010");
  EXPECT_EQ(resolveCheckpoint(root.str() + "//"), root.str() + "/step_00000020");
  // `latest` naming something outside the root, or malformed, is refused by name.
  for (const char* bad : {"../step_00000010\n", "/etc\n", "step_00000020", "step_00000099\n", ""}) {
    std::ofstream(root.path / "latest", std::ios::trunc) << bad;
    const std::string msg = messageOf([&] { resolveCheckpoint(root.str()); });
    EXPECT_NE(msg.find(root.str() + "/latest"), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_NE(messageOf([&] { resolveCheckpoint(root.str() + "/nothing"); }).find("no such folder"), std::string::npos);
}

TEST(CkptIndexTest, ExactCoverCheckScalesToThousandsOfShards) {
  // 8192 row shards and a 96 x 96 grid: the sweep compares neighbours only. The time bound is
  // loose (50x what it takes on one 2-core CI machine) and catches an O(n^2) check, which
  // takes minutes at this size.
  const auto start = std::chrono::steady_clock::now();
  for (const std::vector<int64_t>& parts : {std::vector<int64_t>{8192, 1}, std::vector<int64_t>{96, 96}}) {
    Index index;
    index.trainer = {{"step", 0}};
    TensorEntry& t = index.tensors["w"];
    t.shape = {8192 * 2, 96 * 2};
    int i = 0;
    for (const BoxSpec& b : gridBoxes(t.shape, parts, 1)) {
      const int64_t bytes = b.lengths[0] * b.lengths[1] * 4;
      t.shards.push_back({b.offsets, b.lengths, "f", "k" + std::to_string(i++), 0, bytes, 1 << 20, {0}});
    }
    EXPECT_EQ(parseIndex(serializeIndex(index), "mem").tensors.at("w").shards.size(), t.shards.size());
    // The same with the last shard moved onto its neighbour: an overlap.
    t.shards.back().offsets = t.shards[t.shards.size() - 2].offsets;
    EXPECT_NE(messageOf([&] { parseIndex(serializeIndex(index), "mem"); }).find("overlap"), std::string::npos);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(CkptIndexTest, ContrivedInterleavedShardsAreRefusedNotCheckedForever) {
  // A 14-dimensional tensor of 2^14 unit boxes (every dimension cut in two): a valid exact
  // cover, but every axis has only two distinct offsets, so the sweep compares ~2^26 pairs.
  // The check gives up at its cap with a message instead of running for many seconds.
  Index index;
  index.trainer = {{"step", 0}};
  TensorEntry& t = index.tensors["w"];
  t.shape.assign(14, 2);
  for (int i = 0; i < (1 << 14); ++i) {
    ShardEntry s{{}, std::vector<int64_t>(14, 1), "f", "k" + std::to_string(i), 0, 4, 16, {0}};
    for (int d = 0; d < 14; ++d) s.offsets.push_back((i >> d) & 1);
    t.shards.push_back(s);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = messageOf([&] { parseIndex(serializeIndex(index), "mem"); });
  EXPECT_NE(msg.find("interleave too much to check for overlaps"), std::string::npos) << msg;
  // Loose bound (the cap's 2^25 comparisons take ~0.3 s on one CI core): catches a missing cap.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace tessel::ckpt
