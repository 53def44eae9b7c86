// Image batches for the training loop (e.g. Fashion-MNIST through runtime/data/Idx.h), shared
// by tessel-mlp and tessel-run, so an image bundle trains on the same batches as the JIT run.
// MLIR-free.
//
// Promise (the image counterpart of TextBatches.h):
// - Training: global step s is the DistributedSampler's global batch s over the training
//   images (a seeded shuffle per epoch, the remainder of each epoch dropped), independent of
//   the world size. Rank r of N feeds rows microbatchRows(B, r, N, m, k) of it at microstep m
//   of k, so the ranks and microsteps of a step cover its global batch exactly once.
// - Validation: the fixed set of runtime/train/Validation.h over the test images in file
//   order: global batch b is images [b B, (b + 1) B), the same on every evaluation, and rank r
//   feeds rows microbatchRows(B, r, N, m, k) of it.
// Inputs: index 0 the images [b, pixels] (f32), index 1 the labels [b] (i32), b the rows fed.
#pragma once

#include "runtime/data/Idx.h"
#include "runtime/train/Loop.h"

#include <cstdint>
#include <string>

namespace tessel::trainer {

/// What the image feeders need. `train` and `test` must outlive the feeders.
struct ImageBatchOptions {
  const ImageDataset* train = nullptr;
  const ImageDataset* test = nullptr;
  int64_t batch = 1;  // global batch B (divisible by world * microsteps; at most either set's count)
  int rank = 0, world = 1;
  int64_t microsteps = 1;  // k: calls per training step (microsteps, or a pipeline's M_eff microbatches)
  uint64_t seed = 1337;
  /// Global batches already consumed (a run resumed from checkpoint step s: s). The first
  /// training call feeds global batch firstStep (0-based), i.e. 1-based step firstStep + 1: the
  /// sampler position is the step, so a resumed run sees the uninterrupted run's data order.
  int64_t firstStep = 0;
  /// What the held-out items are called in the validation line (Validation.h describeValidation),
  /// e.g. "held-out samples" for rows of features that are not images.
  std::string heldOutName = "test images";
};

/// The training feeder (see the promise). Throws DataError when the training set has fewer
/// images than one global batch.
BatchFeeder imageTrainFeeder(const ImageBatchOptions& o);
/// The validation set (see the promise). Throws DataError when the test set has fewer images
/// than one global batch.
ValidationFeeder imageValFeeder(const ImageBatchOptions& o);

/// Throws DataError naming --batch and both counts when the global batch is larger than the
/// training or the test set.
void requireImageBatch(const ImageBatchOptions& o);

}  // namespace tessel::trainer
