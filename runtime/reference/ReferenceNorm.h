// Reference kernels of the Llama block's activation and norm: silu and rms_norm, forward and
// backward (compiler/TesselOps.td, TesselGradOps.td).
//
// Promise: as Reference.h and ReferenceGrad.h: each function is its op's documented formula in
// f64 with plain loops, summing in index order; shapes are validated and violations throw
// ref::ShapeError naming them. Nothing here depends on MLIR.
#pragma once

#include "runtime/reference/Reference.h"

namespace tessel::ref {

/// SiLU (swish): x * sigmoid(x) = x / (1 + exp(-x)), elementwise (PyTorch F.silu).
Tensor silu(const Tensor& x);

/// dx = dy * silu'(x), silu'(x) = s (1 + x (1 - s)) with s = sigmoid(x). x, dy: same shape.
Tensor siluBackward(const Tensor& x, const Tensor& dy);

/// RMS normalisation over the last dimension C (Zhang & Sennrich 2019; PyTorch nn.RMSNorm):
/// y = x * r * weight with r = 1 / sqrt(mean(x^2) + eps) per row. x: [..., C], weight: [C].
Tensor rmsNorm(const Tensor& x, const Tensor& weight, double eps);

/// Result of rmsNormBackward: gradients of the input and the weight.
struct RmsNormGrads {
  Tensor dx;       // [..., C]
  Tensor dweight;  // [C]
};

/// Backward of rmsNorm(x, weight, eps): with r and xhat = x r per row (as rmsNorm computes
/// them), dx = r (dy weight - xhat mean(dy weight xhat)), dweight = sum over rows of dy xhat.
RmsNormGrads rmsNormBackward(const Tensor& x, const Tensor& weight, const Tensor& dy, double eps);

}  // namespace tessel::ref
