// Byte-level text data (see TextDataset.h for the promise).
//
// Layout of a file of N bytes with validation fraction f:
//   train = bytes [0, trainEnd)   with trainEnd = floor(N * (1 - f))   (nanoGPT's int(n*0.9))
//   val   = bytes [trainEnd, N)
// A window of seq+1 bytes starting at offset o must lie entirely inside one split, so a split
// of S bytes has S - seq valid start offsets. Offsets are drawn from std::mt19937_64 with an
// unbiased rejection method (below) instead of std::uniform_int_distribution, whose algorithm
// differs between standard libraries; the same seed therefore gives the same batches
// everywhere.
#include "runtime/data/TextDataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace tessel {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

/// Reads the whole file in chunks (works for regular files and pipes alike).
std::vector<uint8_t> readWholeFile(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file)
    throw DataError(fmt::format("cannot open data file '{}': {}", path, std::strerror(errno)));
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = size_t{1} << 20;  // 1 MiB per read
  for (;;) {
    size_t old = bytes.size();
    bytes.resize(old + kChunk);
    errno = 0;
    size_t got = std::fread(bytes.data() + old, 1, kChunk, file.get());
    bytes.resize(old + got);
    if (got < kChunk) {
      if (std::ferror(file.get())) {
        // A directory opens fine on Linux and fails here with EISDIR.
        const char* cause = errno != 0 ? std::strerror(errno) : "read error";
        throw DataError(fmt::format("cannot read data file '{}': {}", path, cause));
      }
      break;  // end of file
    }
  }
  return bytes;
}

/// The text files of a folder, concatenated in name order. A text file is a regular file
/// (symbolic links are skipped, so aliases such as fortune's "*.u8" are not read twice) with
/// no NUL byte (binary indexes such as fortune's "*.dat" are skipped), the rule git and grep
/// use to tell text from binary.
std::vector<uint8_t> readTextFolder(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
    if (e.symlink_status().type() == fs::file_type::regular) files.push_back(e.path());
  if (ec) throw DataError(fmt::format("cannot list data folder '{}': {}", path, ec.message()));
  std::sort(files.begin(), files.end());
  std::vector<uint8_t> bytes;
  for (const fs::path& f : files) {
    std::vector<uint8_t> content = readWholeFile(f.string());
    if (std::find(content.begin(), content.end(), uint8_t{0}) != content.end()) continue;
    bytes.insert(bytes.end(), content.begin(), content.end());
  }
  if (bytes.empty())
    throw DataError(fmt::format("data folder '{}' holds no non-empty text files", path));
  return bytes;
}

/// A uniformly distributed integer in [0, range), range >= 1, from one or more rng() draws.
/// Rejection method (as OpenBSD's arc4random_uniform): values below 2^64 mod range are
/// redrawn, so the accepted values cover whole multiples of `range` and `r % range` is
/// exactly uniform. The rejection probability is below range / 2^64, so for any corpus size
/// the result is almost always simply rng() % range.
uint64_t uniformBelow(std::mt19937_64& rng, uint64_t range) {
  const uint64_t threshold = (0 - range) % range;  // == 2^64 mod range
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold) return r % range;
  }
}

const char* splitName(Split split) { return split == Split::Train ? "training" : "validation"; }

}  // namespace

TextDataset::TextDataset(const std::string& path, double valFraction) : path_(path) {
  if (!(valFraction >= 0.0 && valFraction < 1.0))
    throw DataError(fmt::format("validation fraction for data file '{}' must be in [0, 1), got {}",
                                path, valFraction));
  std::error_code ec;
  bytes_ = std::filesystem::is_directory(path, ec) ? readTextFolder(path) : readWholeFile(path);
  if (bytes_.empty()) throw DataError(fmt::format("data file '{}' is empty", path));
  const double n = static_cast<double>(bytes_.size());
  trainEnd_ = static_cast<int64_t>(std::floor(n * (1.0 - valFraction)));
  if (trainEnd_ > size()) trainEnd_ = size();  // guards rounding; floor(n * x) <= n for x < 1
}

/// Throws DataError unless a window of seq+1 bytes fits in `split`.
static void checkSplit(const TextDataset& data, Split split, int64_t seq) {
  if (seq < 1)
    throw DataError(fmt::format("sequence length must be at least 1, got {} (data file '{}')", seq,
                                data.path()));
  const int64_t have = split == Split::Train ? data.trainSize() : data.valSize();
  if (have < seq + 1)
    throw DataError(fmt::format(
        "sequence length {} needs {} bytes in the {} split of '{}', which has {} (file has {} "
        "bytes)",
        seq, seq + 1, splitName(split), data.path(), have, data.size()));
}

void TextDataset::requireSequenceLength(int64_t seq) const {
  checkSplit(*this, Split::Train, seq);
  checkSplit(*this, Split::Val, seq);
}

TokenBatch TextDataset::sample(Split split, int64_t batch, int64_t seq,
                               std::mt19937_64& rng) const {
  if (batch < 1)
    throw DataError(
        fmt::format("batch size must be at least 1, got {} (data file '{}')", batch, path_));
  checkSplit(*this, split, seq);
  // checkSplit bounds seq by the file size; bound the product so it cannot overflow.
  constexpr int64_t kMaxTokens = int64_t{1} << 40;
  if (batch > kMaxTokens / seq)
    throw DataError(fmt::format("a batch of {} x {} tokens is too large (limit 2^40 tokens)",
                                batch, seq));
  const int64_t begin = split == Split::Train ? 0 : trainEnd_;
  const int64_t splitSize = split == Split::Train ? trainSize() : valSize();
  // Valid starts: begin .. begin + splitSize - (seq + 1), i.e. splitSize - seq of them.
  const uint64_t range = static_cast<uint64_t>(splitSize - seq);

  TokenBatch out;
  out.batch = batch;
  out.seq = seq;
  out.tokens.resize(static_cast<size_t>(batch * seq));
  out.targets.resize(static_cast<size_t>(batch * seq));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t o = begin + static_cast<int64_t>(uniformBelow(rng, range));
    const uint8_t* window = bytes_.data() + o;  // seq + 1 bytes, all inside the split
    for (int64_t t = 0; t < seq; ++t) {
      out.tokens[static_cast<size_t>(b * seq + t)] = window[t];
      out.targets[static_cast<size_t>(b * seq + t)] = window[t + 1];
    }
  }
  return out;
}

TokenBatch TextDataset::windows(Split split, const std::vector<int64_t>& offsets,
                                int64_t seq) const {
  checkSplit(*this, split, seq);
  const int64_t begin = split == Split::Train ? 0 : trainEnd_;
  const int64_t splitSize = split == Split::Train ? trainSize() : valSize();
  TokenBatch out;
  out.batch = static_cast<int64_t>(offsets.size());
  out.seq = seq;
  out.tokens.resize(offsets.size() * static_cast<size_t>(seq));
  out.targets.resize(offsets.size() * static_cast<size_t>(seq));
  for (size_t b = 0; b < offsets.size(); ++b) {
    const int64_t o = offsets[b];
    if (o < 0 || o > splitSize - (seq + 1))
      throw DataError(fmt::format(
          "window offset {} with sequence length {} does not fit in the {} split of '{}' ({} "
          "bytes)",
          o, seq, splitName(split), path_, splitSize));
    const uint8_t* window = bytes_.data() + begin + o;
    for (int64_t t = 0; t < seq; ++t) {
      out.tokens[b * seq + t] = window[t];
      out.targets[b * seq + t] = window[t + 1];
    }
  }
  return out;
}

}  // namespace tessel
