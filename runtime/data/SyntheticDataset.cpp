// The synthetic classification set (see SyntheticDataset.h for the promise and the draws).
#include "runtime/data/SyntheticDataset.h"

#include "runtime/data/DistributedSampler.h"  // splitmix64
#include "runtime/io/JsonValues.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>

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

void checkSyntheticOptions(const SyntheticOptions& o) {
  auto bad = [](const char* what, auto value, const std::string& rule) {
    throw DataError(fmt::format("synthetic data: {} must be {}, got {}", what, rule, value));
  };
  auto range = [](int64_t lo, int64_t hi) { return fmt::format("from {} to {}", lo, hi); };
  if (o.samples < 1 || o.samples > kMaxSyntheticSamples)
    bad("the sample count", o.samples, range(1, kMaxSyntheticSamples));
  if (o.heldOut < 1 || o.heldOut > kMaxSyntheticSamples)
    bad("the held-out sample count", o.heldOut, range(1, kMaxSyntheticSamples));
  if (o.features < 1 || o.features > kMaxSyntheticFeatures)
    bad("the feature count", o.features, range(1, kMaxSyntheticFeatures));
  if (o.classes < 2 || o.classes > kMaxSyntheticClasses)
    bad("the class count", o.classes, range(2, kMaxSyntheticClasses));
  if (!(o.spread > 0 && o.spread <= kMaxSyntheticDeviation))
    bad("the centre spread", o.spread, fmt::format("finite, > 0 and <= {:g}", kMaxSyntheticDeviation));
  if (!(o.noise >= 0 && o.noise <= kMaxSyntheticDeviation))
    bad("the noise", o.noise, fmt::format("finite, >= 0 and <= {:g}", kMaxSyntheticDeviation));
  // Both splits' features, and the centres, stay within 2^31 values each (f32 and f64 vectors
  // indexed by rows x F). Compared by division, so that no product or sum of options overflows
  // whatever the ranges above are.
  const int64_t limit = int64_t{1} << 31, rows = limit / o.features;
  if (o.samples > rows || o.heldOut > rows - o.samples)
    throw DataError(fmt::format("synthetic data: ({} samples + {} held-out samples) x {} features exceed {} values",
                                o.samples, o.heldOut, o.features, limit));
  if (o.classes > rows)
    throw DataError(fmt::format("synthetic data: {} class centres x {} features exceed {} values", o.classes,
                                o.features, limit));
}

nlohmann::json syntheticConfig(const SyntheticOptions& o) {
  return {{"samples", o.samples}, {"held_out", o.heldOut}, {"features", o.features},
          {"classes", o.classes}, {"noise", o.noise},      {"spread", o.spread}};
}

SyntheticOptions syntheticOptions(const nlohmann::json& config) {
  if (!config.is_object())
    throw std::runtime_error(fmt::format("config is {}; the synthetic data needs an object of its options",
                                         abbreviated(config.dump())));
  auto integer = [&](const char* key, int64_t lo, int64_t hi) {
    if (!config.contains(key) || !jsonIntegerIn(config.at(key), lo, hi))
      throw std::runtime_error(fmt::format("config.{} is {}; the synthetic data needs an integer from {} to {}", key,
                                           jsonShown(config, key), lo, hi));
    return config.at(key).get<int64_t>();
  };
  auto deviation = [&](const char* key, bool positive) {
    if (!config.contains(key) || !jsonNumberIn(config.at(key), 0, kMaxSyntheticDeviation, positive))
      throw std::runtime_error(fmt::format("config.{} is {}; the synthetic data needs a number {} 0 and <= {:g}", key,
                                           jsonShown(config, key), positive ? ">" : ">=", kMaxSyntheticDeviation));
    return config.at(key).get<double>();
  };
  SyntheticOptions o;
  o.samples = integer("samples", 1, kMaxSyntheticSamples);
  o.heldOut = integer("held_out", 1, kMaxSyntheticSamples);
  o.features = integer("features", 1, kMaxSyntheticFeatures);
  o.classes = integer("classes", 2, kMaxSyntheticClasses);
  o.noise = deviation("noise", false);
  o.spread = deviation("spread", true);
  try {
    checkSyntheticOptions(o);
  } catch (const DataError& e) {
    throw std::runtime_error(fmt::format("config: {}", e.what()));
  }
  return o;
}

SyntheticSplits makeSyntheticClassification(const SyntheticOptions& options, uint64_t seed) {
  checkSyntheticOptions(options);
  Draws draws(seed);
  const std::vector<double> centres = drawCentres(draws, options);
  SyntheticSplits s;
  s.train = drawSplit(draws, options, centres, options.samples);
  s.heldOut = drawSplit(draws, options, centres, options.heldOut);
  return s;
}

std::vector<double> syntheticCentres(const SyntheticOptions& options, uint64_t seed) {
  checkSyntheticOptions(options);
  Draws draws(seed);
  return drawCentres(draws, options);
}

}  // namespace tessel
