// The distributed sampler: which samples each data-parallel rank trains on at each step.
//
// Promise:
// - The order is a pure function of (seed, epoch, position). Epoch e's sample sequence is a
//   permutation P_e of [0, n); global step s belongs to epoch e = s / K and is global batch
//   g = s % K of it, K = floor(n / B) batches per epoch: positions [g*B, (g+1)*B) of P_e.
//   Rank r of N takes the contiguous slice shardRange(B, r, N) of each global batch (B must be
//   divisible by N, so every rank gets B/N samples).
// - Hence the global batches do not depend on N: a run resumed on another data-parallel
//   degree sees the same global batches, and the ranks of one step exactly partition it.
// - The shuffle changes every epoch without any call: the epoch is derived from the step.
//   Resuming needs only (seed, step); the sampler has no other state (a cached permutation
//   of the current epoch is a pure function of it).
// - Remainder rule (training): the n mod B samples at the end of each epoch's permutation are
//   dropped (torch DataLoader's drop_last=True); being at the end of a fresh shuffle, they
//   are different samples every epoch.
// - The permutation, written down so that any implementation can reproduce it:
//     key    = splitmix64(splitmix64(seed) XOR epoch)              (Steele et al. 2014)
//     rng    = std::mt19937_64(key)                  (fully specified by the C++ standard)
//     below(m) = rng() mod m, redrawing values < (2^64 - m) mod m (unbiased rejection)
//     P = [0, 1, ..., n-1]; for i = n-1 down to 1: swap(P[i], P[below(i + 1)])
//   (Fisher-Yates as given by Durstenfeld 1964). std::shuffle and
//   std::uniform_int_distribution are not used: their outputs differ between standard
//   libraries. Memory: 8 bytes per sample for the cached permutation.
// - Evaluation (evalShard): the samples in order 0..n-1, in ceil(n / B) global batches; the
//   last one is padded to B with masked entries (valid = 0, id = a valid sample so it can be
//   computed), so every sample counts exactly once over all ranks.
// - Text (TextDataset): a sample is a training window. Sample i is the window of seq+1 bytes
//   starting at offset i*seq of the split (textWindowCount windows): consecutive windows
//   overlap by one byte, the last target of one being the first input of the next, so an
//   epoch predicts every byte of the split after the first exactly once (up to the dropped
//   remainder). TextDataset::windows builds the TokenBatch of a rank's ids.
// Every bad argument throws tessel::DataError naming it.
#pragma once

#include "runtime/data/TextDataset.h"

#include <cstdint>
#include <vector>

namespace tessel {

/// Copyable; not for concurrent use from several threads (the cached permutation is shared
/// mutable state) - give each thread its own copy.
class DistributedSampler {
public:
  /// numSamples n >= 1; 1 <= globalBatch B <= n; world N >= 1 divides B; 0 <= rank < N.
  DistributedSampler(int64_t numSamples, int64_t globalBatch, int rank, int world, uint64_t seed);

  int64_t numSamples() const { return n_; }
  int64_t globalBatchSize() const { return batch_; }
  int64_t localBatchSize() const { return batch_ / world_; }
  /// K = floor(n / B) complete global batches per epoch.
  int64_t batchesPerEpoch() const { return n_ / batch_; }
  int64_t epochOf(int64_t step) const { return step / batchesPerEpoch(); }

  /// P_epoch (see the promise): n sample ids. epoch >= 0.
  std::vector<int64_t> epochOrder(int64_t epoch) const;
  /// The B sample ids of global step `step` (>= 0), in order.
  std::vector<int64_t> globalBatch(int64_t step) const;
  /// This rank's B/N sample ids at global step `step`: slice shardRange(B, rank, N) of
  /// globalBatch(step). This is what a trainer calls each step.
  std::vector<int64_t> rankBatch(int64_t step) const;

private:
  const std::vector<int64_t>& order(int64_t epoch) const;  // P_epoch, cached
  int64_t n_, batch_;
  int rank_, world_;
  uint64_t seed_;
  mutable int64_t cachedEpoch_ = -1;
  mutable std::vector<int64_t> cached_;
};

/// One rank's share of an evaluation batch: ids[i] is a sample id, valid[i] is 1 for a real
/// sample and 0 for padding (whose id is a valid sample, to be ignored in every sum).
struct EvalShard {
  std::vector<int64_t> ids;
  std::vector<uint8_t> valid;
};

/// Number of evaluation batches of n samples in global batches of B: ceil(n / B).
int64_t evalBatchCount(int64_t numSamples, int64_t globalBatch);

/// Rank `rank` of `world`'s share of evaluation batch `batch` (0 <= batch < evalBatchCount):
/// positions [batch*B, (batch+1)*B) of the samples in order, slice shardRange(B, rank, world);
/// positions >= n are padding. Same argument rules as DistributedSampler.
EvalShard evalShard(int64_t numSamples, int64_t globalBatch, int rank, int world, int64_t batch);

/// Training windows of seq+1 bytes at offsets 0, seq, 2*seq, ... that fit in a split of
/// `splitBytes` bytes: floor((splitBytes - 1) / seq) (0 if none fits). seq >= 1.
int64_t textWindowCount(int64_t splitBytes, int64_t seq);

/// The split offset of window `window` (window * seq).
inline int64_t textWindowOffset(int64_t window, int64_t seq) { return window * seq; }

/// splitmix64 (Steele, Lea & Flood 2014), the key derivation above.
uint64_t splitmix64(uint64_t x);

}  // namespace tessel
