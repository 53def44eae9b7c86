// Tests for runtime/data/TextDataset: windows are consecutive file bytes with targets shifted
// by one, each split's windows stay inside it, sampling is seeded and portable, and every
// error names the file and the cause.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "runtime/data/TextDataset.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

/// A fresh directory under testing::TempDir(), removed when the test ends.
class TextDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("tessel_textdataset_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return path;
  }

  fs::path dir_;
};

/// The 256 byte values in a fixed shuffled order: every byte occurs once, so a window's
/// offset is recoverable from its first byte, and values >= 128 check that bytes are read
/// unsigned.
std::vector<uint8_t> permutationBytes() {
  std::vector<uint8_t> bytes(256);
  std::iota(bytes.begin(), bytes.end(), 0);
  std::mt19937_64 rng(17);
  for (size_t i = 255; i > 0; --i) std::swap(bytes[i], bytes[rng() % (i + 1)]);
  return bytes;
}

std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> bytes(n);
  std::mt19937_64 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

/// Expects `what` to throw DataError whose message contains every string in `parts`.
template <typename F>
void expectDataError(F&& what, const std::vector<std::string>& parts) {
  try {
    what();
    ADD_FAILURE() << "expected DataError";
  } catch (const DataError& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

TEST_F(TextDatasetTest, SplitIsNinetyTen) {
  TextDataset a(write("a.txt", randomBytes(1000, 1)));
  EXPECT_EQ(a.size(), 1000);
  EXPECT_EQ(a.trainSize(), 900);
  EXPECT_EQ(a.valSize(), 100);
  TextDataset b(write("b.txt", permutationBytes()));
  EXPECT_EQ(b.trainSize(), 230);  // floor(256 * 0.9) = floor(230.4)
  EXPECT_EQ(b.valSize(), 26);
  TextDataset c(write("c.txt", randomBytes(1000, 1)), 0.25);
  EXPECT_EQ(c.trainSize(), 750);
  EXPECT_EQ(c.path(), (dir_ / "c.txt").string());
}

TEST_F(TextDatasetTest, WindowsAreConsecutiveBytesWithShiftedTargets) {
  const auto bytes = permutationBytes();
  std::vector<int64_t> offsetOf(256);
  for (int64_t i = 0; i < 256; ++i) offsetOf[bytes[size_t(i)]] = i;
  TextDataset data(write("perm.txt", bytes));
  std::mt19937_64 rng(5);
  const int64_t B = 16, T = 8;
  for (Split split : {Split::Train, Split::Val}) {
    const TokenBatch batch = data.sample(split, B, T, rng);
    ASSERT_EQ(batch.batch, B);
    ASSERT_EQ(batch.seq, T);
    ASSERT_EQ(batch.tokens.size(), size_t(B * T));
    ASSERT_EQ(batch.targets.size(), size_t(B * T));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t o = offsetOf[size_t(batch.tokens[size_t(b * T)])];
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(batch.tokens[size_t(b * T + t)], bytes[size_t(o + t)]) << "b=" << b << " t=" << t;
        ASSERT_EQ(batch.targets[size_t(b * T + t)], bytes[size_t(o + t + 1)]) << "b=" << b;
      }
    }
  }
}

TEST_F(TextDatasetTest, OffsetsCoverExactlyTheirSplit) {
  // 256 distinct bytes: train = [0, 230), val = [230, 256). With T = 8 a window needs 9 bytes,
  // so valid train offsets are 0..221 (222 of them) and val offsets 230..247 (18 of them).
  // After 20000 draws each valid offset is hit (P(miss one) < 222 * e^-90) and no other.
  const auto bytes = permutationBytes();
  std::vector<int64_t> offsetOf(256);
  for (int64_t i = 0; i < 256; ++i) offsetOf[bytes[size_t(i)]] = i;
  TextDataset data(write("perm.txt", bytes));
  std::mt19937_64 rng(11);
  const int64_t T = 8;
  std::set<int64_t> train, val;
  for (int i = 0; i < 100; ++i) {
    const auto tb = data.sample(Split::Train, 200, T, rng);
    const auto vb = data.sample(Split::Val, 200, T, rng);
    for (int64_t b = 0; b < 200; ++b) {
      train.insert(offsetOf[size_t(tb.tokens[size_t(b * T)])]);
      val.insert(offsetOf[size_t(vb.tokens[size_t(b * T)])]);
    }
  }
  ASSERT_EQ(train.size(), 222u);
  EXPECT_EQ(*train.begin(), 0);
  EXPECT_EQ(*train.rbegin(), 221);  // the last window ends at byte 229, inside train
  ASSERT_EQ(val.size(), 18u);
  EXPECT_EQ(*val.begin(), 230);
  EXPECT_EQ(*val.rbegin(), 247);  // the last window ends at byte 255, the file's last
}

