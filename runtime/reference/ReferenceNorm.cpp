// Reference kernels of silu and rms_norm (see ReferenceNorm.h for the promise): each its
// documented formula in f64 with plain loops, after the shared checks of Checks.h.
#include "runtime/reference/ReferenceNorm.h"

#include "runtime/reference/Checks.h"

#include <fmt/format.h>

#include <cmath>

namespace tessel::ref {
using namespace detail;  // the shared checks of Checks.h

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// x [..., C] with rank >= 1 and weight [C]; returns C.
int64_t checkRowsAndWeight(const char* op, const Tensor& x, const Tensor& weight) {
  checkTensor(op, "x", x);
  checkTensor(op, "weight", weight);
  if (x.rank() < 1)
    throw ShapeError(
        fmt::format("{}: x must have rank >= 1, got x of shape {}", op, shapeString(x.shape)));
  int64_t c = x.shape.back();
  if (weight.shape != std::vector<int64_t>{c})
    throw ShapeError(fmt::format("{}: weight must be [C] with C={}: x is {}, weight is {}", op, c,
                                 shapeString(x.shape), shapeString(weight.shape)));
  return c;
}

/// 1 / sqrt(mean(x^2) + eps) of one row of c elements.
double rmsFactor(const double* x, int64_t c, double eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < c; ++i) ss += x[i] * x[i];
  return 1.0 / std::sqrt(ss / static_cast<double>(c) + eps);
}

}  // namespace

Tensor silu(const Tensor& x) {
  checkTensor("silu", "x", x);
  Tensor out = x;
  for (double& v : out.data) v = v * sigmoid(v);
  return out;
}

Tensor siluBackward(const Tensor& x, const Tensor& dy) {
  checkSameShape("siluBackward", "x", x, "dy", dy);
  // d/dx x s(x) = s + x s (1 - s) = s (1 + x (1 - s)).
  Tensor dx(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data[i], s = sigmoid(v);
    dx.data[i] = dy.data[i] * s * (1.0 + v * (1.0 - s));
  }
  return dx;
}

Tensor rmsNorm(const Tensor& x, const Tensor& weight, double eps) {
  int64_t c = checkRowsAndWeight("rmsNorm", x, weight);
  Tensor out(x.shape);
  int64_t rows = product(x.shape, 0, x.shape.size() - 1);
  for (int64_t r = 0; c > 0 && r < rows; ++r) {
    const double* px = x.data.data() + r * c;
    double* po = out.data.data() + r * c;
    double rstd = rmsFactor(px, c, eps);
    for (int64_t i = 0; i < c; ++i) po[i] = px[i] * rstd * weight.data[i];
  }
  return out;
}

RmsNormGrads rmsNormBackward(const Tensor& x, const Tensor& weight, const Tensor& dy,
                             double eps) {
  int64_t c = checkRowsAndWeight("rmsNormBackward", x, weight);
  checkSameShape("rmsNormBackward", "x", x, "dy", dy);
  RmsNormGrads g{Tensor(x.shape), Tensor({c})};
  int64_t rows = product(x.shape, 0, x.shape.size() - 1);
  for (int64_t r = 0; c > 0 && r < rows; ++r) {
    const double* px = x.data.data() + r * c;
    const double* pdy = dy.data.data() + r * c;
    double* pdx = g.dx.data.data() + r * c;
    double rstd = rmsFactor(px, c, eps);
    // y_i = xhat_i w_i with xhat_i = x_i r and dr/dx_j = -r^3 x_j / C, so
    // dx_j = r (dy_j w_j) - r xhat_j mean_i(dy_i w_i xhat_i).
    double m = 0.0;
    for (int64_t i = 0; i < c; ++i) {
      double xhat = px[i] * rstd;
      m += pdy[i] * weight.data[i] * xhat;
      g.dweight.data[i] += pdy[i] * xhat;
    }
    m /= static_cast<double>(c);
    for (int64_t i = 0; i < c; ++i)
      pdx[i] = rstd * (pdy[i] * weight.data[i] - px[i] * rstd * m);
  }
  return g;
}

}  // namespace tessel::ref
