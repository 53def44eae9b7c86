// The independent path of the grouped-query attention tests (ReferenceAttentionTest.cpp,
// DecomposeAttentionTest.cpp): grouped attention is multi-head attention on k and v whose
// heads are repeated G = NH / NKV times, so ref::causalAttention on this fused input is the
// value grouped attention must give.
#pragma once

#include "runtime/reference/Reference.h"

namespace tessel::ref::testutil {

/// The fused [B, T, 3 NH D] input of causalAttention from q [B, T, NH D] and k, v
/// [B, T, NKV D]: q as it is, each of k's and v's NKV heads repeated G times, so query head h
/// meets kv head h / G.
inline Tensor repeatedQkv(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                          int64_t kvHeads) {
  int64_t b = q.shape[0], t = q.shape[1], c = q.shape[2], d = c / heads, g = heads / kvHeads;
  Tensor qkv({b, t, 3 * c});
  for (int64_t n = 0; n < b * t; ++n)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t e = 0; e < d; ++e) {
        qkv.data[n * 3 * c + h * d + e] = q.data[n * c + h * d + e];
        qkv.data[n * 3 * c + c + h * d + e] = k.data[n * kvHeads * d + h / g * d + e];
        qkv.data[n * 3 * c + 2 * c + h * d + e] = v.data[n * kvHeads * d + h / g * d + e];
      }
  return qkv;
}

}  // namespace tessel::ref::testutil