TEST_F(TextDatasetTest, WindowsOfALargerFileComeFromTheirSplit) {
  // Random bytes: a 33-byte window occurs once in 100 kB with overwhelming probability,
  // so its position can be looked up.
  const auto bytes = randomBytes(100'000, 3);
  const std::string text(bytes.begin(), bytes.end());
  TextDataset data(write("rand.bin", bytes));
  std::mt19937_64 rng(8);
  const int64_t T = 32;
  for (Split split : {Split::Train, Split::Val}) {
    const auto batch = data.sample(split, 64, T, rng);
    for (int64_t b = 0; b < 64; ++b) {
      std::string window;
      for (int64_t t = 0; t < T; ++t) window += char(batch.tokens[size_t(b * T + t)]);
      window += char(batch.targets[size_t(b * T + T - 1)]);
      const size_t at = text.find(window);
      ASSERT_NE(at, std::string::npos);
      ASSERT_EQ(text.find(window, at + 1), std::string::npos) << "window not unique";
      if (split == Split::Train) {
        EXPECT_LE(int64_t(at) + T + 1, data.trainSize());
      } else {
        EXPECT_GE(int64_t(at), data.trainSize());
        EXPECT_LE(int64_t(at) + T + 1, data.size());
      }
    }
  }
}

TEST_F(TextDatasetTest, SameSeedSameBatchesDifferentSeedDifferentBatches) {
  TextDataset data(write("rand.bin", randomBytes(50'000, 4)));
  std::mt19937_64 a(42), b(42), c(43);
  for (int step = 0; step < 3; ++step) {
    const auto ba = data.sample(Split::Train, 8, 64, a);
    const auto bb = data.sample(Split::Train, 8, 64, b);
    const auto bc = data.sample(Split::Train, 8, 64, c);
    EXPECT_EQ(ba.tokens, bb.tokens);
    EXPECT_EQ(ba.targets, bb.targets);
    EXPECT_NE(ba.tokens, bc.tokens);
  }
  // Successive batches from one generator differ too.
  std::mt19937_64 d(42);
  EXPECT_NE(data.sample(Split::Train, 8, 64, d).tokens, data.sample(Split::Train, 8, 64, d).tokens);
}

TEST_F(TextDatasetTest, OffsetsAreThePortableModuloOfTheGenerator) {
  // The documented portable draw: offset = begin + rng() % range (the rejection step is taken
  // with probability < range / 2^64, i.e. never here). std::uniform_int_distribution would
  // give other, library-dependent offsets.
  const auto bytes = permutationBytes();
  TextDataset data(write("perm.txt", bytes));
  std::mt19937_64 rng(2024), mirror(2024);
  const auto tb = data.sample(Split::Train, 4, 8, rng);
  const auto vb = data.sample(Split::Val, 4, 8, rng);
  for (int64_t b = 0; b < 4; ++b)
    EXPECT_EQ(tb.tokens[size_t(b * 8)], bytes[mirror() % 222]) << "train b=" << b;
  for (int64_t b = 0; b < 4; ++b)
    EXPECT_EQ(vb.tokens[size_t(b * 8)], bytes[230 + mirror() % 18]) << "val b=" << b;
}

TEST_F(TextDatasetTest, ShortestPossibleSequenceFitsExactly) {
  // 1000 bytes: val has 100, so seq 99 (100 bytes) fits with a single offset; seq 100 does not.
  TextDataset data(write("a.txt", randomBytes(1000, 6)));
  data.requireSequenceLength(99);
  std::mt19937_64 rng(1);
  const auto batch = data.sample(Split::Val, 3, 99, rng);
  const auto bytes = randomBytes(1000, 6);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < 99; ++t)
      ASSERT_EQ(batch.targets[size_t(b * 99 + t)], bytes[size_t(900 + t + 1)]);
  expectDataError([&] { data.requireSequenceLength(100); }, {"validation split", "a.txt"});
}

TEST_F(TextDatasetTest, MissingFileNamesFileAndCause) {
  const std::string path = (dir_ / "nope.txt").string();
  expectDataError([&] { TextDataset d(path); },
                  {"cannot open data file '" + path + "'", "No such file or directory"});
}

TEST_F(TextDatasetTest, FolderIsItsTextFilesInNameOrder) {
  write("b.txt", {'B', 'B', 'B'});
  write("a.txt", {'A'});
  write("a.dat", {1, 0, 2});  // binary (has a NUL): skipped
  fs::create_symlink(dir_ / "a.txt", dir_ / "a.u8");  // alias: skipped
  fs::create_directories(dir_ / "sub");               // folders: not descended into
  write("sub/c.txt", {'C'});
  TextDataset d(dir_.string(), 0.5);
  EXPECT_EQ(d.size(), 4);  // "A" + "BBB"
  std::mt19937_64 rng(1);
  TokenBatch b = d.sample(Split::Train, 1, 1, rng);  // train = "AB", the only window
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{'A'}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{'B'}));
}

TEST_F(TextDatasetTest, FolderWithoutTextIsRejected) {
  write("index.dat", {0, 0, 0});
  expectDataError([&] { TextDataset d(dir_.string()); }, {"'" + dir_.string() + "'", "no non-empty text files"});
}

TEST_F(TextDatasetTest, OverflowingBatchIsRejected) {
  std::vector<uint8_t> bytes(1000, 'x');
  TextDataset d(write("x.txt", bytes));
  std::mt19937_64 rng(1);
  // 2^62 x 4 wraps to 0 in int64: it must be refused, not sampled into a 0-size buffer.
  expectDataError([&] { d.sample(Split::Train, int64_t{1} << 62, 4, rng); }, {"too large"});
}

TEST_F(TextDatasetTest, EmptyFileIsRejected) {
  const std::string path = write("empty.txt", {});
  expectDataError([&] { TextDataset d(path); }, {"data file '" + path + "' is empty"});
}

TEST_F(TextDatasetTest, TooLongSequenceNamesLengthsAndSplit) {
  const std::string path = write("small.txt", randomBytes(1000, 2));
  TextDataset data(path);
  try {
    data.requireSequenceLength(512);
    FAIL() << "seq 512 accepted";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()),
              "sequence length 512 needs 513 bytes in the validation split of '" + path +
                  "', which has 100 (file has 1000 bytes)");
  }
  expectDataError([&] { data.requireSequenceLength(900); },
                  {"training split", "needs 901 bytes", "which has 900", path});
  std::mt19937_64 rng(0);
  expectDataError([&] { data.sample(Split::Val, 1, 100, rng); }, {"validation split", path});
  expectDataError([&] { data.sample(Split::Train, 1, 900, rng); }, {"training split", path});
  // A train-only sample of a length that fits train but not val is fine.
  EXPECT_EQ(data.sample(Split::Train, 1, 512, rng).tokens.size(), 512u);
}

