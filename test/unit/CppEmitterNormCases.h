// Case builders of silu, silu_grad, rms_norm and rms_norm_grad for CppEmitterTest.cpp and
// CudaKernelOpsTest.cpp, as CppEmitterCases.h's for the other ops.
//
// Tolerances (u = 2^-24, the f32 unit roundoff):
// - silu = x s, s = d or e d with e = exp(-|x|) (1.5 u, the preamble's exp; its argument is
//   exact) and d = 1 / (1 + e): under 5 u relative, so 8 u. Below x = -87 the true result is
//   subnormal (|x| e^x < 2^-126), where a thread in flush-to-zero mode returns 0 (measured:
//   silu(-100) = -3.7e-42 came out -0): hence an absolute 2^-126 = 1.2e-38 (on O(1) values
//   that is 1e-31 u, nothing).
// - silu' = s (1 + x (1 - s)) crosses 0 (at x ~ -1.28), where 1 + x (1 - s) cancels: its
//   terms are at most |x| <= 10 here with ~6 roundings each, so an absolute part of
//   16 u |x| max = 160 u; 16 u relative elsewhere.
// - rms_norm: the mean of squares is a float sum of C positive terms (at most C u relative),
//   its rsqrt halves that, and the products x * rstd * weight add 3 roundings: (C + 8) u
//   relative to each output (every term is positive, so no cancellation).
// - rms_norm_grad: dinp = rstd (dout w - xhat m) cancels (completely as C -> 1, where xhat^2
//   -> 1 and dinp -> 0), so its bound is absolute against the terms' magnitude
//   rstd (|dout w| + |xhat| mean|dout w xhat|): rstd and m each carry C u, the rest ~8
//   roundings, so 2 (C + 8) u of it. dweight is an f32
//   sum over chunks of at most 32 rows (then double) of terms dout * xhat, each with xhat's
//   (C + 8) u: (min(N, 32) + C + 8) u sum |dout xhat|.
#pragma once

#include "test/unit/CppEmitterCases.h"

#include "runtime/reference/ReferenceNorm.h"

namespace tessel::cpptest {

inline const Tol kSiluTol{8 * kU, 0x1p-126};
inline const Tol kSiluGradTol{16 * kU, 160 * kU};

inline Case rmsNorm(const Shape& s, double eps = 1e-5) {
  int64_t c = s.back();
  return makeCase(fmt::format("rms_norm_{}", nameOf(s)), {{s, -2, 2}, {{c}, 0.5, 1.5}},
                  fmt::format("%r = tessel.rms_norm %a0, %a1 {{epsilon = {:e} : f64}} : ({}, {}) "
                              "-> {}",
                              eps, ty(s), ty({c}), ty(s)),
                  {ty(s)}, {{static_cast<double>(c + 8) * kU, 0}});
}

inline Case rmsNormGrad(const Shape& s) {
  int64_t c = s.back(), n = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) n *= s[i];
  int64_t chunk = std::min<int64_t>(n, 32);
  Case k = makeCase(fmt::format("rms_norm_grad_{}", nameOf(s)),
                    {{s, -2, 2}, {{c}, 0.5, 1.5}, {s}},
                    fmt::format("%r:2 = tessel.rms_norm_grad %a0, %a1, %a2 : ({}, {}, {}) -> "
                                "({}, {})",
                                ty(s), ty({c}), ty(s), ty(s), ty({c})),
                    {ty(s), ty({c})},
                    {{8 * kU, 2 * static_cast<double>(c + 8) * kU, kMagnitude},
                     {0, static_cast<double>(chunk + c + 8) * kU, kMagnitude}});
  k.magnitude = [c](const std::vector<ref::Tensor>& in) {
    std::vector<int64_t> rows;
    for (int64_t d = 0; d + 1 < in[0].rank(); ++d) rows.push_back(d);
    ref::Tensor xhat = ref::rmsNorm(in[0], ref::Tensor::filled({c}, 1.0), 1e-5);
    ref::Tensor terms(in[0].shape);
    for (int64_t r = 0; r < in[0].numel() / c; ++r) {
      double m = 0.0, ss = 0.0;
      for (int64_t i = 0; i < c; ++i) {
        const int64_t at = r * c + i;
        m += std::abs(in[2].data[at] * in[1].data[i] * xhat.data[at]) / static_cast<double>(c);
        ss += in[0].data[at] * in[0].data[at] / static_cast<double>(c);
      }
      const double rstd = 1.0 / std::sqrt(ss + 1e-5);
      for (int64_t i = 0; i < c; ++i) {
        const int64_t at = r * c + i;
        terms.data[at] = rstd * (std::abs(in[2].data[at] * in[1].data[i]) + std::abs(xhat.data[at]) * m);
      }
    }
    return std::vector<ref::Tensor>{terms,
                                    ref::reduceSum(ref::mul(absOf(in[2]), absOf(xhat)), rows)};
  };
  return k;
}

/// Every case of the four ops: sizes 1, 7 and 33, C up to 256, and shapes past the C++
/// kernels' parallel threshold and the CUDA kernels' multi-chunk path (rows > 32).
inline std::vector<Case> normCases() {
  std::vector<Case> c;
  for (Shape s : {Shape{1}, Shape{7}, Shape{7, 33}, Shape{300, 129}}) {
    c.push_back(unary("silu", s, s.size() > 1 ? 10 : 4, kSiluTol));
    c.push_back(unaryGrad("silu_grad", s, s.size() > 1 ? 10 : 4, kSiluGradTol));
  }
  for (Shape s : {Shape{1, 1}, Shape{33, 1}, Shape{1, 7}, Shape{7, 33}, Shape{2, 7, 33},
                  Shape{64, 33, 64}, Shape{8, 256}})
    c.push_back(rmsNorm(s));
  for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 7, 33}, Shape{33, 7}, Shape{2048, 33},
                  Shape{64, 64, 33}})
    c.push_back(rmsNormGrad(s));
  return c;
}

}  // namespace tessel::cpptest
