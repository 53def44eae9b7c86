// Tests for runtime/io/SafeTensors: round trips of every dtype, the byte layout required by
// the format spec, a family of corrupt files that must each be rejected with a message naming
// the file (and tensor), and atomic writes that leave no temporary file behind on failure.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>

#include "runtime/io/SafeTensors.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

/// A fresh directory under testing::TempDir() for one test, removed when it goes out of scope
/// (also when an ASSERT ends the test early).
struct ScratchDir {
  explicit ScratchDir(const std::string& tag) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        std::string("tessel_st_") + std::to_string(::getpid()) + "_" + tag + "_" + info->name();
    for (char& c : name)
      if (c == '/') c = '_';  // parameterised test names contain '/'
    path = fs::path(::testing::TempDir()) / name;
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  fs::path path;
};

std::vector<uint8_t> readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

/// A raw file: 8-byte little-endian `length` (the header's size unless given), header, data.
std::vector<uint8_t> rawFile(const std::string& header, const std::vector<uint8_t>& data,
                             std::optional<uint64_t> length = std::nullopt) {
  std::vector<uint8_t> out(8);
  const uint64_t n = length.value_or(header.size());
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <typename T>
StTensor rawTensor(StDType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  StTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * sizeof(T));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

void expectSameFile(const SafeTensorsFile& a, const SafeTensorsFile& b) {
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    auto it = b.tensors.find(name);
    ASSERT_NE(it, b.tensors.end()) << name;
    EXPECT_EQ(t.dtype, it->second.dtype) << name;
    EXPECT_EQ(t.shape, it->second.shape) << name;
    EXPECT_EQ(t.bytes, it->second.bytes) << name;
  }
}

TEST(SafeTensorsTest, DTypeSizesAndNames) {
  EXPECT_EQ(dtypeSize(StDType::F32), 4u);
  EXPECT_EQ(dtypeSize(StDType::F64), 8u);
  EXPECT_EQ(dtypeSize(StDType::BF16), 2u);
  EXPECT_EQ(dtypeSize(StDType::I32), 4u);
  EXPECT_EQ(dtypeSize(StDType::I64), 8u);
  EXPECT_STREQ(dtypeName(StDType::BF16), "BF16");
  EXPECT_STREQ(dtypeName(StDType::I64), "I64");
}

