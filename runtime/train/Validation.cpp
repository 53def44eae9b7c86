// Validation on a fixed set; see Validation.h.
#include "runtime/train/Validation.h"

#include "runtime/data/TextDataset.h"
#include "runtime/train/TextBatches.h"

#include <fmt/format.h>
#include <stdexcept>

namespace tessel::trainer {

ValidationFeeder orderedValidation(int64_t items, int64_t batch, int rank, int world,
                                   int64_t microsteps, std::string what, FeedItems feedItems) {
  if (batch < 1 || world < 1 || microsteps < 1 || batch % (world * microsteps) != 0)
    throw std::invalid_argument(fmt::format(
        "validation batch {} is not divisible by {} ranks x {} microbatches", batch, world, microsteps));
  if (items < batch)
    throw DataError(fmt::format("the held-out data has {} {}, fewer than one global batch of {}; "
                                "lower --batch or use more data",
                                items, what, batch));
  ValidationFeeder v;
  v.batches = items / batch;
  v.batchRows = batch;
  v.items = items;
  v.microsteps = microsteps;
  v.what = std::move(what);
  v.feed = [batch, rank, world, microsteps, feedItems = std::move(feedItems)](
               rt::ProgramExecutor& ex, const std::string& function, int64_t b, int64_t micro) {
    auto [first, last] = microbatchRows(batch, rank, world, micro, microsteps);
    feedItems(ex, function, b * batch + first, last - first);
  };
  return v;
}

int64_t evaluationBatches(int64_t requested, const ValidationFeeder& v) {
  return requested <= 0 || requested > v.batches ? v.batches : requested;
}

std::string describeValidation(const ValidationFeeder& v, int64_t batches) {
  const int64_t used = batches * v.batchRows;
  std::string left = used == v.items ? std::string()
                                     : fmt::format("; {} left out", v.items - used);
  return fmt::format("validation: the first {} of {} {} ({} global batches of {}{}), the same on "
                     "every evaluation",
                     used, v.items, v.what, batches, v.batchRows, left);
}

double evaluate(rt::ProgramExecutor& ex, const ValidationFeeder& v, int64_t batches) {
  double sum = 0;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t m = 0; m < v.microsteps; ++m) {
      v.feed(ex, "forward", b, m);
      ex.run("forward");
      sum += ex.outputs("forward").at(0).value();
    }
  return sum / static_cast<double>(batches * v.microsteps);
}

}  // namespace tessel::trainer
