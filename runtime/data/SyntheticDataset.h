// A synthetic classification data set: features and labels drawn deterministically from a
// seed, learnable by construction (a Gaussian mixture with one component per class).
//
// Promise:
// - K class centres c_k in R^F are drawn first, each coordinate N(0, spread^2). Then every
//   sample i (training samples first, then the held-out ones) draws its label y_i uniformly
//   from [0, K) and its features x_i = c_{y_i} + noise * z_i, z_i ~ N(0, I_F). Both splits come
//   from the same distribution, so the held-out loss measures generalisation.
// - The draws, written down so that any implementation can reproduce them:
//     rng     = std::mt19937_64(splitmix64(splitmix64(seed) XOR 0x73796e7468657469))  ("syntheti")
//     u()     = (rng() >> 11) * 2^-53, uniform in [0, 1)
//     normal  = Box-Muller: sqrt(-2 ln(1 - u1)) cos(2 pi u2), one (u1, u2) pair per normal
//     label   = rng() mod K, redrawing values < (2^64 - K) mod K (unbiased rejection)
//   in the order: the K x F centre coordinates row-major, then per sample its label and its F
//   noise draws. std::normal_distribution is not used: its outputs differ between standard
//   libraries. Values are computed in double and stored as f32.
// - The same (options, seed) give the same bytes on every rank and every run of a build; the
//   data does not depend on the world size. (log and cos are the C library's: another library
//   may round a last bit differently before the f32 rounding. Ranks on hosts that differ so are
//   caught by the trainer's data fingerprint check, runtime/train/Ranks.h.) Which rows a rank trains on at each step is the distributed
//   sampler's business (runtime/data/DistributedSampler.h), fed as an ImageDataset whose
//   "images" are 1 x F feature rows (runtime/train/ImageBatches.h).
// Every bad option throws tessel::DataError naming it: each count outside its range below, and
// sizes whose arrays would pass 2^31 values ((N + held-out) x F features, K x F centre
// coordinates), checked without overflow for any int64 option.
// - The options as a bundle's "config" entries (syntheticConfig, syntheticOptions): the labs
//   record them in bundle.json so that tessel-run draws the same data.
#pragma once

#include "runtime/data/Idx.h"  // ImageDataset: rows of f32 features with an i32 label

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace tessel {

/// The most training (or held-out) samples a synthetic set has: 2^24.
inline constexpr int64_t kMaxSyntheticSamples = int64_t{1} << 24;
/// The most features F, and the most classes K, a synthetic set has: 2^16 each.
inline constexpr int64_t kMaxSyntheticFeatures = int64_t{1} << 16;
inline constexpr int64_t kMaxSyntheticClasses = int64_t{1} << 16;
/// The largest centre spread and feature noise (standard deviations) a synthetic set takes.
inline constexpr double kMaxSyntheticDeviation = 1e6;

/// The shape and difficulty of a synthetic classification set.
struct SyntheticOptions {
  int64_t samples = 1000;   // N training samples, 1 .. kMaxSyntheticSamples
  int64_t heldOut = 256;    // held-out samples, 1 .. kMaxSyntheticSamples, drawn after the training ones
  int64_t features = 64;    // F, 1 .. kMaxSyntheticFeatures
  int64_t classes = 5;      // K, 2 .. kMaxSyntheticClasses
  double spread = 1.0;      // standard deviation of each centre coordinate, (0, kMaxSyntheticDeviation]
  double noise = 2.0;       // standard deviation of each feature around its centre, [0, kMaxSyntheticDeviation]
};

/// The two splits, each an ImageDataset of count samples with rows = 1, cols = F.
struct SyntheticSplits {
  ImageDataset train, heldOut;
};

/// Draws both splits from `seed` (see the promise). Throws DataError for a bad option.
SyntheticSplits makeSyntheticClassification(const SyntheticOptions& options, uint64_t seed);

/// The K class centres [K, F] row-major that makeSyntheticClassification draws for `seed`
/// (its first K x F normals, times spread): for tests and for explaining the data.
std::vector<double> syntheticCentres(const SyntheticOptions& options, uint64_t seed);

/// Throws DataError naming the first bad option (see the promise); the check both functions
/// above make before drawing anything.
void checkSyntheticOptions(const SyntheticOptions& options);

/// The options as entries of a bundle's "config" (bundle.json): "samples", "held_out",
/// "features", "classes", "noise" and "spread".
nlohmann::json syntheticConfig(const SyntheticOptions& options);

/// The options back from a bundle's "config". Throws std::runtime_error with one line naming
/// the entry ("config.classes is 4611686018427387904; the synthetic data needs an integer from
/// 2 to 65536") when the config is not an object, an entry is missing, of another type
/// (a string, a float for a count) or outside its range, or the options together fail
/// checkSyntheticOptions.
SyntheticOptions syntheticOptions(const nlohmann::json& config);

}  // namespace tessel