TEST(SafeTensorsTest, RoundTripsEveryDTypeAndMetadata) {
  const ScratchDir scratch("rt");
  const fs::path& dir = scratch.path;
  SafeTensorsFile file;
  file.metadata = {{"format", "pt"}, {"step", "10"}, {"note", "quote \" and ünïcode"}};
  file.tensors["f32"] = StTensor::fromF32({2, 3}, {1.5f, -2.f, 3.25f, 0.f, -0.f, 1e-30f});
  file.tensors["f64"] = StTensor::fromF64({3}, {std::numbers::pi, -1e300, 5e-324});
  file.tensors["i32"] = StTensor::fromI32(
      {2, 2}, {0, -1, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()});
  file.tensors["i64"] = rawTensor<int64_t>(StDType::I64, {2}, {int64_t{1} << 40, -7});
  file.tensors["bf16"] = rawTensor<uint16_t>(StDType::BF16, {1, 3}, {0x3F80, 0xC020, 0x7F80});
  file.tensors["scalar"] = StTensor::fromF32({}, {42.f});
  file.tensors["empty"] = StTensor::fromF32({0, 4}, {});
  file.tensors["empty.too"] = StTensor::fromI32({5, 0}, {});
  const std::string path = (dir / "all.safetensors").string();
  writeSafeTensors(path, file);
  const SafeTensorsFile back = readSafeTensors(path);
  expectSameFile(file, back);
  EXPECT_EQ(back.tensors.at("scalar").numel(), 1);
  EXPECT_EQ(back.tensors.at("empty").numel(), 0);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(SafeTensorsTest, ToF64ConvertsEachDType) {
  EXPECT_EQ(StTensor::fromF32({2}, {0.1f, -3.f}).toF64(),
            (std::vector<double>{double(0.1f), -3.0}));
  EXPECT_EQ(StTensor::fromF64({1}, {0.1}).toF64(), std::vector<double>{0.1});
  EXPECT_EQ(StTensor::fromI32({2}, {-5, 7}).toF64(), (std::vector<double>{-5.0, 7.0}));
  EXPECT_EQ(rawTensor<int64_t>(StDType::I64, {2}, {(int64_t{1} << 40) + 1, -9}).toF64(),
            (std::vector<double>{1099511627777.0, -9.0}));
  // BF16 is the top half of an f32: 0x3F80 = 1.0, 0xC020 = -2.5, 0x7F80 = +inf,
  // 0x0001 = smallest f32 subnormal bit pattern shifted up = 2^-133.
  const auto bf = rawTensor<uint16_t>(StDType::BF16, {4}, {0x3F80, 0xC020, 0x7F80, 0x0001}).toF64();
  ASSERT_EQ(bf.size(), 4u);
  EXPECT_EQ(bf[0], 1.0);
  EXPECT_EQ(bf[1], -2.5);
  EXPECT_TRUE(std::isinf(bf[2]) && bf[2] > 0);
  EXPECT_EQ(bf[3], std::ldexp(1.0, -133));
  // A tensor whose bytes disagree with its shape is refused rather than read short.
  StTensor bad = StTensor::fromF32({2}, {1.f, 2.f});
  bad.shape = {3};
  EXPECT_THROW(bad.toF64(), SafeTensorsError);
}

TEST(SafeTensorsTest, FactoriesCheckTheValueCount) {
  EXPECT_THROW(StTensor::fromF32({2, 2}, {1.f, 2.f, 3.f}), SafeTensorsError);
  EXPECT_THROW(StTensor::fromI32({-1}, {}), SafeTensorsError);
  EXPECT_EQ(StTensor::fromF64({2, 1}, {1.0, 2.0}).bytes.size(), 16u);
}

TEST(SafeTensorsTest, HeaderLayoutFollowsTheSpec) {
  // Spec: u64 little-endian N, then N bytes of JSON, then the data area; offsets are relative
  // to the data area. We also promise: tensors in name order, JSON padded with spaces so the
  // data area starts at a multiple of 8.
  const ScratchDir scratch("layout");
  const fs::path& dir = scratch.path;
  SafeTensorsFile file;
  file.metadata["format"] = "pt";
  file.tensors["b"] = StTensor::fromF32({2}, {1.f, 2.f});
  file.tensors["a"] = StTensor::fromI32({3}, {1, 2, 3});
  const fs::path path = dir / "layout.safetensors";
  writeSafeTensors(path.string(), file);
  const auto bytes = readBytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[size_t(i)]) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + n + 12 + 8);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + long(n));
  const std::string json = R"({"__metadata__":{"format":"pt"},)"
                           R"("a":{"dtype":"I32","shape":[3],"data_offsets":[0,12]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";
  EXPECT_EQ(header.substr(0, json.size()), json);
  EXPECT_EQ(header.substr(json.size()), std::string(n - json.size(), ' '));
  EXPECT_LT(n - json.size(), 8u);
  // An independent JSON parse agrees with the offsets, and the data area holds a then b.
  const auto parsed = nlohmann::json::parse(header);
  EXPECT_EQ(parsed["b"]["data_offsets"][0].get<int>(), 12);
  const uint8_t* data = bytes.data() + 8 + n;
  int32_t ints[3];
  float floats[2];
  std::memcpy(ints, data, 12);
  std::memcpy(floats, data + 12, 8);
  EXPECT_EQ(ints[0], 1);
  EXPECT_EQ(ints[2], 3);
  EXPECT_EQ(floats[0], 1.f);
  EXPECT_EQ(floats[1], 2.f);
}

