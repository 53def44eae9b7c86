// Reference kernels of rope and grouped_attention; see ReferenceAttention.h.
#include "runtime/reference/ReferenceAttention.h"

#include "runtime/reference/Checks.h"

#include <algorithm>
#include <cmath>

namespace tessel::ref {

using namespace detail;

Tensor rope(const Tensor& x, int64_t numHeads, double theta, bool inverse) {
  checkTensor("rope", "x", x);
  if (x.rank() != 3 || numHeads < 1 || x.shape[2] <= 0 || x.shape[2] % numHeads != 0 ||
      (x.shape[2] / numHeads) % 2 != 0)
    throw ShapeError(fmt::format("rope: x must be [B, T, N * D] with N = numHeads = {} and D > 0 "
                                 "even, got x of shape {}",
                                 numHeads, shapeString(x.shape)));
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw ShapeError(fmt::format("rope: theta must be finite and > 0, got {}", theta));
  int64_t batch = x.shape[0], seq = x.shape[1], c = x.shape[2], d = c / numHeads, half = d / 2;
  Tensor out(x.shape);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t h = 0; h < numHeads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          double a = static_cast<double>(t) *
                     std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
          if (inverse) a = -a;
          int64_t p1 = (b * seq + t) * c + h * d + i, p2 = p1 + half;
          double x1 = x.data[p1], x2 = x.data[p2];
          out.data[p1] = x1 * std::cos(a) - x2 * std::sin(a);
          out.data[p2] = x2 * std::cos(a) + x1 * std::sin(a);
        }
  return out;
}

Tensor groupedAttention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t numHeads,
                        int64_t numKvHeads) {
  checkTensor("groupedAttention", "q", q);
  checkSameShape("groupedAttention", "k", k, "v", v);
  if (q.rank() != 3 || k.rank() != 3 || numHeads < 1 || numKvHeads < 1 ||
      numHeads % numKvHeads != 0 || q.shape[2] <= 0 || q.shape[2] % numHeads != 0 ||
      q.shape[0] != k.shape[0] || q.shape[1] != k.shape[1] ||
      k.shape[2] != q.shape[2] / numHeads * numKvHeads)
    throw ShapeError(fmt::format(
        "groupedAttention: q must be [B, T, NH * D] and k, v [B, T, NKV * D] with NKV dividing "
        "NH (NH={}, NKV={}), got q {}, k {}, v {}",
        numHeads, numKvHeads, shapeString(q.shape), shapeString(k.shape), shapeString(v.shape)));
  int64_t batch = q.shape[0], seq = q.shape[1], c = q.shape[2], d = c / numHeads;
  int64_t ckv = k.shape[2], group = numHeads / numKvHeads;
  double norm = std::sqrt(static_cast<double>(d));
  Tensor out(q.shape);
  std::vector<double> weights(seq);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < numHeads; ++h) {
      int64_t g = h / group;  // this query head's key/value head
      for (int64_t i = 0; i < seq; ++i) {
        const double* qi = q.data.data() + (b * seq + i) * c + h * d;
        double mx = 0.0;
        for (int64_t j = 0; j <= i; ++j) {  // keys after i are masked out
          const double* kj = k.data.data() + (b * seq + j) * ckv + g * d;
          double dot = 0.0;
          for (int64_t e = 0; e < d; ++e) dot += qi[e] * kj[e];
          weights[j] = dot / norm;
          mx = j == 0 ? weights[j] : std::max(mx, weights[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += weights[j] = std::exp(weights[j] - mx);
        double* y = out.data.data() + (b * seq + i) * c + h * d;
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j)
            acc += weights[j] / sum * v.data[(b * seq + j) * ckv + g * d + e];
          y[e] = acc;
        }
      }
    }
  return out;
}

std::vector<Tensor> groupedAttentionGrad(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& dy, int64_t numHeads, int64_t numKvHeads) {
  groupedAttention(q, k, v, numHeads, numKvHeads);  // the shape checks (the values unused)
  checkSameShape("groupedAttentionGrad", "q", q, "dy", dy);
  int64_t batch = q.shape[0], seq = q.shape[1], c = q.shape[2], d = c / numHeads;
  int64_t ckv = k.shape[2], group = numHeads / numKvHeads;
  double norm = std::sqrt(static_cast<double>(d));
  Tensor dq(q.shape), dk(k.shape), dv(v.shape);
  std::vector<double> p(seq), dp(seq);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < numHeads; ++h) {
      int64_t g = h / group;
      auto at = [&](int64_t t, int64_t width, int64_t head) { return (b * seq + t) * width + head * d; };
      for (int64_t i = 0; i < seq; ++i) {
        const double* qi = q.data.data() + at(i, c, h);
        const double* dyi = dy.data.data() + at(i, c, h);
        double mx = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0.0, dpj = 0.0;
          for (int64_t e = 0; e < d; ++e) {
            dot += qi[e] * k.data[at(j, ckv, g) + e];
            dpj += dyi[e] * v.data[at(j, ckv, g) + e];
          }
          p[j] = dot / norm;
          dp[j] = dpj;
          mx = j == 0 ? p[j] : std::max(mx, p[j]);
        }
        double sum = 0.0, rowDot = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += p[j] = std::exp(p[j] - mx);
        for (int64_t j = 0; j <= i; ++j) rowDot += (p[j] /= sum) * dp[j];
        for (int64_t j = 0; j <= i; ++j) {
          double ds = p[j] * (dp[j] - rowDot) / norm;
          for (int64_t e = 0; e < d; ++e) {
            dq.data[at(i, c, h) + e] += ds * k.data[at(j, ckv, g) + e];
            dk.data[at(j, ckv, g) + e] += ds * qi[e];
            dv.data[at(j, ckv, g) + e] += p[j] * dyi[e];
          }
        }
      }
    }
  return {dq, dk, dv};
}

Tensor causalAttentionGrad(const Tensor& qkv, const Tensor& dy, int64_t numHeads) {
  checkTensor("causalAttentionGrad", "qkv", qkv);
  if (qkv.rank() != 3 || qkv.shape[2] % 3 != 0)
    throw ShapeError(fmt::format("causalAttentionGrad: qkv must be [B, T, 3C], got {}",
                                 shapeString(qkv.shape)));
  int64_t rows = qkv.shape[0] * qkv.shape[1], c = qkv.shape[2] / 3;
  std::vector<Tensor> parts(3, Tensor({qkv.shape[0], qkv.shape[1], c}));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t part = 0; part < 3; ++part)
      for (int64_t e = 0; e < c; ++e) parts[part].data[r * c + e] = qkv.data[r * 3 * c + part * c + e];
  std::vector<Tensor> grads = groupedAttentionGrad(parts[0], parts[1], parts[2], dy, numHeads, numHeads);
  Tensor out(qkv.shape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t part = 0; part < 3; ++part)
      for (int64_t e = 0; e < c; ++e) out.data[r * 3 * c + part * c + e] = grads[part].data[r * c + e];
  return out;
}

}  // namespace tessel::ref
