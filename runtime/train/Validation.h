// Validation on a fixed set, MLIR-free.
//
// Promise: an evaluation's loss is the mean over the same held-out items on every
// evaluation, every run and every data-parallel degree, each item counted once:
// - The set is the held-out data in its own order (text: the windows of T+1 bytes at stride T
//   of the validation split, TextBatches.h; images: the test set in file order), cut into
//   global batches of B rows: batch b holds items [b B, (b + 1) B). The trailing items % B
//   items are dropped (the loss op is a batch mean and the compiled program has a fixed
//   batch, so a partial batch cannot be evaluated without changing the loss); the count is
//   reported. Fewer items than one global batch is an error.
// - An evaluation runs the first `n` global batches (TrainOptions::evalBatches; 0: all that
//   the set holds), no seed involved.
// - Rank r of N feeds rows microbatchRows(B, r, N, m, k) of batch b at microbatch m of k,
//   exactly as for training batches, so the ranks' and microbatches' rows partition the
//   batch in equal parts, and the mean over them of their batch means is the global batch's
//   mean. So dp = 1 and dp = N evaluate the same windows and report the same loss (up to
//   float summation order).
#pragma once

#include "runtime/exec/ProgramExecutor.h"

#include <cstdint>
#include <functional>
#include <string>

namespace tessel::trainer {

/// Feeds held-out items [first, first + count), in the set's order, to the model inputs of
/// `function` (count rows of a batch).
using FeedItems = std::function<void(rt::ProgramExecutor& ex, const std::string& function,
                                     int64_t first, int64_t count)>;

/// A fixed validation set (see the promise) as this rank sees it.
struct ValidationFeeder {
  int64_t batches = 0;     // whole global batches the set holds
  int64_t batchRows = 0;   // B: items per global batch
  int64_t items = 0;       // items in the held-out data (batches * B of them are used at most)
  int64_t microsteps = 1;  // k: @forward runs per global batch
  std::string what;        // what an item is, for the report ("windows of 65 bytes ...")
  /// Feeds this rank's rows of microbatch `micro` of global batch `batch` to `function`.
  std::function<void(rt::ProgramExecutor& ex, const std::string& function, int64_t batch,
                     int64_t micro)>
      feed;
};

/// The validation set of `items` held-out items in global batches of `batch` rows, for rank
/// `rank` of `world` running `microsteps` microbatches per batch. Throws DataError (naming
/// `what`, the count and B) when items < batch, and std::invalid_argument when batch is not
/// divisible by world * microsteps.
ValidationFeeder orderedValidation(int64_t items, int64_t batch, int rank, int world,
                                   int64_t microsteps, std::string what, FeedItems feedItems);

/// The global batches an evaluation runs for --eval-batches `requested`: all of the set's
/// for 0 or for more than it holds, else `requested`.
int64_t evaluationBatches(int64_t requested, const ValidationFeeder& v);

/// One line for the log: which items an evaluation of `batches` global batches uses and how
/// many of the set's are left out, e.g. "validation: the first 128 of 1560 windows of 65
/// bytes of the held-out split (8 global batches of 16), the same on every evaluation".
std::string describeValidation(const ValidationFeeder& v, int64_t batches);

/// This rank's mean @forward loss over global batches [0, batches) of `v`, each run as
/// v.microsteps microbatches (a mean of equal-size batch means).
double evaluate(rt::ProgramExecutor& ex, const ValidationFeeder& v, int64_t batches);

}  // namespace tessel::trainer
