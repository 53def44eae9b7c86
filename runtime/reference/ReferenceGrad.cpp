// Reference kernels of the backward pass and the optimizer (see ReferenceGrad.h for the promise).
//
// Like Reference.cpp: each kernel is its documented formula in f64 with plain loops, summing
// in index order, after checking every input with the shared helpers of Checks.h. Forward
// quantities a backward needs (layerNorm's mean and rstd, cross-entropy's softmax) are
// recomputed exactly as the forward kernel computes them. The optimizer steps follow the
// operation order of PyTorch 1.13's single-tensor (foreach=False) implementations, so that
// they agree with torch.optim to the last few ulps, not only algebraically.
#include "runtime/reference/ReferenceGrad.h"

#include "runtime/reference/Checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace tessel::ref {
using namespace detail;  // the shared checks of Checks.h

// ---- activations ----------------------------------------------------------------------------

Tensor geluBackward(const Tensor& x, const Tensor& dy) {
  checkSameShape("geluBackward", "x", x, "dy", dy);
  // gelu(x) = 0.5 x (1 + tanh(u)), u = c (x + a x^3), so
  // gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) c (1 + 3 a x^2).
  const double c = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
  Tensor dx(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data[i];
    double t = std::tanh(c * (v + a * v * v * v));
    double grad = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * a * v * v);
    dx.data[i] = dy.data[i] * grad;
  }
  return dx;
}

Tensor reluBackward(const Tensor& x, const Tensor& dy) {
  checkSameShape("reluBackward", "x", x, "dy", dy);
  Tensor dx(x.shape);  // zero-filled: x <= 0 gives 0
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.data[i] > 0.0) dx.data[i] = dy.data[i];
  return dx;
}

// ---- normalisation --------------------------------------------------------------------------

LayerNormGrads layerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                 double eps) {
  checkSameShape("layerNormBackward", "x", x, "dy", dy);
  checkTensor("layerNormBackward", "gamma", gamma);
  if (x.rank() < 1)
    throw ShapeError(fmt::format("layerNormBackward: x must have rank >= 1, got x of shape {}",
                                 shapeString(x.shape)));
  int64_t c = x.shape.back();
  if (gamma.shape != std::vector<int64_t>{c})
    throw ShapeError(fmt::format("layerNormBackward: gamma must be [C] with C={}: x is {}, gamma "
                                 "is {}",
                                 c, shapeString(x.shape), shapeString(gamma.shape)));
  LayerNormGrads g{Tensor(x.shape), Tensor({c}), Tensor({c})};
  int64_t rows = product(x.shape, 0, x.shape.size() - 1);
  std::vector<double> xhat(c), dxhat(c);
  for (int64_t r = 0; c > 0 && r < rows; ++r) {
    const double* px = x.data.data() + r * c;
    const double* pdy = dy.data.data() + r * c;
    double* pdx = g.dx.data.data() + r * c;
    // mean and rstd exactly as layerNorm computes them (two-pass biased variance).
    double mean = 0.0;
    for (int64_t i = 0; i < c; ++i) mean += px[i];
    mean /= static_cast<double>(c);
    double var = 0.0;
    for (int64_t i = 0; i < c; ++i) var += (px[i] - mean) * (px[i] - mean);
    var /= static_cast<double>(c);
    double rstd = 1.0 / std::sqrt(var + eps);
    double meanDxhat = 0.0, meanDxhatXhat = 0.0;
    for (int64_t i = 0; i < c; ++i) {
      xhat[i] = (px[i] - mean) * rstd;
      dxhat[i] = pdy[i] * gamma.data[i];
      meanDxhat += dxhat[i];
      meanDxhatXhat += dxhat[i] * xhat[i];
      g.dgamma.data[i] += pdy[i] * xhat[i];
      g.dbeta.data[i] += pdy[i];
    }
    meanDxhat /= static_cast<double>(c);
    meanDxhatXhat /= static_cast<double>(c);
    for (int64_t i = 0; i < c; ++i)
      pdx[i] = rstd * (dxhat[i] - meanDxhat - xhat[i] * meanDxhatXhat);
  }
  return g;
}

