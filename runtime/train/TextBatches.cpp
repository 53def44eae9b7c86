// Text batches; see TextBatches.h.
#include "runtime/train/TextBatches.h"

#include "runtime/comm/Communicator.h"
#include "runtime/data/DistributedSampler.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <stdexcept>

namespace tessel::trainer {

std::pair<int64_t, int64_t> microbatchRows(int64_t batch, int rank, int world, int64_t micro,
                                           int64_t microsteps) {
  auto [first, last] = rt::shardRange(batch, rank, world);
  auto [a, b] = rt::shardRange(last - first, static_cast<int>(micro), static_cast<int>(microsteps));
  return {first + a, first + b};
}

namespace {

/// Rows [rows.first, rows.second) of `b` into inputs `first` (tokens) and first + 1 (targets).
void feedRows(rt::ProgramExecutor& ex, const std::string& fn, size_t first, const TokenBatch& b, int64_t seq,
              std::pair<int64_t, int64_t> rows) {
  size_t offset = static_cast<size_t>(rows.first * seq);
  size_t bytes = static_cast<size_t>((rows.second - rows.first) * seq) * sizeof(int32_t);
  ex.setInput(fn, first, b.tokens.data() + offset, bytes);
  ex.setInput(fn, first + 1, b.targets.data() + offset, bytes);
}

}  // namespace

BatchFeeder textTrainFeeder(const TextBatchOptions& o) {
  // The sampler sees the whole global batch (rank 0 of 1): every rank computes the same
  // global batch and takes its rows, which is rankBatch's slice split into microsteps.
  auto sampler = std::make_shared<DistributedSampler>(
      textWindowCount(o.data->trainSize(), o.seq), o.batch, 0, 1, o.seed);
  auto call = std::make_shared<int64_t>(o.firstStep * o.microsteps);  // calls so far
  return [o, sampler, call](rt::ProgramExecutor& ex, const std::string& fn, size_t firstInput) {
    const int64_t step = *call / o.microsteps, micro = *call % o.microsteps;
    ++*call;
    auto rows = microbatchRows(o.batch, o.rank, o.world, micro, o.microsteps);
    std::vector<int64_t> ids = sampler->globalBatch(step), offsets;
    for (int64_t i = rows.first; i < rows.second; ++i)
      offsets.push_back(textWindowOffset(ids[static_cast<size_t>(i)], o.seq));
    TokenBatch b = o.data->windows(Split::Train, offsets, o.seq);
    feedRows(ex, fn, firstInput, b, o.seq, {0, rows.second - rows.first});
  };
}

ValidationFeeder textValFeeder(const TextBatchOptions& o) {
  const TextDataset* data = o.data;
  const int64_t seq = o.seq;
  return orderedValidation(
      textWindowCount(data->valSize(), seq), o.batch, o.rank, o.world, o.microsteps,
      fmt::format("windows of {} bytes of the held-out split", seq + 1),
      [data, seq](rt::ProgramExecutor& ex, const std::string& fn, int64_t first, int64_t count) {
        std::vector<int64_t> offsets;
        for (int64_t w = first; w < first + count; ++w) offsets.push_back(textWindowOffset(w, seq));
        feedRows(ex, fn, 0, data->windows(Split::Val, offsets, seq), seq, {0, count});
      });
}

}  // namespace tessel::trainer
