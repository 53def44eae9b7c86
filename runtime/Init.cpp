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
// Zeros and Ones are exact constants. ln, cos and sin are evaluated in double by the
// polynomials below (not the C library's), so the values are the same bits on every machine
// and library; they agree with the C library's formulas to within one float ulp (InitTest).
#include "runtime/Init.h"
#include "runtime/numeric/Fnv1a.h"
#include "runtime/numeric/Philox.h"

#include <algorithm>
#include <bit>
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

// The normals are computed 8 pairs at a time with GCC vector extensions (one Philox call per
// lane), with Tessel's own double-precision log, sin and cos below instead of the C
// library's: the C library's are scalar and were 90% of the start-up of a GPT-2-sized model.
// This file is compiled with -ffp-contract=off and every operation is an IEEE-754 double
// add, multiply, divide, square root or exact conversion, so every build (the AVX-512, AVX2
// and baseline clones chosen at load time, any machine) gives the same bits.
using V8d = double __attribute__((vector_size(64)));
using V8u64 = uint64_t __attribute__((vector_size(64)));
using V8i64 = int64_t __attribute__((vector_size(64)));
constexpr int kLanes = 8;

#define TESSEL_INLINE [[gnu::always_inline]] inline
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(__clang__)
#define TESSEL_INIT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSEL_INIT_CLONES
#endif

/// Philox-4x32-10 (runtime/numeric/Philox.h, the same rounds) of the counters
/// (low 32 bits of p, high 32 bits of p, 0, 0) for 8 pair indices p at once. Each 32-bit word
/// sits in the low half of a 64-bit lane, so every 32 x 32 -> 64-bit product is one
/// unsigned multiply of the lanes' low halves (pmuludq), with no shuffles between rounds.
struct PhiloxWords8 {
  V8u64 w0, w1, w2, w3;  // each < 2^32
};
TESSEL_INLINE PhiloxWords8 philox8(V8u64 p, const numeric::PhiloxKey& key) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kLow = 0xFFFFFFFFu;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  V8u64 c0 = p & kLow, c1 = p >> 32, c2 = {}, c3 = {};
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const V8u64 p0 = (c0 & kLow) * kM0, p1 = (c2 & kLow) * kM1;
    c0 = (p1 >> 32) ^ c1 ^ uint64_t{k0};
    c2 = (p0 >> 32) ^ c3 ^ uint64_t{k1};
    c1 = p1 & kLow;
    c3 = p0 & kLow;
  }
  return {c0, c1, c2, c3};
}

/// ((hi:lo >> 11) + 1) / 2^53: a uniform double in (0, 1] from the top 53 bits of the 64-bit
/// word hi:lo (each < 2^32), exactly: hi 2^21 and (lo >> 11) + 1 are exact doubles and their
/// sum is at most 2^53.
TESSEL_INLINE V8d uniform53(V8u64 lo, V8u64 hi) {
  const V8i64 h = std::bit_cast<V8i64>(hi), l = std::bit_cast<V8i64>((lo >> 11) + 1);
  return (__builtin_convertvector(h, V8d) * 0x1p21 + __builtin_convertvector(l, V8d)) * 0x1p-53;
}

/// ln(u) for normal doubles u > 0: u = 2^e m with m in [sqrt(1/2), sqrt(2)), then
/// ln m = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.1716, as the series
/// 2 f (1 + f^2/3 + f^4/5 + ... + f^20/21), whose first omitted term is below 2^-56 of the
/// sum; ln u = e ln 2 + ln m. Relative error a few double ulps (tested against std::log).
TESSEL_INLINE V8d logPositive(V8d u) {
  const V8u64 bits = std::bit_cast<V8u64>(u);
  V8i64 e = std::bit_cast<V8i64>(bits >> 52) - 1023;
  const V8u64 mantissa = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
  V8d m = std::bit_cast<V8d>(mantissa);  // [1, 2)
  const V8i64 big = m > 1.4142135623730950488;
  m = big ? m * 0.5 : m;
  e = big ? e + 1 : e;
  const V8d f = (m - 1.0) / (m + 1.0), s = f * f;
  V8d series = s * (1.0 / 21) + 1.0 / 19;
  for (double odd : {17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0}) series = series * s + 1.0 / odd;
  return __builtin_convertvector(e, V8d) * 0.69314718055994530942 + 2.0 * f * series;
}

