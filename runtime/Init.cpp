// Deterministic parameter initialisation (see Init.h for the promise).
//
// Algorithm for a parameter `name` with `seed`:
//   1. h = FNV-1a 64 of the name's bytes.
//   2. s = splitmix64(h ^ splitmix64(seed)): two rounds of a bijective mixer, so that nearby
//      seeds and names sharing a prefix still give unrelated generator states.
//   3. rng = std::mt19937_64(s).
//   4. Normal: element pairs (2k, 2k+1) come from one Box-Muller step on two uniforms
//      u1, u2 in (0, 1] built from the top 53 bits of one rng() each:
//        r = sqrt(-2 ln u1),  x[2k] = std * r cos(2 pi u2),  x[2k+1] = std * r sin(2 pi u2).
//      Element i therefore uses draws 2*(i/2) and 2*(i/2)+1 only, so a prefix of the stream
//      is the same whatever n is. An odd n drops the last sine.
// The integer stream is identical on every platform; the normals go through std::log, cos and
// sin in double and are rounded to float, so they agree across C libraries to within a float
// ulp or so, and bitwise on the same library.
#include "runtime/Init.h"
#include "runtime/numeric/Fnv1a.h"

#include <cmath>
#include <random>
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

/// A uniform double in (0, 1]: (k + 1) / 2^53 for k the top 53 bits of one draw. Excluding 0
/// keeps log(u1) finite.
double uniform53(std::mt19937_64& rng) { return static_cast<double>((rng() >> 11) + 1) * 0x1p-53; }

}  // namespace

void initParameter(float* out, int64_t n, InitKind kind, double stddev, uint64_t seed,
                   std::string_view name) {
  if (n < 0)
    throw std::invalid_argument("initParameter: negative element count " + std::to_string(n) +
                                " for parameter '" + std::string(name) + "'");
  if (n > 0 && out == nullptr)
    throw std::invalid_argument("initParameter: null output for parameter '" + std::string(name) +
                                "'");
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
    throw std::invalid_argument("initParameter: standard deviation " + std::to_string(stddev) +
                                " for parameter '" + std::string(name) +
                                "' is not a finite non-negative number");
  std::mt19937_64 rng(splitmix64(numeric::fnv1a(numeric::kFnv1aOffsetBasis, name) ^ splitmix64(seed)));
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = uniform53(rng);
    const double u2 = uniform53(rng);
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(stddev * r * std::cos(kTwoPi * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(stddev * r * std::sin(kTwoPi * u2));
  }
}

std::vector<float> initParameter(int64_t n, InitKind kind, double stddev, uint64_t seed,
                                 std::string_view name) {
  if (n < 0)
    throw std::invalid_argument("initParameter: negative element count " + std::to_string(n) +
                                " for parameter '" + std::string(name) + "'");
  std::vector<float> values(static_cast<size_t>(n));
  initParameter(values.data(), n, kind, stddev, seed, name);
  return values;
}

}  // namespace tessel
