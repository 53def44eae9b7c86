// What a rank trains and validates on, made the same way by the JIT trainers (dsl/trainer,
// through the examples' recipes) and by tessel-run, so that a bundle is fed exactly the rows,
// described and fingerprinted exactly as, the JIT run. MLIR-free.
#pragma once

#include "runtime/data/SyntheticDataset.h"
#include "runtime/train/ImageBatches.h"
#include "runtime/train/Loop.h"
#include "runtime/train/Ranks.h"
#include "runtime/train/TextBatches.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::trainer {

/// A rank's data: its feeders, and what identifies and describes the data.
struct RankData {
  BatchFeeder train;            // the loop's feeder of this rank's training rows
  ValidationFeeder val;         // this rank's rows of the fixed validation set (Validation.h)
  DataFingerprint fingerprint;  // compared across ranks before training
  std::string where;            // the data as given, e.g. "'data.txt'", for a mismatch's message
  std::string describe;         // for the header line, e.g. "data 'x.txt' (1115394 bytes)"
  int64_t itemsPerStep = 0;     // tokens or images per optimizer step (global)
  std::string unit = "tok/s";   // the throughput column's unit
};

/// The part of the global batch world rank `rank` feeds on a mesh (axes in mesh order, the
/// last fastest, as runtime/comm/DeviceMesh.h): {its coordinate on `batchAxis`, that axis's
/// size}, or {0, 1} when the mesh has no such axis. Ranks that differ only on other axes (the
/// tensor-parallel peers of one data-parallel replica) feed the same rows. Throws
/// std::invalid_argument for a rank outside the mesh.
std::pair<int, int> batchShard(const std::vector<std::pair<std::string, int64_t>>& mesh,
                               const std::string& batchAxis, int rank);

/// The same when the batch is split over several axes (HSDP's dp and fsdp): the rank's
/// row-major coordinate over the mesh's axes named in `batchAxes` (taken in mesh order) and
/// the product of their sizes; {0, 1} when none is an axis of the mesh.
std::pair<int, int> batchShard(const std::vector<std::pair<std::string, int64_t>>& mesh,
                               const std::vector<std::string>& batchAxes, int rank);

/// Byte text (TextBatches.h): B x T tokens per step, "data '<path>' (<n> bytes)". `o.data`
/// must outlive the feeders.
RankData textRankData(const TextBatchOptions& o);

/// Synthetic classification data (runtime/data/SyntheticDataset.h; the labs, examples/labs):
/// draws `options`' splits from `o.seed` into `splits`, which must outlive the feeders, and feeds
/// them as ImageBatches.h feeds images (o.train and o.test are set here): B samples per step,
/// "synthetic data: <n> training and <m> held-out samples, ...". Throws DataError naming --batch,
/// --samples and --held-out when a split is smaller than the global batch.
RankData syntheticRankData(const SyntheticOptions& options, SyntheticSplits& splits, ImageBatchOptions o);

/// The synthetic data's entries of a bundle's "config" and the options back from them
/// (runtime/data/SyntheticDataset.h, which says what each refuses).
using tessel::syntheticConfig;
using tessel::syntheticOptions;

/// Images (ImageBatches.h): B images per step, "<n> training and <m> test images"; `where` is
/// the folder as given. `o.train` and `o.test` must outlive the feeders.
RankData imageRankData(const ImageBatchOptions& o, const std::string& where);

}  // namespace tessel::trainer
