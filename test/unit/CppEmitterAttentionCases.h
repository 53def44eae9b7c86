// Case builders of tessel.rope (compiler/TesselAttentionOps.td) for CppEmitterTest.cpp and
// CudaKernelOpsTest.cpp, as CppEmitterCases.h's for the other ops.
//
// Tolerance (u = 2^-24): the angle is computed in double as the reference does, its cosine
// and sine are rounded to float once (u/2 relative each), and y1 = x1 c - x2 s takes two
// products and a difference in f32 (u/2 each): at most 2u (|x1| + |x2|). With inputs in
// [-1, 1] that is 4u absolute; 8u leaves room for a device cos/sin a couple of double ulps
// off (which can flip one float rounding). Relative tolerances would not do: y crosses 0.
// A wrong pairing, sign or angle is an O(1e-2 .. 1) error.
#pragma once

#include "test/unit/CppEmitterCases.h"

namespace tessel::cpptest {

inline Case rope(const Shape& s, int64_t heads, double theta, bool inverse) {
  return makeCase(fmt::format("rope{}_{}_h{}_{}", inverse ? "_inverse" : "", nameOf(s), heads,
                              static_cast<int64_t>(theta)),
                  {{s}},
                  fmt::format("%r = tessel.rope %a0 heads {} theta {:e}{} : {}", heads, theta,
                              inverse ? " inverse" : "", ty(s)),
                  {ty(s)}, {{0, 8 * kU}});
}

/// The rope cases: one pair (D = 2), D = 8 over 3 heads at odd sizes, T = 33 with Llama 3's
/// theta 500000, both directions, and one shape over the parallel threshold.
inline std::vector<Case> ropeCases() {
  std::vector<Case> c;
  for (bool inverse : {false, true}) {
    c.push_back(rope({1, 1, 2}, 1, 10000.0, inverse));
    c.push_back(rope({2, 7, 24}, 3, 10000.0, inverse));
    c.push_back(rope({1, 33, 64}, 4, 500000.0, inverse));
  }
  c.push_back(rope({8, 64, 256}, 4, 10000.0, false));
  return c;
}

}  // namespace tessel::cpptest