Tensor softmaxBackward(const Tensor& y, const Tensor& dy) {
  checkSameShape("softmaxBackward", "y", y, "dy", dy);
  if (y.rank() < 1)
    throw ShapeError(fmt::format("softmaxBackward: y must have rank >= 1, got y of shape {}",
                                 shapeString(y.shape)));
  int64_t len = y.shape.back(), rows = product(y.shape, 0, y.shape.size() - 1);
  Tensor dx(y.shape);
  for (int64_t r = 0; len > 0 && r < rows; ++r) {
    const double* py = y.data.data() + r * len;
    const double* pdy = dy.data.data() + r * len;
    double dot = 0.0;
    for (int64_t i = 0; i < len; ++i) dot += pdy[i] * py[i];
    for (int64_t i = 0; i < len; ++i) dx.data[r * len + i] = py[i] * (pdy[i] - dot);
  }
  return dx;
}

// ---- gather and loss ------------------------------------------------------------------------

Tensor embeddingBackward(const Tensor& indices, const Tensor& dy, int64_t vocab) {
  checkTensor("embeddingBackward", "indices", indices);
  checkTensor("embeddingBackward", "dy", dy);
  if (vocab < 0 || dy.rank() != indices.rank() + 1 ||
      !std::equal(indices.shape.begin(), indices.shape.end(), dy.shape.begin()))
    throw ShapeError(fmt::format("embeddingBackward: dy must be [..., C] with [...] the indices "
                                 "shape, and vocab >= 0: indices is {}, dy is {}, vocab is {}",
                                 shapeString(indices.shape), shapeString(dy.shape), vocab));
  int64_t c = dy.shape.back();
  Tensor dtable({vocab, c});
  std::string boundText = fmt::format("vocab {}", vocab);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t row = integerIn(indices.data[i], vocab, "embeddingBackward", "index", "indices",
                            indices, i, boundText);
    for (int64_t j = 0; j < c; ++j) dtable.data[row * c + j] += dy.data[i * c + j];
  }
  return dtable;
}

Tensor crossEntropyBackward(const Tensor& logits, const Tensor& targets, const Tensor& dloss) {
  checkLogitsTargets("crossEntropyBackward", logits, targets);
  checkTensor("crossEntropyBackward", "dloss", dloss);
  if (dloss.rank() != 0)
    throw ShapeError(fmt::format("crossEntropyBackward: dloss must be a scalar, got dloss of "
                                 "shape {} (logits {})",
                                 shapeString(dloss.shape), shapeString(logits.shape)));
  int64_t v = logits.shape.back(), tokens = targets.numel();
  double factor = dloss.data[0] / static_cast<double>(tokens);
  std::string boundText = fmt::format("logits {}", shapeString(logits.shape));
  Tensor dlogits(logits.shape);
  for (int64_t n = 0; n < tokens; ++n) {
    int64_t target = integerIn(targets.data[n], v, "crossEntropyBackward", "target", "targets",
                               targets, n, boundText);
    const double* row = logits.data.data() + n * v;
    double* out = dlogits.data.data() + n * v;
    double mx = *std::max_element(row, row + v);
    double sum = 0.0;
    for (int64_t i = 0; i < v; ++i) sum += out[i] = std::exp(row[i] - mx);
    for (int64_t i = 0; i < v; ++i) out[i] = factor * (out[i] / sum - (i == target ? 1.0 : 0.0));
  }
  return dlogits;
}

// ---- broadcast ------------------------------------------------------------------------------

