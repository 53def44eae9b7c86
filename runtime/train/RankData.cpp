// A rank's data; see RankData.h.
#include "runtime/train/RankData.h"

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

}  // namespace tessel::trainer
