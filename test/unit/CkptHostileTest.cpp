// The hostile-file corpus: each case corrupts one thing of a valid checkpoint (its index.json
// or a shard file) and the reading path (readIndex, verifyCheckpoint, readRegion of every
// tensor) must throw CheckpointError whose one-line message names the corrupted file and the
// cause. No case may be accepted, crash, or throw anything else.
#include "test/unit/CkptTestUtil.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <functional>
#include <limits>

namespace tessel::ckpt {
namespace {

using namespace tessel::ckpt::testing;
using nlohmann::json;

constexpr const char* kIndex = "index.json";
constexpr const char* kRank0 = "rank_00000.safetensors";
constexpr const char* kRank1 = "rank_00001.safetensors";

/// The valid baseline: "w" [6, 4] in two row shards (one per file), "b" [4] whole in rank 0's
/// file; CRC blocks of 16 bytes, so each shard of "w" (48 bytes) has three.
void writeBaseline(const fs::path& dir) {
  const FullTensor w = makeTensor({6, 4}, 0);
  const FullTensor b = makeTensor({4}, 100);
  writeCheckpoint(dir.string(), {{"w", {w, gridBoxes(w.shape, {2, 1}, 2)}}, {"b", {b, gridBoxes(b.shape, {1}, 1)}}},
                  7, 16);
}

/// Runs everything a loader and `tessel ckpt verify` do; returns the CheckpointError's message.
std::string readEverything(const fs::path& dir) {
  try {
    const Index index = readIndex(dir.string());
    verifyCheckpoint(dir.string());
    for (const auto& [name, t] : index.tensors) {
      std::vector<uint8_t> out(size_t(elementCount(t.shape, name)) * dtypeSize(t.dtype));
      readRegion(dir.string(), index, name, std::vector<int64_t>(t.shape.size(), 0), t.shape, out.data());
    }
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

using Mutation = std::function<void(const fs::path& dir)>;

/// Edits index.json as JSON.
Mutation onIndex(std::function<void(json&)> edit) {
  return [edit](const fs::path& dir) {
    json j = json::parse(readFileBytes(dir / kIndex));
    edit(j);
    const std::string text = j.dump();
    writeFileBytes(dir / kIndex, {text.begin(), text.end()});
  };
}

/// Replaces `from` by `to` in the compact text of index.json (for what JSON values cannot say).
Mutation onIndexText(std::string from, std::string to) {
  return [from, to](const fs::path& dir) {
    std::string text = json::parse(readFileBytes(dir / kIndex)).dump();
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    writeFileBytes(dir / kIndex, {text.begin(), text.end()});
  };
}

Mutation replaceIndexText(std::string text) {
  return [text](const fs::path& dir) { writeFileBytes(dir / kIndex, {text.begin(), text.end()}); };
}

/// Edits the bytes of one file.
Mutation onBytes(const char* file, std::function<void(std::vector<uint8_t>&)> edit) {
  return [file, edit](const fs::path& dir) {
    std::vector<uint8_t> bytes = readFileBytes(dir / file);
    edit(bytes);
    writeFileBytes(dir / file, bytes);
  };
}

/// Rewrites rank 0's file as a valid safetensors file with `edit` applied to its content.
Mutation onRank0Content(std::function<void(SafeTensorsFile&)> edit) {
  return [edit](const fs::path& dir) {
    SafeTensorsFile f = readSafeTensors((dir / kRank0).string());
    edit(f);
    writeSafeTensors((dir / kRank0).string(), f);
  };
}

void makeFifo(const fs::path& path) { ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path; }

/// Replaces `file` by a FIFO: an open for reading without O_NONBLOCK would wait forever.
Mutation replaceByFifo(const char* file) {
  return [file](const fs::path& dir) {
    fs::remove(dir / file);
    makeFifo(dir / file);
  };
}

/// Replaces `file` by a symbolic link to a new "<file>.target" that `make` creates.
Mutation replaceByLinkTo(const char* file, std::function<void(const fs::path&)> make) {
  return [file, make](const fs::path& dir) {
    fs::remove(dir / file);
    make(dir / (std::string(file) + ".target"));
    fs::create_symlink(dir / (std::string(file) + ".target"), dir / file);
  };
}

/// Replaces `file` by a symbolic link to a link that points back to it.
Mutation replaceByLinkLoop(const char* file) {
  return [file](const fs::path& dir) {
    fs::remove(dir / file);
    fs::create_symlink(dir / (std::string(file) + ".loop"), dir / file);
    fs::create_symlink(dir / file, dir / (std::string(file) + ".loop"));
  };
}

void setLength(std::vector<uint8_t>& bytes, uint64_t n) {
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = uint8_t(n >> (8 * i));
}

json& shard(json& j, const char* tensor, int i) { return j["tensors"][tensor]["shards"][i]; }

struct HostileCase {
  std::string name;
  Mutation mutate;
  std::string file;                 // the file the message must name
  std::vector<std::string> causes;  // substrings of the cause
};

std::vector<HostileCase> hostileCases() {
  return {
      // index.json: syntax and top level
      {"NotJson", replaceIndexText("{\"format\": "), kIndex, {"not valid JSON"}},
      {"EmptyIndex", replaceIndexText(""), kIndex, {"not valid JSON"}},
      {"NotAnObject", replaceIndexText("[1, 2, 3]"), kIndex, {"must be a JSON object, not array"}},
      {"WrongFormat", onIndex([](json& j) { j["format"] = "pickle"; }), kIndex, {"\"format\" is 'pickle'"}},
      {"WrongVersion", onIndex([](json& j) { j["version"] = 2; }), kIndex, {"\"version\" is 2"}},
      {"VersionAsString", onIndex([](json& j) { j["version"] = "1"; }), kIndex, {"must be an integer, not string"}},
      {"DuplicateKey", onIndexText("\"step\":7", "\"step\":7,\"step\":8"), kIndex, {"key 'step' appears twice"}},
      {"DuplicateTensor", onIndexText("\"tensors\":{", "\"tensors\":{\"b\":{},"), kIndex, {"key 'b' appears twice"}},
      {"UnknownField", onIndex([](json& j) { j["exec"] = "rm -rf /"; }), kIndex, {"unknown field 'exec'"}},
      {"NegativeStep", onIndex([](json& j) { j["step"] = -1; }), kIndex, {"\"step\" is -1, below"}},
      {"FloatStep", onIndexText("\"step\":7", "\"step\":7.0"), kIndex, {"\"step\" must be an integer, not 7.0"}},
      {"NaNToken", onIndexText("\"step\":7", "\"step\":NaN"), kIndex, {"not valid JSON"}},
      {"InfinityToken", onIndexText("\"step\":7", "\"step\":-Infinity"), kIndex, {"not valid JSON"}},
      {"BeyondUint64", onIndexText("\"step\":7", "\"step\":123456789012345678901234567890"), kIndex,
       {"\"step\" must be an integer"}},
      {"BeyondInt64", onIndexText("\"step\":7", "\"step\":18446744073709551615"), kIndex, {"beyond int64"}},
      {"OptimizerStateNotBool", onIndex([](json& j) { j["optimizer_state"] = "yes"; }), kIndex, {"true or false"}},
      {"TensorsNotObject", onIndex([](json& j) { j["tensors"] = json::array(); }), kIndex,
       {"\"tensors\" must be an object"}},
      // tensors
      {"UnknownKind", onIndex([](json& j) { j["tensors"]["w"]["kind"] = "buffer"; }), kIndex,
       {"tensor 'w'", "\"kind\" is 'buffer'"}},
      {"UnknownDType", onIndex([](json& j) { j["tensors"]["w"]["dtype"] = "F8_E5M2"; }), kIndex,
       {"tensor 'w'", "unknown \"dtype\" 'F8_E5M2'"}},
      {"DTypeSizeMismatch", onIndex([](json& j) { j["tensors"]["w"]["dtype"] = "F64"; }), kIndex,
       {"tensor 'w': shard 0", "holds 48 bytes but 12 elements of F64 need 96"}},
      {"ExponentInShape", onIndexText("\"shape\":[6,4]", "\"shape\":[6e0,4]"), kIndex,
       {"tensor 'w'", "\"shape[0]\" must be an integer, not 6.0"}},
      {"NegativeShape", onIndex([](json& j) { j["tensors"]["w"]["shape"] = {-6, 4}; }), kIndex,
       {"tensor 'w'", "\"shape[0]\" is -6"}},
      {"ShapeOverflow",
       onIndex([](json& j) { j["tensors"]["w"]["shape"] = {int64_t{1} << 32, int64_t{1} << 32, 4}; }), kIndex,
       {"tensor 'w'", "overflows int64"}},
      // shards
      {"ShardOutsideTensor", onIndex([](json& j) { shard(j, "w", 1)["offsets"] = {5, 0}; }), kIndex,
       {"tensor 'w': shard 1", "outside the tensor's shape [6, 4] in dimension 0"}},
      {"OverlappingShards", onIndex([](json& j) { shard(j, "w", 1)["offsets"] = {2, 0}; }), kIndex,
       {"tensor 'w'", "overlap"}},
      {"GapBetweenShards", onIndex([](json& j) { j["tensors"]["w"]["shards"].erase(1); }), kIndex,
       {"tensor 'w'", "shards cover 12 of the tensor's 24 elements"}},
      {"OffsetsWrongRank", onIndex([](json& j) { shard(j, "w", 0)["offsets"] = {0}; }), kIndex,
       {"tensor 'w': shard 0", "\"offsets\" has 1 entries, expected 2"}},
      {"NegativeOffset", onIndex([](json& j) { shard(j, "w", 0)["offsets"] = {-3, 0}; }), kIndex,
       {"\"offsets[0]\" is -3, below"}},
      {"ZeroLength", onIndex([](json& j) { shard(j, "w", 0)["lengths"] = {0, 4}; }), kIndex,
       {"\"lengths[0]\" is 0, below the least allowed 1"}},
      {"DotDotPath", onIndex([](json& j) { shard(j, "w", 1)["file"] = "../rank_00001.safetensors"; }), kIndex,
       {"tensor 'w': shard 1", "'../rank_00001.safetensors' is not a plain file name", "starts with '.'"}},
      {"AbsolutePath", onIndex([](json& j) { shard(j, "w", 1)["file"] = "/etc/passwd"; }), kIndex,
       {"'/etc/passwd' is not a plain file name", "path separator"}},
      {"SubfolderPath", onIndex([](json& j) { shard(j, "w", 1)["file"] = "a/b"; }), kIndex, {"path separator"}},
      {"BackslashPath", onIndex([](json& j) { shard(j, "w", 1)["file"] = "a\\b"; }), kIndex,
       {"'a\\x5cb'", "path separator"}},
      {"NulInFileName", onIndex([](json& j) { shard(j, "w", 1)["file"] = std::string("rank\0.st", 8); }), kIndex,
       {"'rank\\x00.st'", "NUL byte"}},
      {"NewlineInFileName", onIndex([](json& j) { shard(j, "w", 1)["file"] = "rank\n.st"; }), kIndex,
       {"control character"}},
      {"EmptyFileName", onIndex([](json& j) { shard(j, "w", 1)["file"] = ""; }), kIndex, {"empty"}},
      {"NulInKey", onIndex([](json& j) { shard(j, "w", 1)["key"] = std::string("w\0", 2); }), kIndex,
       {"\"key\" 'w\\x00' is not a tensor name"}},
      {"ReversedByteRange",
       onIndex([](json& j) {
         json& r = shard(j, "w", 0)["byte_range"];
         r = {r[1], r[0]};
       }),
       kIndex, {"ends before it begins"}},
      {"ByteRangeTooLong", onIndex([](json& j) { shard(j, "w", 0)["byte_range"][1] = 1 << 30; }), kIndex,
       {"tensor 'w': shard 0", "\"byte_range\"", "but 12 elements of F32 need 48"}},
      {"BlockBytesZero", onIndex([](json& j) { shard(j, "w", 0)["block_bytes"] = 0; }), kIndex,
       {"\"block_bytes\" is 0, below the least allowed 1"}},
      {"CrcCountWrong", onIndex([](json& j) { shard(j, "w", 0)["crc32"].push_back(1); }), kIndex,
       {"\"crc32\" has 4 entries but 48 bytes in blocks of 16 make 3 blocks"}},
      {"CrcBeyond32Bits", onIndex([](json& j) { shard(j, "w", 0)["crc32"][0] = int64_t{1} << 32; }), kIndex,
       {"\"crc32[0]\" is 4294967296, beyond 32 bits"}},
      {"CrcNegative", onIndex([](json& j) { shard(j, "w", 0)["crc32"][2] = -1; }), kIndex,
       {"\"crc32[2]\" is -1, below"}},
      {"FileKeyUsedTwice", onIndex([](json& j) { shard(j, "b", 0)["key"] = "w@0,0"; }), kIndex,
       {"key 'w@0,0' is used by another shard"}},
      // trainer
      {"TrainerStepDiffers", onIndex([](json& j) { j["trainer"]["step"] = 8; }), kIndex,
       {"trainer \"step\" 8 differs from the index's \"step\" 7"}},
      {"TrainerMissing", onIndex([](json& j) { j.erase("trainer"); }), kIndex, {"missing field \"trainer\""}},
      {"DeeplyNested",
       onIndexText("\"trainer\":{", "\"trainer\":{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + ","),
       kIndex, {"JSON nested deeper than 64 levels"}},
      {"TrainerNotObject", onIndex([](json& j) { j["trainer"] = {1, 2}; }), kIndex,
       {"\"trainer\" must be an object, not array"}},
      // the index file itself
      {"MissingIndex", [](const fs::path& dir) { fs::remove(dir / kIndex); }, kIndex, {"cannot open"}},
      {"IndexIsAFolder",
       [](const fs::path& dir) {
         fs::remove(dir / kIndex);
         fs::create_directory(dir / kIndex);
       },
       kIndex, {"not a regular file"}},
      {"IndexIsAFifo", replaceByFifo(kIndex), kIndex, {"is a FIFO, not a regular file"}},
      {"IndexIsALinkToAFifo", replaceByLinkTo(kIndex, makeFifo), kIndex, {"is a FIFO, not a regular file"}},
      {"IndexIsALinkLoop", replaceByLinkLoop(kIndex), kIndex, {"symbolic link loop"}},
      {"HugeNumberEchoedInPart", onIndexText("\"step\":7", "\"step\":" + std::string(5000, '7')), kIndex,
       {"not valid JSON", std::string(64, '7') + "..."}},
      {"BoxEndBeyondInt64",
       onIndex([](json& j) { shard(j, "w", 0)["offsets"][0] = std::numeric_limits<int64_t>::max(); }), kIndex,
       {"box [9223372036854775807:9223372036854775807+3, 0:4] lies outside"}},
      {"HugeTensorNameEchoedInPart",
       onIndexText("\"tensors\":{", "\"tensors\":{\"" + std::string(5000, 'n') + "\":{},"), kIndex,
       {std::string(128, 'n') + "...'"}},
      {"OversizedIndex", [](const fs::path& dir) { fs::resize_file(dir / kIndex, kMaxIndexBytes + 1); }, kIndex,
       {"more than the 268435456-byte limit"}},
      // shard files
      {"MissingShardFile", [](const fs::path& dir) { fs::remove(dir / kRank1); }, kRank1,
       {"tensor 'w'", "cannot open: No such file or directory"}},
      {"ShardIsAFolder",
       [](const fs::path& dir) {
         fs::remove(dir / kRank1);
         fs::create_directory(dir / kRank1);
       },
       kRank1, {"not a regular file"}},
      {"ShardIsAFifo", replaceByFifo(kRank1), kRank1, {"tensor 'w'", "is a FIFO, not a regular file"}},
      {"ShardIsALinkToAFifo", replaceByLinkTo(kRank1, makeFifo), kRank1, {"tensor 'w'", "is a FIFO"}},
      {"ShardIsALinkToAFolder", replaceByLinkTo(kRank1, [](const fs::path& p) { fs::create_directory(p); }), kRank1,
       {"tensor 'w'", "is a folder"}},
      {"ShardIsALinkLoop", replaceByLinkLoop(kRank1), kRank1, {"tensor 'w'", "symbolic link loop"}},
      {"EmptyShardFile", onBytes(kRank1, [](auto& b) { b.clear(); }), kRank1, {"shorter than the 8-byte"}},
      {"ShortShardFile", onBytes(kRank1, [](auto& b) { b.resize(b.size() - 4); }), kRank1,
       {"tensor 'w'", "safetensors header", "past the data area"}},
      {"TrailingBytes", onBytes(kRank1, [](auto& b) { b.push_back(0); }), kRank1, {"tensors cover 48 bytes"}},
      {"HeaderLengthBeyondFile", onBytes(kRank1, [](auto& b) { setLength(b, b.size()); }), kRank1,
       {"runs past the end of the file"}},
      {"HugeHeaderLength", onBytes(kRank1, [](auto& b) { setLength(b, uint64_t{1} << 62); }), kRank1,
       {"exceeds the 100000000-byte limit"}},
      {"HeaderNotJson", onBytes(kRank1, [](auto& b) { b[8] = 'x'; }), kRank1, {"header is not valid JSON"}},
      {"WrongCrc", onBytes(kRank1, [](auto& b) { b[b.size() - 1] ^= 0x80; }), kRank1,
       {"tensor 'w'", "CRC mismatch in block 2"}},
      {"HeaderDTypeDisagrees", onRank0Content([](SafeTensorsFile& f) { f.tensors.at("b").dtype = StDType::I32; }),
       kRank0, {"tensor 'b'", "key 'b' is I32 in the file but F32 in the index"}},
      {"HeaderShapeDisagrees", onRank0Content([](SafeTensorsFile& f) { f.tensors.at("b").shape = {2, 2}; }), kRank0,
       {"tensor 'b'", "key 'b' has shape [2, 2] in the file but the index's shard is [4]"}},
      {"HeaderKeyMissing",
       onRank0Content([](SafeTensorsFile& f) {
         f.tensors["b2"] = f.tensors.at("b");
         f.tensors.erase("b");
       }),
       kRank0, {"tensor 'b'", "key 'b' is not in the file's header"}},
      {"HeaderOffsetsDisagree",
       onRank0Content([](SafeTensorsFile& f) { f.tensors["a"] = StTensor::fromF32({1}, {0.f}); }), kRank0,
       {"tensor 'b'", "key 'b' lies at bytes", "but the index says"}},
  };
}

class CkptHostileTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(CkptHostileTest, GivesAClearErrorNamingTheFile) {
  const TempDir dir("hostile");
  writeBaseline(dir.path);
  GetParam().mutate(dir.path);
  const std::string msg = readEverything(dir.path);
  ASSERT_FALSE(msg.empty()) << "hostile checkpoint accepted";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  // Bounded: the path twice, a cause, and what the file says cut to 64 or 128 characters.
  EXPECT_LT(msg.size(), 2 * dir.path.string().size() + 700) << "too long (" << msg.size() << "): " << msg;
  EXPECT_NE(msg.find("'" + (dir.path / GetParam().file).string() + "'"), std::string::npos)
      << "'" << msg << "' does not name " << GetParam().file;
  for (const std::string& cause : GetParam().causes)
    EXPECT_NE(msg.find(cause), std::string::npos) << "'" << msg << "' lacks '" << cause << "'";
}

INSTANTIATE_TEST_SUITE_P(Corpus, CkptHostileTest, ::testing::ValuesIn(hostileCases()),
                         [](const auto& info) { return info.param.name; });

TEST(CkptHostileBaselineTest, TheUncorruptedBaselineReads) {
  // Guards the corpus: each case must fail for its own mutation, not a broken baseline.
  const TempDir dir("baseline");
  writeBaseline(dir.path);
  EXPECT_EQ(readEverything(dir.path), "");
  EXPECT_GE(hostileCases().size(), 25u);
}

}  // namespace
}  // namespace tessel::ckpt
