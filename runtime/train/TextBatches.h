// Text batches for the training loop, shared by the JIT trainers (dsl/trainer, examples) and
// tessel-run, so a bundle trains on the same batches as the JIT run. MLIR-free.
//
// Promise:
// - Training batches come from the DistributedSampler (runtime/data/DistributedSampler.h)
//   over the train split's windows of seq+1 bytes: global step s is the sampler's global
//   batch s (a pure function of the seed, the epoch and the position, independent of the
//   world size; the epoch's shuffle changes without any call; the last partial global batch
//   of an epoch is dropped). Rank r of N feeds rows microbatchRows(B, r, N, m, k) of it at
//   microstep m of k, so the ranks and microsteps of a step cover its global batch exactly
//   once.
// - Validation (runtime/train/Validation.h): the fixed set is the validation split's windows
//   of seq+1 bytes at stride seq (window i at byte i*seq, as for training: every target byte
//   of the split is predicted once), in order, in global batches of B; an evaluation runs
//   the first --eval-batches of them (0: all) whatever the seed, and rank r feeds the same
//   rows microbatchRows(B, r, N, m, k) of each as in training.
#pragma once

#include "runtime/data/TextDataset.h"
#include "runtime/train/Loop.h"
#include "runtime/train/Validation.h"

#include <cstdint>
#include <utility>

namespace tessel::trainer {

/// Rows [first, last) of a global batch of `batch` rows that rank `rank` of `world` feeds at
/// microstep `micro` of `microsteps`: rank r holds shardRange(batch, r, world), split again
/// into `microsteps` pieces with shardRange.
std::pair<int64_t, int64_t> microbatchRows(int64_t batch, int rank, int world, int64_t micro,
                                           int64_t microsteps);

/// What the feeders need to know. `data` must outlive the feeders.
struct TextBatchOptions {
  const TextDataset* data = nullptr;
  int64_t batch = 1;       // global batch B (divisible by world * microsteps)
  int64_t seq = 1;         // T
  int rank = 0, world = 1;
  int64_t microsteps = 1;  // k: calls per training step (accumulate_step k-1 times, then train_step;
                           // or a pipeline's M_eff microbatches, all of one train_step)
  uint64_t seed = 1337;
  /// Global batches already consumed (a run resumed from checkpoint step s: s). The first
  /// training call feeds global batch firstStep (0-based), i.e. 1-based step firstStep + 1: the
  /// sampler position is the step, so a resumed run sees the uninterrupted run's data order.
  int64_t firstStep = 0;
};

/// The training feeder: one call per microstep, in order (see the promise). Throws
/// DataError when the train split has fewer windows than one global batch.
BatchFeeder textTrainFeeder(const TextBatchOptions& o);
/// The validation set (see the promise): textWindowCount(valSize, seq) windows, the trailing
/// count % B of them left out. Throws DataError when the split holds fewer than B windows.
ValidationFeeder textValFeeder(const TextBatchOptions& o);

}  // namespace tessel::trainer
