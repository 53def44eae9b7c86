// A rank's data; see RankData.h.
#include "runtime/train/RankData.h"

#include <algorithm>

#include <stdexcept>

#include <fmt/format.h>

namespace tessel::trainer {

RankData textRankData(const TextBatchOptions& o) {
  return RankData{textTrainFeeder(o),
                  textValFeeder(o),
                  fingerprintOf(*o.data),
                  fmt::format("'{}'", o.data->path()),
                  fmt::format("data '{}' ({} bytes)", o.data->path(), o.data->size()),
                  o.batch * o.seq,
                  "tok/s"};
}

RankData imageRankData(const ImageBatchOptions& o, const std::string& where) {
  return RankData{imageTrainFeeder(o),
                  imageValFeeder(o),
                  fingerprintOf({o.train, o.test}),
                  fmt::format("'{}'", where),
                  fmt::format("{} training and {} test images", o.train->count, o.test->count),
                  o.batch,
                  "img/s"};
}

RankData syntheticRankData(const SyntheticOptions& options, SyntheticSplits& splits, ImageBatchOptions o) {
  if (o.batch > options.samples || o.batch > options.heldOut)
    throw DataError(fmt::format("--batch {} is larger than the data: {} training samples (--samples) and {} held-out "
                                "samples (--held-out)",
                                o.batch, options.samples, options.heldOut));
  splits = makeSyntheticClassification(options, o.seed);
  o.train = &splits.train;
  o.test = &splits.heldOut;
  o.heldOutName = "held-out samples";
  RankData r = imageRankData(o, "synthetic");
  r.describe = fmt::format("synthetic data: {} training and {} held-out samples, {} features, {} classes, {} "
                           "batches per epoch",
                           options.samples, options.heldOut, options.features, options.classes,
                           options.samples / o.batch);
  r.unit = "samples/s";
  return r;
}

std::pair<int, int> batchShard(const std::vector<std::pair<std::string, int64_t>>& mesh,
                               const std::string& batchAxis, int rank) {
  return batchShard(mesh, std::vector<std::string>{batchAxis}, rank);
}

std::pair<int, int> batchShard(const std::vector<std::pair<std::string, int64_t>>& mesh,
                               const std::vector<std::string>& batchAxes, int rank) {
  int64_t ranks = 1;
  for (const auto& axis : mesh) ranks *= axis.second;
  if (rank < 0 || rank >= ranks)
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside a mesh of " + std::to_string(ranks) +
                                " ranks");
  // Row-major coordinates, last axis fastest: peel the axes from the last, and number the
  // batch axes' coordinates row-major among themselves.
  int64_t rest = rank, coordinate = 0, size = 1;
  for (size_t i = mesh.size(); i-- > 0;) {
    int64_t c = rest % mesh[i].second;
    rest /= mesh[i].second;
    if (std::find(batchAxes.begin(), batchAxes.end(), mesh[i].first) == batchAxes.end()) continue;
    coordinate += c * size;
    size *= mesh[i].second;
  }
  return {static_cast<int>(coordinate), static_cast<int>(size)};
}

}  // namespace tessel::trainer
