// Reference kernels of the backward pass and the optimizer: the oracle for autodiff and
// for the generated kernels, like Reference.h for the forward ops.
//
// Promise: each function is the exact vector-Jacobian product (or update rule) documented
// for the matching `tessel` op, in f64 with plain loops. Names follow the llm.c convention
// (d-prefixed gradients). Shapes are validated; violations throw ref::ShapeError naming them.
#pragma once

#include "runtime/reference/Reference.h"

namespace tessel::ref {

/// Result of layerNormBackward: gradients of the input, gamma and beta.
struct LayerNormGrads {
  Tensor dx;      // [..., C]
  Tensor dgamma;  // [C]
  Tensor dbeta;   // [C]
};

/// dx = dy * gelu'(x) for the tanh form of GELU. x, dy: same shape.
Tensor geluBackward(const Tensor& x, const Tensor& dy);

/// dx = dy where x > 0, else 0 (the subgradient at 0 is 0, as in PyTorch).
Tensor reluBackward(const Tensor& x, const Tensor& dy);

/// Backward of layerNorm(x, gamma, beta, eps) over the last dimension C:
/// xhat = (x - mean) * rstd, dxhat = dy * gamma,
/// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
/// dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
LayerNormGrads layerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                 double eps);

/// Backward of softmax given its output y: dx = y * (dy - sum_j(dy * y)) over the last dim.
/// (Masked entries of a causal softmax have y = 0, so they get dx = 0.)
Tensor softmaxBackward(const Tensor& y, const Tensor& dy);

/// Backward of embedding: dtable [V, C] with dtable[v] = sum of dy rows whose index is v.
/// indices [...] (integers in [0, V)), dy [..., C]. Rows are accumulated in index order.
Tensor embeddingBackward(const Tensor& indices, const Tensor& dy, int64_t vocab);

/// Backward of the mean cross-entropy: dlogits = dloss * (softmax(logits) - onehot(t)) / N,
/// N = number of tokens. logits [..., V], targets [...], dloss a scalar.
Tensor crossEntropyBackward(const Tensor& logits, const Tensor& targets, const Tensor& dloss);

/// Inserts new dimensions: the result has shape `shape`; `dims` (sorted, distinct) are the
/// positions in the result that x lacks; x's shape equals `shape` with `dims` removed.
/// result[i] = x[i with the `dims` coordinates dropped]. The transpose of reduceSum(dims).
Tensor broadcast(const Tensor& x, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& dims);

/// AdamW hyper-parameters (Loshchilov & Hutter 2019; PyTorch torch.optim.AdamW).
struct AdamWConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
  int64_t step = 1;  // 1-based step number, for bias correction
};

/// One AdamW step, exactly as torch.optim.AdamW (foreach=False, amsgrad=False):
///   p  <- p * (1 - lr * weightDecay)
///   m  <- beta1 * m + (1 - beta1) * g
///   v  <- beta2 * v + (1 - beta2) * g^2
///   p  <- p - lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
/// Updates param, m and v in place; all four tensors have the same shape.
/// Throws std::invalid_argument if step < 1.
void adamwStep(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWConfig& c);

/// One SGD step with momentum, as torch.optim.SGD (dampening 0, not Nesterov):
///   g <- g + weightDecay * p;  buf <- momentum * buf + g (buf = g on the first step);
///   p <- p - lr * buf.  With momentum 0 the buffer is not used (nor its shape checked).
void sgdStep(Tensor& param, const Tensor& grad, Tensor& buf, double lr, double momentum,
             double weightDecay, bool firstStep);

/// sqrt of the sum of squares of every element of every tensor (torch clip_grad_norm_'s
/// total_norm with norm_type 2). Throws std::invalid_argument on a null pointer.
double globalNorm(const std::vector<const Tensor*>& grads);

/// The factor torch.nn.utils.clip_grad_norm_ multiplies every gradient by:
/// min(1, maxNorm / (norm + 1e-6)). Throws std::invalid_argument if norm or maxNorm is
/// negative or NaN.
double clipCoefficient(double norm, double maxNorm);

}  // namespace tessel::ref
