// The synthetic classification set (see SyntheticDataset.h for the promise and the draws).
#include "runtime/data/SyntheticDataset.h"

#include "runtime/data/DistributedSampler.h"  // splitmix64

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <random>

namespace tessel {
namespace {

/// The generator of the promise, in its draw order.
class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(splitmix64(splitmix64(seed) ^ 0x73796e7468657469ull)) {}

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  /// One standard normal (Box-Muller; 1 - u1 is in (0, 1], so the log is finite).
  double normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

  /// Uniform in [0, m), m >= 1, by rejection (no modulo bias).
  uint64_t below(uint64_t m) {
    const uint64_t threshold = (0 - m) % m;
    for (;;)
      if (uint64_t r = rng_(); r >= threshold) return r % m;
  }

 private:
  std::mt19937_64 rng_;
};

void check(const SyntheticOptions& o) {
  auto bad = [](const char* what, auto value, const char* rule) {
    throw DataError(fmt::format("synthetic data: {} must be {}, got {}", what, rule, value));
  };
  if (o.samples < 1) bad("the sample count", o.samples, ">= 1");
  if (o.heldOut < 1) bad("the held-out sample count", o.heldOut, ">= 1");
  if (o.features < 1) bad("the feature count", o.features, ">= 1");
  if (o.classes < 2) bad("the class count", o.classes, ">= 2");
  if (!(o.spread > 0) || !std::isfinite(o.spread)) bad("the centre spread", o.spread, "finite and > 0");
  if (!(o.noise >= 0) || !std::isfinite(o.noise)) bad("the noise", o.noise, "finite and >= 0");
  // Both splits' features together stay under 2^31 values (f32 vectors indexed by int64 rows x F).
  const int64_t limit = int64_t{1} << 31;
  if ((o.samples + o.heldOut) > limit / o.features)
    throw DataError(fmt::format("synthetic data: {} x {} features exceed {} values", o.samples + o.heldOut,
                                o.features, limit));
}

std::vector<double> drawCentres(Draws& draws, const SyntheticOptions& o) {
  std::vector<double> centres(static_cast<size_t>(o.classes * o.features));
  for (double& c : centres) c = o.spread * draws.normal();
  return centres;
}

/// `count` samples of the mixture into a dataset of 1 x F rows.
ImageDataset drawSplit(Draws& draws, const SyntheticOptions& o, const std::vector<double>& centres, int64_t count) {
  ImageDataset d;
  d.count = count;
  d.rows = 1;
  d.cols = o.features;
  d.images.reserve(static_cast<size_t>(count * o.features));
  d.labels.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const auto label = static_cast<int64_t>(draws.below(static_cast<uint64_t>(o.classes)));
    d.labels.push_back(static_cast<int32_t>(label));
    const double* centre = centres.data() + label * o.features;
    for (int64_t f = 0; f < o.features; ++f)
      d.images.push_back(static_cast<float>(centre[f] + o.noise * draws.normal()));
  }
  return d;
}

}  // namespace

SyntheticSplits makeSyntheticClassification(const SyntheticOptions& options, uint64_t seed) {
  check(options);
  Draws draws(seed);
  const std::vector<double> centres = drawCentres(draws, options);
  SyntheticSplits s;
  s.train = drawSplit(draws, options, centres, options.samples);
  s.heldOut = drawSplit(draws, options, centres, options.heldOut);
  return s;
}

std::vector<double> syntheticCentres(const SyntheticOptions& options, uint64_t seed) {
  check(options);
  Draws draws(seed);
  return drawCentres(draws, options);
}

}  // namespace tessel
