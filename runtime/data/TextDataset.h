// Byte-level text data: vocab 256, one token per byte.
//
// Promise: a text file is read whole, split into a training part (first 90%) and a held-out
// validation part (last 10%), and batches of B windows of T+1 consecutive bytes are drawn
// from it deterministically given a seed. Every failure is a tessel::DataError whose
// message names the file and the cause; nothing here aborts.
#pragma once

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel {

/// Thrown for a missing, unreadable, empty or too-short data file. what() is user-facing.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Which part of the corpus a batch comes from.
enum class Split { Train, Val };

/// One batch of token windows. tokens[b*T + t] = byte at offset o_b + t and
/// targets[b*T + t] = byte at o_b + t + 1 (next-token prediction), both [B, T] row-major.
struct TokenBatch {
  int64_t batch = 0, seq = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
};

/// A byte corpus with a train/validation split.
class TextDataset {
 public:
  /// Reads `path` whole; a folder stands for its text files concatenated in name order
  /// (regular files without NUL bytes; symbolic links skipped). Throws DataError if it cannot
  /// be opened ("cannot open data file 'x': No such file or directory"), or is empty.
  explicit TextDataset(const std::string& path, double valFraction = 0.1);

  /// Checks that windows of seq+1 bytes fit in both splits; throws DataError naming the
  /// sequence length, the bytes needed and the bytes available otherwise.
  void requireSequenceLength(int64_t seq) const;

  /// Draws `batch` windows of seq+1 bytes at uniformly random offsets in `split`, using
  /// `rng` (std::mt19937_64 is fully specified by the standard, so the same seed gives the
  /// same batches on every platform). Throws DataError if the split is too short.
  TokenBatch sample(Split split, int64_t batch, int64_t seq, std::mt19937_64& rng) const;

  /// The windows of seq+1 bytes starting at `offsets` (relative to the start of `split`), in
  /// order: one row of the batch per offset (e.g. the windows a DistributedSampler picks, at
  /// textWindowOffset). Throws DataError naming the offset when a window does not fit.
  TokenBatch windows(Split split, const std::vector<int64_t>& offsets, int64_t seq) const;

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  /// Every byte of the corpus: the train split, then the validation split.
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  int64_t trainSize() const { return trainEnd_; }
  int64_t valSize() const { return size() - trainEnd_; }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  int64_t trainEnd_ = 0;
};

}  // namespace tessel
