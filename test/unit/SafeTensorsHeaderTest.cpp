// Tests for the header-only side of runtime/io/SafeTensors: the absolute byte ranges the
// writer reports (what a checkpoint index records) against the bytes actually in the file, the
// header reader against the full reader, and F16 widening.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "runtime/io/SafeTensors.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

fs::path scratchFile(const std::string& tag) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tessel_sth_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / (tag + ".safetensors");
}

std::vector<uint8_t> readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

SafeTensorsFile threeTensors() {
  SafeTensorsFile file;
  file.metadata = {{"format", "pt"}};
  file.tensors["a"] = StTensor::fromF32({2, 3}, {1, 2, 3, 4, 5, 6});
  file.tensors["b@0,4"] = StTensor::fromF64({1}, {-0.5});
  file.tensors["c"] = StTensor::fromI32({3}, {7, 8, 9});
  file.tensors["empty"] = StTensor::fromF32({0}, {});
  return file;
}

TEST(SafeTensorsHeaderTest, WriterRangesHoldEachTensorsBytes) {
  const fs::path path = scratchFile("ranges");
  const SafeTensorsFile file = threeTensors();
  for (bool durable : {true, false}) {
    const StByteRanges ranges = writeSafeTensorsWithOffsets(path.string(), file, durable);
    const std::vector<uint8_t> bytes = readBytes(path);
    ASSERT_EQ(ranges.size(), file.tensors.size());
    for (const auto& [name, t] : file.tensors) {
      const auto [begin, end] = ranges.at(name);
      ASSERT_LE(begin, end);
      ASSERT_LE(end, int64_t(bytes.size())) << name;
      EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + begin, bytes.begin() + end), t.bytes) << name;
    }
    // The data area starts 8-byte aligned (the header is space-padded), as the format's
    // reference writer does.
    EXPECT_EQ(ranges.at("a").first % 8, 0);
  }
  fs::remove(path);
}

TEST(SafeTensorsHeaderTest, HeaderReaderAgreesWithTheWriterAndTheFullReader) {
  const fs::path path = scratchFile("agree");
  const SafeTensorsFile file = threeTensors();
  const StByteRanges ranges = writeSafeTensorsWithOffsets(path.string(), file);
  const SafeTensorsHeader header = readSafeTensorsHeader(path.string());
  EXPECT_EQ(header.fileSize, int64_t(fs::file_size(path)));
  EXPECT_EQ(header.metadata, file.metadata);
  ASSERT_EQ(header.tensors.size(), file.tensors.size());
  for (const auto& [name, info] : header.tensors) {
    EXPECT_EQ(info.dtype, file.tensors.at(name).dtype) << name;
    EXPECT_EQ(info.shape, file.tensors.at(name).shape) << name;
    EXPECT_EQ(std::make_pair(info.begin, info.end), ranges.at(name)) << name;
    EXPECT_GE(info.begin, header.dataBegin) << name;
  }
  const SafeTensorsFile back = readSafeTensors(path.string());
  for (const auto& [name, t] : file.tensors) EXPECT_EQ(back.tensors.at(name).bytes, t.bytes) << name;
  fs::remove(path);
}

TEST(SafeTensorsHeaderTest, InMemoryHeaderShorterThanItsLengthIsRefused) {
  const fs::path path = scratchFile("short");
  writeSafeTensors(path.string(), threeTensors());
  const std::vector<uint8_t> bytes = readBytes(path);
  // The whole header parses from memory; one byte less is a truncated header, not a crash.
  const SafeTensorsHeader whole = parseSafeTensorsHeader(bytes.data(), bytes.size(), bytes.size(), "mem");
  EXPECT_EQ(whole.tensors.size(), 4u);
  const size_t cut = size_t(whole.dataBegin) - 1;
  try {
    parseSafeTensorsHeader(bytes.data(), cut, bytes.size(), "mem");
    FAIL() << "truncated header accepted";
  } catch (const SafeTensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("'mem': header of"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parseSafeTensorsHeader(bytes.data(), 3, bytes.size(), "mem"), SafeTensorsError);
  fs::remove(path);
}

TEST(SafeTensorsHeaderTest, F16WidensExactly) {
  // IEEE binary16 bit patterns with their values by the format's definition: 0x3C00 = 1,
  // 0xC000 = -2, 0x7BFF = 65504 (largest finite), 0x0001 = 2^-24 (smallest subnormal),
  // 0x03FF = 1023 x 2^-24 (largest subnormal), 0x7C00 = +inf, 0x7E00 = NaN.
  StTensor t;
  t.dtype = StDType::F16;
  t.shape = {7};
  const uint16_t bits[7] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x7C00, 0x7E00};
  t.bytes.resize(sizeof bits);
  std::memcpy(t.bytes.data(), bits, sizeof bits);
  const std::vector<double> v = t.toF64();
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], -2.0);
  EXPECT_EQ(v[2], 65504.0);
  EXPECT_EQ(v[3], std::ldexp(1.0, -24));
  EXPECT_EQ(v[4], 1023 * std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(v[5]) && v[5] > 0);
  EXPECT_TRUE(std::isnan(v[6]));
  StDType d = StDType::F32;
  EXPECT_TRUE(dtypeFromName("F16", d));
  EXPECT_EQ(d, StDType::F16);
  EXPECT_EQ(dtypeSize(StDType::F16), 2u);
  EXPECT_FALSE(dtypeFromName("f32", d));
}

}  // namespace
}  // namespace tessel
