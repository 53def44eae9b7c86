// Deterministic, counter-based parameter initialisation (see Init.h for the promise).
//
// Algorithm for element i (flat index in the global tensor) of parameter `name` with `seed`:
//   1. h = FNV-1a 64 of the name's bytes.
//   2. key = splitmix64(h ^ splitmix64(seed)): two rounds of a bijective mixer, so that nearby
//      seeds and names sharing a prefix still give unrelated keys; Philox key
//      (k0, k1) = (low 32 bits, high 32 bits).
//   3. Pair p = i / 2; (w0, w1, w2, w3) = Philox-4x32-10 of counter (low 32 bits of p, high 32
//      bits of p, 0, 0) under that key.
//   4. Two uniforms in (0, 1] from the top 53 bits of the 64-bit words w1:w0 and w3:w2:
//        u1 = ((w1:w0 >> 11) + 1) / 2^53,  u2 = ((w3:w2 >> 11) + 1) / 2^53
//      (excluding 0 keeps log(u1) finite).
//   5. Normal: r = sqrt(-2 ln u1); element 2p = std * r cos(2 pi u2), element 2p+1 =
//      std * r sin(2 pi u2) (Box-Muller: the pair is two independent standard normals).
// Zeros and Ones are exact constants. The integer part is identical on every platform; the
// normals go through std::log, cos and sin in double and are rounded to float, so they agree
// across C libraries to within a float ulp or so, and bitwise on the same library.
#include "runtime/Init.h"
#include "runtime/numeric/Fnv1a.h"
#include "runtime/numeric/Philox.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tessel {
namespace {

/// splitmix64's output function (Steele, Lea, Flood 2014), one step from state x.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A uniform double in (0, 1] from the top 53 bits of the 64-bit word hi:lo.
double uniform53(uint32_t lo, uint32_t hi) {
  const uint64_t word = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>((word >> 11) + 1) * 0x1p-53;
}

/// The Box-Muller pair (elements 2p and 2p + 1, before scaling by std) of pair index p.
struct NormalPair {
  double cosine, sine;
};
NormalPair normalPair(const numeric::PhiloxKey& key, uint64_t p) {
  const numeric::PhiloxCounter w =
      numeric::philox4x32_10({static_cast<uint32_t>(p), static_cast<uint32_t>(p >> 32), 0u, 0u}, key);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double r = std::sqrt(-2.0 * std::log(uniform53(w[0], w[1])));
  const double angle = kTwoPi * uniform53(w[2], w[3]);
  return {r * std::cos(angle), r * std::sin(angle)};
}

std::invalid_argument invalid(std::string_view name, const std::string& problem) {
  return std::invalid_argument("initParameter: " + problem + " for parameter '" + std::string(name) + "'");
}

/// Elements [lo, hi) of a normal parameter with Philox key `key` into out[0, hi - lo): one
/// Philox call per pair, an odd start or end using one half of its pair.
void normalRange(float* out, int64_t lo, int64_t hi, const numeric::PhiloxKey& key, double stddev) {
  for (int64_t i = lo; i < hi;) {
    const NormalPair z = normalPair(key, static_cast<uint64_t>(i) / 2);
    if (i % 2 == 0) {
      out[i - lo] = static_cast<float>(stddev * z.cosine);
      if (++i == hi) break;
    }
    out[i - lo] = static_cast<float>(stddev * z.sine);
    ++i;
  }
}

}  // namespace

void initParameterRange(float* out, int64_t first, int64_t n, InitKind kind, double stddev, uint64_t seed,
                        std::string_view name) {
  // 2^62 keeps first + n from overflowing and is far beyond any tensor (2^62 floats = 16 EiB).
  constexpr int64_t kMaxIndex = int64_t{1} << 62;
  if (n < 0) throw invalid(name, "negative element count " + std::to_string(n));
  if (first < 0 || first > kMaxIndex || n > kMaxIndex - first)
    throw invalid(name, "element range [" + std::to_string(first) + ", +" + std::to_string(n) +
                            ") outside [0, 2^62)");
  if (n > 0 && out == nullptr) throw invalid(name, "null output");
  switch (kind) {
    case InitKind::Zeros:
      for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
      return;
    case InitKind::Ones:
      for (int64_t i = 0; i < n; ++i) out[i] = 1.0f;
      return;
    case InitKind::Normal:
      break;
  }
  if (!(stddev >= 0.0) || std::isinf(stddev))
    throw invalid(name, "standard deviation " + std::to_string(stddev) + " is not a finite non-negative number");
  const uint64_t key64 = splitmix64(numeric::fnv1a(numeric::kFnv1aOffsetBasis, name) ^ splitmix64(seed));
  const numeric::PhiloxKey key{static_cast<uint32_t>(key64), static_cast<uint32_t>(key64 >> 32)};
  // Element i depends only on (key, i), so chunks fill in parallel with the same bits as one
  // serial pass (a pair split by a chunk boundary is computed by both chunks, identically).
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = first + c * kChunk, hi = std::min(first + n, lo + kChunk);
    normalRange(out + (lo - first), lo, hi, key, stddev);
  }
}

void initParameter(float* out, int64_t n, InitKind kind, double stddev, uint64_t seed, std::string_view name) {
  initParameterRange(out, 0, n, kind, stddev, seed, name);
}

std::vector<float> initParameter(int64_t n, InitKind kind, double stddev, uint64_t seed,
                                 std::string_view name) {
  if (n < 0) throw invalid(name, "negative element count " + std::to_string(n));
  std::vector<float> values(static_cast<size_t>(n));
  initParameter(values.data(), n, kind, stddev, seed, name);
  return values;
}

}  // namespace tessel