TEST_F(TextDatasetTest, NonPositiveSizesAreRejected) {
  const std::string path = write("a.txt", randomBytes(1000, 2));
  TextDataset data(path);
  std::mt19937_64 rng(0);
  expectDataError([&] { data.requireSequenceLength(0); }, {"sequence length", path});
  expectDataError([&] { data.sample(Split::Train, 0, 8, rng); }, {"batch size", path});
  expectDataError([&] { data.sample(Split::Train, 4, -1, rng); }, {"sequence length", path});
  expectDataError([&] { TextDataset d(path, 1.0); }, {"validation fraction", path});
  expectDataError([&] { TextDataset d(path, -0.1); }, {"validation fraction", path});
}

TEST_F(TextDatasetTest, ReadsTheSharedCorpusWhenPresent) {
  const std::string path = std::string(TESSEL_SOURCE_DIR) + "/../shared/data/tinyshakespeare.txt";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
  TextDataset data(path);
  EXPECT_EQ(data.size(), int64_t(fs::file_size(path)));
  data.requireSequenceLength(256);
  std::mt19937_64 rng(1);
  const auto batch = data.sample(Split::Train, 4, 256, rng);
  for (int32_t tok : batch.tokens) ASSERT_TRUE(tok >= 0 && tok < 256);
}

}  // namespace
}  // namespace tessel
