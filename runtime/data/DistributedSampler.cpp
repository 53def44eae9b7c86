// The distributed sampler (see DistributedSampler.h for the promise and the permutation).
#include "runtime/data/DistributedSampler.h"

#include "runtime/comm/Communicator.h"

#include <fmt/format.h>

#include <random>
#include <utility>

namespace tessel {
namespace {

/// Throws DataError unless the arguments describe a valid sharded batch.
void checkArguments(int64_t n, int64_t batch, int rank, int world) {
  if (n < 1)
    throw DataError(fmt::format("the sampler needs at least one sample, got {}", n));
  if (world < 1)
    throw DataError(fmt::format("the data-parallel degree must be at least 1, got {}", world));
  if (rank < 0 || rank >= world)
    throw DataError(fmt::format("rank {} is outside [0, {})", rank, world));
  if (batch < 1)
    throw DataError(fmt::format("the global batch size must be at least 1, got {}", batch));
  if (batch % world != 0)
    throw DataError(fmt::format(
        "the global batch size {} is not divisible by the data-parallel degree {}: every rank "
        "needs the same local batch size",
        batch, world));
}

/// A uniform integer in [0, m), m >= 1: rng() mod m, redrawing the values below
/// (2^64 - m) mod m so that every residue is equally likely.
uint64_t below(std::mt19937_64& rng, uint64_t m) {
  const uint64_t threshold = (0 - m) % m;
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold) return r % m;
  }
}

void checkStep(int64_t step) {
  if (step < 0) throw DataError(fmt::format("the step must be >= 0, got {}", step));
}

}  // namespace

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

DistributedSampler::DistributedSampler(int64_t numSamples, int64_t globalBatch, int rank,
                                       int world, uint64_t seed)
    : n_(numSamples), batch_(globalBatch), rank_(rank), world_(world), seed_(seed) {
  checkArguments(numSamples, globalBatch, rank, world);
  if (globalBatch > numSamples)
    throw DataError(fmt::format(
        "the global batch size {} exceeds the {} samples: an epoch would hold no complete "
        "batch (the last partial batch of an epoch is dropped)",
        globalBatch, numSamples));
}

std::vector<int64_t> DistributedSampler::epochOrder(int64_t epoch) const {
  if (epoch < 0) throw DataError(fmt::format("the epoch must be >= 0, got {}", epoch));
  return order(epoch);
}

const std::vector<int64_t>& DistributedSampler::order(int64_t epoch) const {
  if (epoch == cachedEpoch_) return cached_;
  std::mt19937_64 rng(splitmix64(splitmix64(seed_) ^ static_cast<uint64_t>(epoch)));
  cached_.resize(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) cached_[static_cast<size_t>(i)] = i;
  for (int64_t i = n_ - 1; i >= 1; --i) {
    auto j = static_cast<int64_t>(below(rng, static_cast<uint64_t>(i + 1)));
    std::swap(cached_[static_cast<size_t>(i)], cached_[static_cast<size_t>(j)]);
  }
  cachedEpoch_ = epoch;
  return cached_;
}

std::vector<int64_t> DistributedSampler::globalBatch(int64_t step) const {
  checkStep(step);
  const std::vector<int64_t>& p = order(epochOf(step));
  const int64_t first = (step % batchesPerEpoch()) * batch_;
  return {p.begin() + first, p.begin() + first + batch_};
}

std::vector<int64_t> DistributedSampler::rankBatch(int64_t step) const {
  checkStep(step);
  const std::vector<int64_t>& p = order(epochOf(step));
  const int64_t first = (step % batchesPerEpoch()) * batch_;
  auto [lo, hi] = rt::shardRange(batch_, rank_, world_);
  return {p.begin() + first + lo, p.begin() + first + hi};
}

int64_t evalBatchCount(int64_t numSamples, int64_t globalBatch) {
  checkArguments(numSamples, globalBatch, 0, 1);
  return (numSamples + globalBatch - 1) / globalBatch;
}

EvalShard evalShard(int64_t numSamples, int64_t globalBatch, int rank, int world, int64_t batch) {
  checkArguments(numSamples, globalBatch, rank, world);
  const int64_t count = evalBatchCount(numSamples, globalBatch);
  if (batch < 0 || batch >= count)
    throw DataError(fmt::format("evaluation batch {} is outside [0, {}) ({} samples, batches of {})",
                                batch, count, numSamples, globalBatch));
  auto [lo, hi] = rt::shardRange(globalBatch, rank, world);
  EvalShard shard;
  for (int64_t pos = batch * globalBatch + lo; pos < batch * globalBatch + hi; ++pos) {
    const bool real = pos < numSamples;
    shard.ids.push_back(real ? pos : pos % numSamples);
    shard.valid.push_back(real ? 1 : 0);
  }
  return shard;
}

int64_t textWindowCount(int64_t splitBytes, int64_t seq) {
  if (seq < 1) throw DataError(fmt::format("sequence length must be at least 1, got {}", seq));
  return splitBytes < seq + 1 ? 0 : (splitBytes - 1) / seq;
}

}  // namespace tessel
