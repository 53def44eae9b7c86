// Image batches; see ImageBatches.h.
#include "runtime/train/ImageBatches.h"

#include "runtime/data/DistributedSampler.h"
#include "runtime/train/TextBatches.h"  // microbatchRows

#include <fmt/format.h>
#include <memory>
#include <numeric>

namespace tessel::trainer {

namespace {

/// `b` into inputs `first` (images) and first + 1 (labels).
void feed(rt::ProgramExecutor& ex, const std::string& fn, size_t first, const ImageBatch& b) {
  ex.setInput(fn, first, b.images.data(), b.images.size() * sizeof(float));
  ex.setInput(fn, first + 1, b.labels.data(), b.labels.size() * sizeof(int32_t));
}

}  // namespace

void requireImageBatch(const ImageBatchOptions& o) {
  if (o.batch > o.train->count || o.batch > o.test->count)
    throw DataError(fmt::format("--batch {} is larger than the data: {} training and {} test images", o.batch,
                                o.train->count, o.test->count));
}

BatchFeeder imageTrainFeeder(const ImageBatchOptions& o) {
  requireImageBatch(o);
  // As for text: the sampler sees the whole global batch and every rank takes its rows.
  auto sampler = std::make_shared<DistributedSampler>(o.train->count, o.batch, 0, 1, o.seed);
  auto call = std::make_shared<int64_t>(o.firstStep * o.microsteps);  // calls so far
  return [o, sampler, call](rt::ProgramExecutor& ex, const std::string& fn, size_t firstInput) {
    const int64_t step = *call / o.microsteps, micro = *call % o.microsteps;
    ++*call;
    auto [first, last] = microbatchRows(o.batch, o.rank, o.world, micro, o.microsteps);
    feed(ex, fn, firstInput, gatherImages(*o.train, sampler->globalBatch(step), first, last - first));
  };
}

ValidationFeeder imageValFeeder(const ImageBatchOptions& o) {
  requireImageBatch(o);
  auto order = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(o.test->count));
  std::iota(order->begin(), order->end(), 0);
  const ImageDataset* test = o.test;
  return orderedValidation(test->count, o.batch, o.rank, o.world, o.microsteps, o.heldOutName,
                           [test, order](rt::ProgramExecutor& ex, const std::string& fn, int64_t first,
                                         int64_t count) { feed(ex, fn, 0, gatherImages(*test, *order, first, count)); });
}

}  // namespace tessel::trainer