TEST(SafeTensorsTest, ReadsUnpaddedHeadersFromOtherWriters) {
  // Padding is a writer convention; a valid file with an odd header length must still load.
  const ScratchDir scratch("unpadded");
  const fs::path& dir = scratch.path;
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  ASSERT_NE(header.size() % 8, 0u);
  const float one = 1.f;
  std::vector<uint8_t> data(4);
  std::memcpy(data.data(), &one, 4);
  writeBytes(dir / "x.safetensors", rawFile(header, data));
  const auto file = readSafeTensors((dir / "x.safetensors").string());
  EXPECT_EQ(file.tensors.at("w").toF64(), std::vector<double>{1.0});
  EXPECT_TRUE(file.metadata.empty());
}

// ---- corrupt files: each must throw SafeTensorsError naming the file and the cause ----

struct CorruptCase {
  std::string name;
  std::vector<uint8_t> bytes;
  std::vector<std::string> expected;  // substrings of what()
};
/// Lets gtest print a failing case by its name instead of its raw bytes.
void PrintTo(const CorruptCase& c, std::ostream* os) { *os << c.name; }

std::vector<uint8_t> zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

/// A one-tensor header with the given entry for "w".
std::string entryW(const std::string& body) { return R"({"w":)" + body + "}"; }
const std::string kGoodW = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