Tensor broadcast(const Tensor& x, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& dims) {
  checkTensor("broadcast", "x", x);
  checkedNumel(shape, "broadcast");
  // dims: strictly increasing positions of the result; the remaining positions must spell x.
  std::vector<bool> inserted(shape.size(), false);
  bool ok = true;
  for (size_t i = 0; ok && i < dims.size(); ++i) {
    ok = dims[i] >= 0 && dims[i] < static_cast<int64_t>(shape.size()) &&
         (i == 0 || dims[i] > dims[i - 1]);
    if (ok) inserted[dims[i]] = true;
  }
  std::vector<int64_t> kept;
  for (size_t d = 0; ok && d < shape.size(); ++d)
    if (!inserted[d]) kept.push_back(shape[d]);
  if (!ok || kept != x.shape)
    throw ShapeError(fmt::format("broadcast: x of shape {} cannot be broadcast to {} by inserting "
                                 "dimensions {} (they must be sorted, distinct positions of the "
                                 "result, and the other dimensions must equal x's shape)",
                                 shapeString(x.shape), shapeString(shape), indexString(dims)));
  Tensor out(shape);
  if (out.numel() == 0) return out;
  // Walk the result in row-major order; the source offset uses only the kept dimensions.
  std::vector<int64_t> xStrides = stridesOf(x.shape), index(shape.size(), 0);
  int64_t flat = 0;
  do {
    int64_t src = 0;
    for (size_t d = 0, k = 0; d < shape.size(); ++d)
      if (!inserted[d]) src += index[d] * xStrides[k++];
    out.data[flat++] = x.data[src];
  } while (nextIndex(index, shape));
  return out;
}

// ---- optimizers -----------------------------------------------------------------------------

void adamwStep(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWConfig& c) {
  checkSameShape("adamwStep", "param", param, "grad", grad);
  checkSameShape("adamwStep", "param", param, "m", m);
  checkSameShape("adamwStep", "param", param, "v", v);
  if (c.step < 1)  // 1 - beta^0 = 0 would divide by zero in the bias correction
    throw std::invalid_argument(
        fmt::format("adamwStep: step must be >= 1 (it is 1-based), got {}", c.step));
  // torch.optim.adamw._single_tensor_adamw, in its order of operations.
  double decay = 1.0 - c.lr * c.weightDecay;
  double stepSize = c.lr / (1.0 - std::pow(c.beta1, static_cast<double>(c.step)));
  double correction2Sqrt = std::sqrt(1.0 - std::pow(c.beta2, static_cast<double>(c.step)));
  for (int64_t i = 0; i < param.numel(); ++i) {
    double g = grad.data[i];
    param.data[i] *= decay;  // decoupled weight decay: never enters m or v
    m.data[i] = m.data[i] * c.beta1 + (1.0 - c.beta1) * g;
    v.data[i] = v.data[i] * c.beta2 + (1.0 - c.beta2) * g * g;
    double denom = std::sqrt(v.data[i]) / correction2Sqrt + c.eps;
    param.data[i] = param.data[i] + -stepSize * m.data[i] / denom;
  }
}

void sgdStep(Tensor& param, const Tensor& grad, Tensor& buf, double lr, double momentum,
             double weightDecay, bool firstStep) {
  checkSameShape("sgdStep", "param", param, "grad", grad);
  // With momentum 0 the buffer is never read or written, so its shape does not matter.
  if (momentum != 0.0) checkSameShape("sgdStep", "param", param, "buf", buf);
  // torch.optim.sgd._single_tensor_sgd (dampening 0, nesterov False, maximize False).
  for (int64_t i = 0; i < param.numel(); ++i) {
    double d = grad.data[i];
    if (weightDecay != 0.0) d = d + weightDecay * param.data[i];  // coupled: enters the buffer
    if (momentum != 0.0) {
      buf.data[i] = firstStep ? d : buf.data[i] * momentum + d;
      d = buf.data[i];
    }
    param.data[i] = param.data[i] + -lr * d;
  }
}

double globalNorm(const std::vector<const Tensor*>& grads) {
  double sumSquares = 0.0;
  for (size_t t = 0; t < grads.size(); ++t) {
    if (grads[t] == nullptr)
      throw std::invalid_argument(fmt::format("globalNorm: gradient {} is null", t));
    checkTensor("globalNorm", "a gradient", *grads[t]);
    for (double g : grads[t]->data) sumSquares += g * g;
  }
  return std::sqrt(sumSquares);
}

double clipCoefficient(double norm, double maxNorm) {
  if (!(norm >= 0.0) || !(maxNorm >= 0.0))  // also rejects NaN
    throw std::invalid_argument(fmt::format(
        "clipCoefficient: norm and maxNorm must be >= 0, got norm {} and maxNorm {}", norm,
        maxNorm));
  // torch.nn.utils.clip_grad_norm_: clamp(max_norm / (total_norm + 1e-6), max=1).
  return std::min(1.0, maxNorm / (norm + 1e-6));
}

}  // namespace tessel::ref