/// cos and sin of 2 pi u for u in (0, 1]: 4u = q + t with q the nearest integer
/// (exact: 4u is exact and |t| <= 1/2 makes t = 4u - q exact), theta = t pi / 2 in
/// [-pi/4, pi/4], Taylor series of sin (to theta^17) and cos (to theta^18), whose first
/// omitted terms are below 2^-60, and the quadrant q mod 4 swaps and negates them.
struct CosSin8 {
  V8d cosine, sine;
};
TESSEL_INLINE CosSin8 cosSinTwoPi(V8d u) {
  const V8d x = u * 4.0;
  const V8d shifted = x + 0x1.8p52;  // round to nearest: q in the low mantissa bits
  const V8u64 q = std::bit_cast<V8u64>(shifted);
  const V8d t = x - (shifted - 0x1.8p52);
  const V8d theta = t * 1.5707963267948966192, z = theta * theta;
  // sin: theta (1 - z/3! + z^2/5! - ... + z^8/17!); cos: 1 - z/2! + z^2/4! - ... - z^9/18!.
  V8d sp = z * (1.0 / 355687428096000.0) - 1.0 / 1307674368000.0;
  for (double c : {1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0, 1.0})
    sp = sp * z + c;
  V8d cp = z * (-1.0 / 6402373705728000.0) + 1.0 / 20922789888000.0;
  for (double c : {-1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0,
                   -1.0 / 2.0, 1.0})
    cp = cp * z + c;
  const V8d s = theta * sp, c = cp;
  const V8i64 swap = std::bit_cast<V8i64>(q & 1) != 0;
  const V8i64 negCos = std::bit_cast<V8i64>((q + 1) & 2) != 0;
  const V8i64 negSin = std::bit_cast<V8i64>(q & 2) != 0;
  const V8d cs = swap ? s : c, sn = swap ? c : s;
  return {negCos ? -cs : cs, negSin ? -sn : sn};
}

std::invalid_argument invalid(std::string_view name, const std::string& problem) {
  return std::invalid_argument("initParameter: " + problem + " for parameter '" + std::string(name) + "'");
}

/// Elements [lo, hi) of a normal parameter with Philox key `key` into out[0, hi - lo): pair p
/// gives elements 2p (cosine) and 2p + 1 (sine), 8 pairs per vector step; an odd start or
/// end uses one half of its pair.
TESSEL_INIT_CLONES
void normalRange(float* out, int64_t lo, int64_t hi, const numeric::PhiloxKey& key, double stddev) {
  const V8u64 lane = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int64_t pair = lo / 2; 2 * pair < hi; pair += kLanes) {
    const PhiloxWords8 w = philox8(static_cast<uint64_t>(pair) + lane, key);
    V8d r = -2.0 * logPositive(uniform53(w.w0, w.w1));
    for (int l = 0; l < kLanes; ++l) r[l] = std::sqrt(r[l]);  // vsqrtpd (-fno-math-errno)
    const CosSin8 angle = cosSinTwoPi(uniform53(w.w2, w.w3));
    const V8d even = stddev * (r * angle.cosine), odd = stddev * (r * angle.sine);
    const int64_t first = 2 * pair;  // element of lane 0's cosine
    if (first >= lo && first + 2 * kLanes <= hi) {
      float* o = out + (first - lo);
      for (int l = 0; l < kLanes; ++l) {
        o[2 * l] = static_cast<float>(even[l]);
        o[2 * l + 1] = static_cast<float>(odd[l]);
      }
      continue;
    }
    for (int l = 0; l < kLanes; ++l) {
      const int64_t i = first + 2 * l;
      if (i >= lo && i < hi) out[i - lo] = static_cast<float>(even[l]);
      if (i + 1 >= lo && i + 1 < hi) out[i + 1 - lo] = static_cast<float>(odd[l]);
    }
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
