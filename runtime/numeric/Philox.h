// Philox-4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel
// random numbers: as easy as 1, 2, 3" (SC'11), section 4.2: a keyed bijection of a 128-bit
// counter, so the n-th random word needs no state but (key, n).
//
// One round maps counter (c0, c1, c2, c3) under round key (k0, k1) to
//   (hi(M1 * c2) ^ c1 ^ k0,  lo(M1 * c2),  hi(M0 * c0) ^ c3 ^ k1,  lo(M0 * c0))
// with the 64-bit products M0 * c0 and M1 * c2 split into high and low 32-bit halves,
// M0 = 0xD2511F53 and M1 = 0xCD9E8D57. Ten rounds; the key is bumped by the Weyl constants
// (W0, W1) = (0x9E3779B9, 0xBB67AE85) (golden ratio and sqrt(3) - 1, times 2^32) between
// rounds, modulo 2^32. The paper's authors publish known-answer vectors (Random123's
// kat_vectors); test/unit/PhiloxTest.cpp checks them.
#pragma once

#include <array>
#include <cstdint>

namespace tessel::numeric {

/// A Philox-4x32 counter: four 32-bit words, c0 first.
using PhiloxCounter = std::array<uint32_t, 4>;
/// A Philox-4x32 key: two 32-bit words, k0 first.
using PhiloxKey = std::array<uint32_t, 2>;

/// Philox-4x32-10 of `counter` under `key`: four 32-bit words, each uniform on [0, 2^32) over
/// counters, and independent across counters for practical purposes (the generator passes
/// TestU01's BigCrush, per the paper).
constexpr PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    const uint64_t p0 = kM0 * c[0], p1 = kM1 * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

}  // namespace tessel::numeric