std::vector<CorruptCase> corruptCases() {
  const auto good = rawFile(entryW(kGoodW), zeros(8));
  auto truncated = good;
  truncated.resize(good.size() - 3);
  auto trailing = good;
  trailing.insert(trailing.end(), 4, 0);
  const std::string two = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)";
  return {
      {"Empty", {}, {"shorter than the 8-byte header length"}},
      {"ShorterThan8Bytes", zeros(5), {"file is 5 bytes"}},
      {"HeaderLengthPastEof", rawFile(entryW(kGoodW), zeros(8), 1000), {"runs past the end"}},
      {"HeaderLengthAbsurd", rawFile(entryW(kGoodW), zeros(8), uint64_t{1} << 63), {"exceeds"}},
      {"TruncatedData", truncated, {"tensor 'w'", "past the data area of 5 bytes"}},
      {"TrailingBytes", trailing, {"cover 8 bytes but the data area has 12"}},
      {"NotJson", rawFile("this is not json", zeros(8)), {"not valid JSON"}},
      {"JsonArray", rawFile("[1,2,3]", {}), {"not a JSON object"}},
      {"EntryNotObject", rawFile(entryW("[1]"), zeros(8)), {"tensor 'w'", "not a JSON object"}},
      {"MissingDType",
       rawFile(entryW(R"({"shape":[2],"data_offsets":[0,8]})"), zeros(8)),
       {"tensor 'w'", "dtype"}},
      {"UnknownDType",
       rawFile(entryW(R"({"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]})"), zeros(2)),
       {"tensor 'w'", "unsupported dtype 'F8_E4M3'"}},
      {"NonStringDType",
       rawFile(entryW(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"), zeros(8)),
       {"tensor 'w'", "dtype"}},
      {"MissingShape",
       rawFile(entryW(R"({"dtype":"F32","data_offsets":[0,8]})"), zeros(8)),
       {"tensor 'w'", "shape"}},
      {"NegativeDim",
       rawFile(entryW(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), zeros(8)),
       {"tensor 'w'", "non-negative integer"}},
      {"FractionalDim",
       rawFile(entryW(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"), zeros(8)),
       {"tensor 'w'", "non-negative integer"}},
      {"HugeShape",
       rawFile(entryW(R"({"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]})"),
               zeros(8)),
       {"tensor 'w'", "too large"}},
      {"MissingOffsets",
       rawFile(entryW(R"({"dtype":"F32","shape":[2]})"), zeros(8)),
       {"tensor 'w'", "data_offsets"}},
      {"OneOffset",
       rawFile(entryW(R"({"dtype":"F32","shape":[2],"data_offsets":[8]})"), zeros(8)),
       {"tensor 'w'", "data_offsets"}},
      {"NegativeOffset",
       rawFile(entryW(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), zeros(8)),
       {"tensor 'w'", "data_offsets"}},
      {"ReversedOffsets",
       rawFile(entryW(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"), zeros(8)),
       {"tensor 'w'", "end before they begin"}},
      {"WrongByteSize",
       rawFile(entryW(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), zeros(8)),
       {"tensor 'w'", "hold 8 bytes but F32 [3] needs 12"}},
      {"OverlappingOffsets",
       rawFile(two + R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", zeros(12)),
       {"tensor 'b'", "overlap tensor 'a'"}},
      {"GapBetweenTensors",
       rawFile(two + R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})", zeros(20)),
       {"tensor 'b'", "unused"}},
      {"DuplicateName",
       rawFile(R"({"w":)" + kGoodW + R"(,"w":)" + kGoodW + "}", zeros(8)),
       {"'w' more than once"}},
      {"MetadataNotObject", rawFile(R"({"__metadata__":[1]})", {}), {"__metadata__"}},
      {"MetadataValueNotString",
       rawFile(R"({"__metadata__":{"step":3}})", {}),
       {"metadata value of 'step'"}},
  };
}

class CorruptFileTest : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(CorruptFileTest, ThrowsNamingFileAndCause) {
  const ScratchDir scratch("corrupt");
  const fs::path& dir = scratch.path;
  const std::string path = (dir / "bad.safetensors").string();
  writeBytes(path, GetParam().bytes);
  // The header-only reader makes the same checks, so it refuses every case the same way.
  for (bool headerOnly : {false, true}) {
    try {
      if (headerOnly)
        readSafeTensorsHeader(path);
      else
        readSafeTensors(path);
      ADD_FAILURE() << "corrupt file accepted (header only: " << headerOnly << ")";
    } catch (const SafeTensorsError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + path + "'"), std::string::npos) << msg;
      for (const auto& part : GetParam().expected)
        EXPECT_NE(msg.find(part), std::string::npos) << "'" << msg << "' lacks '" << part << "'";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SafeTensors, CorruptFileTest, ::testing::ValuesIn(corruptCases()),
                         [](const auto& tc) { return tc.param.name; });

TEST(SafeTensorsTest, TheUncorruptedBaselineReads) {
  // Guards the corrupt-file family: its baseline must be valid, so each case fails only for
  // its own mutation.
  const ScratchDir scratch("baseline");
  const fs::path& dir = scratch.path;
  writeBytes(dir / "ok.safetensors", rawFile(entryW(kGoodW), zeros(8)));
  EXPECT_EQ(readSafeTensors((dir / "ok.safetensors").string()).tensors.at("w").numel(), 2);
}

TEST(SafeTensorsTest, MissingFileNamesFileAndCause) {
  const ScratchDir scratch("missing");
  const fs::path& dir = scratch.path;
  const std::string path = (dir / "nope.safetensors").string();
  try {
    readSafeTensors(path);
    FAIL() << "missing file accepted";
  } catch (const SafeTensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
}

// ---- atomic writes ----

SafeTensorsFile smallFile(float v) {
  SafeTensorsFile f;
  f.tensors["w"] = StTensor::fromF32({1}, {v});
  return f;
}

TEST(SafeTensorsTest, WriteIntoMissingDirectoryFailsCleanly) {
  const ScratchDir scratch("nodir");
  const fs::path& dir = scratch.path;
  const std::string path = (dir / "no" / "such" / "dir" / "x.safetensors").string();
  try {
    writeSafeTensors(path, smallFile(1.f));
    FAIL() << "write into a missing directory succeeded";
  } catch (const SafeTensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_FALSE(fs::exists(path));
}

TEST(SafeTensorsTest, FailedRenameRemovesTheTmpFile) {
  // The target is an existing non-empty directory: the tmp file is written in full, then
  // rename() fails, and the tmp file must not be left behind.
  const ScratchDir scratch("rename");
  const fs::path& dir = scratch.path;
  const fs::path target = dir / "occupied";
  fs::create_directories(target / "inside");
  EXPECT_THROW(writeSafeTensors(target.string(), smallFile(1.f)), SafeTensorsError);
  EXPECT_FALSE(fs::exists(target.string() + ".tmp"));
  EXPECT_TRUE(fs::is_directory(target / "inside"));
}

TEST(SafeTensorsTest, InvalidTensorLeavesTheExistingFileUntouched) {
  const ScratchDir scratch("invalid");
  const fs::path& dir = scratch.path;
  const std::string path = (dir / "ckpt.safetensors").string();
  writeSafeTensors(path, smallFile(1.f));
  const auto before = readBytes(path);
  SafeTensorsFile bad = smallFile(2.f);
  bad.tensors["v"] = StTensor::fromF32({2}, {1.f, 2.f});
  bad.tensors["v"].shape = {3};  // 8 bytes for 12 needed
  try {
    writeSafeTensors(path, bad);
    FAIL() << "inconsistent tensor written";
  } catch (const SafeTensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'v'"), std::string::npos) << e.what();
  }
  SafeTensorsFile reserved = smallFile(3.f);
  reserved.tensors["__metadata__"] = StTensor::fromF32({1}, {0.f});
  EXPECT_THROW(writeSafeTensors(path, reserved), SafeTensorsError);
  EXPECT_EQ(readBytes(path), before);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(SafeTensorsTest, OverwriteReplacesTheWholeFile) {
  const ScratchDir scratch("overwrite");
  const fs::path& dir = scratch.path;
  const std::string path = (dir / "x.safetensors").string();
  SafeTensorsFile big;
  big.tensors["w"] = StTensor::fromF64({100}, std::vector<double>(100, 1.0));
  writeSafeTensors(path, big);
  writeSafeTensors(path, smallFile(5.f));  // shorter: no stale bytes may remain
  EXPECT_EQ(readSafeTensors(path).tensors.at("w").toF64(), std::vector<double>{5.0});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(SafeTensorsTest, OverwriteRenamesANewFileInsteadOfRewritingInPlace) {
  // A hard link to the old file keeps the old bytes only if the writer built a new file and
  // renamed it over `path`; an in-place rewrite (not atomic) would change both names.
  const ScratchDir scratch("inode");
  const fs::path& dir = scratch.path;
  const fs::path path = dir / "x.safetensors";
  writeSafeTensors(path.string(), smallFile(1.f));
  fs::create_hard_link(path, dir / "old.safetensors");
  writeSafeTensors(path.string(), smallFile(2.f));
  EXPECT_EQ(readSafeTensors(path.string()).tensors.at("w").toF64(), std::vector<double>{2.0});
  EXPECT_EQ(readSafeTensors((dir / "old.safetensors").string()).tensors.at("w").toF64(),
            std::vector<double>{1.0});
  EXPECT_EQ(fs::hard_link_count(path), 1u);
}


// ---- paths that are not regular files ----

/// The kinds of non-regular path a writer must refuse and a reader must not block on, made in
/// `dir` (no real device node is touched): name -> the kind the message must state.
std::vector<std::pair<fs::path, std::string>> nonRegularPaths(const fs::path& dir) {
  std::vector<std::pair<fs::path, std::string>> out;
  EXPECT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  out.emplace_back(dir / "fifo", "a FIFO");
  fs::create_directory(dir / "folder");
  out.emplace_back(dir / "folder", "a folder");
  fs::create_symlink(dir / "fifo", dir / "link_to_fifo");
  out.emplace_back(dir / "link_to_fifo", "a FIFO");
  fs::create_symlink(dir / "folder", dir / "link_to_folder");
  out.emplace_back(dir / "link_to_folder", "a folder");
  fs::create_symlink(dir / "loop_b", dir / "loop_a");
  fs::create_symlink(dir / "loop_a", dir / "loop_b");
  out.emplace_back(dir / "loop_a", "a symbolic link loop");
  return out;
}

TEST(SafeTensorsTest, WritersRefuseEveryPathThatIsNotARegularFile) {
  const ScratchDir scratch("nonregular_write");
  for (const auto& [path, kind] : nonRegularPaths(scratch.path)) {
    for (bool withOffsets : {false, true}) {
      try {
        if (withOffsets)
          writeSafeTensorsWithOffsets(path.string(), smallFile(1.f), /*durable=*/false);
        else
          writeSafeTensors(path.string(), smallFile(1.f));
        ADD_FAILURE() << path << " (" << kind << ") was written";
      } catch (const SafeTensorsError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'" + path.string() + "'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("is " + kind), std::string::npos) << msg;
      }
      EXPECT_FALSE(fs::exists(path.string() + ".tmp")) << path;
    }
  }
  // Nothing was replaced: the FIFO is still a FIFO, the folder a folder.
  EXPECT_TRUE(fs::is_fifo(scratch.path / "fifo"));
  EXPECT_TRUE(fs::is_directory(scratch.path / "folder"));
  EXPECT_TRUE(fs::is_symlink(scratch.path / "link_to_fifo"));
}

TEST(SafeTensorsTest, WriterRefusesATemporaryNameThatIsAFifo) {
  // Opening a FIFO to write blocks until a reader comes: the writer must not open it.
  const ScratchDir scratch("fifo_tmp");
  const fs::path path = scratch.path / "x.safetensors";
  ASSERT_EQ(::mkfifo((path.string() + ".tmp").c_str(), 0644), 0);
  try {
    writeSafeTensors(path.string(), smallFile(1.f));
    FAIL() << "written through a FIFO";
  } catch (const SafeTensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("a FIFO"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(SafeTensorsTest, WriterReplacesASymlinkToARegularFileAndADanglingOne) {
  // The class's boundary: links to regular files and dangling links stay writable.
  const ScratchDir scratch("links_ok");
  writeSafeTensors((scratch.path / "real").string(), smallFile(1.f));
  fs::create_symlink(scratch.path / "real", scratch.path / "to_real");
  fs::create_symlink(scratch.path / "nowhere", scratch.path / "dangling");
  writeSafeTensors((scratch.path / "to_real").string(), smallFile(2.f));
  writeSafeTensors((scratch.path / "dangling").string(), smallFile(3.f));
  EXPECT_EQ(readSafeTensors((scratch.path / "to_real").string()).tensors.at("w").toF64(),
            std::vector<double>{2.0});
  EXPECT_EQ(readSafeTensors((scratch.path / "dangling").string()).tensors.at("w").toF64(),
            std::vector<double>{3.0});
}

TEST(SafeTensorsTest, ReadersRefuseEveryPathThatIsNotARegularFileWithoutBlocking) {
  // Without O_NONBLOCK and the type check, the FIFO cases block forever (ctest's TIMEOUT).
  const ScratchDir scratch("nonregular_read");
  for (const auto& [path, kind] : nonRegularPaths(scratch.path)) {
    for (bool headerOnly : {false, true}) {
      try {
        if (headerOnly)
          readSafeTensorsHeader(path.string());
        else
          readSafeTensors(path.string());
        ADD_FAILURE() << path << " (" << kind << ") was read";
      } catch (const SafeTensorsError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'" + path.string() + "'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("is " + kind), std::string::npos) << msg;
      }
    }
  }
}

}  // namespace
}  // namespace tessel
