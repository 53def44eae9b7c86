// Reference kernels: the numerical oracle of Tessel.
//
// Promise: every function here computes its op exactly as the `tessel` dialect documents it
// (compiler/TesselOps.td), in f64, with plain loops and no cleverness, so that later
// codegen, autodiff and sharding can be checked against it. Nothing here is fast and
// nothing here depends on MLIR.
//
// Shapes are row-major; the last dimension is contiguous. Integer tensors (token ids,
// targets) are stored as exactly-representable doubles. Every function validates its
// inputs and throws tessel::ref::ShapeError naming the offending shapes; the compiler's
// verifiers normally catch these first.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::ref {

/// Thrown on inconsistent shapes or out-of-range indices. what() names the shapes.
struct ShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A dense row-major tensor of doubles. A 0-d tensor (scalar) has shape {} and one element.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;

  Tensor() : data(1, 0.0) {}
  /// Zeros of the given shape.
  explicit Tensor(std::vector<int64_t> shape);
  /// Takes `data` (row-major); throws ShapeError if its size is not the shape's element count.
  Tensor(std::vector<int64_t> shape, std::vector<double> data);
  /// Every element equal to `value`. (A named factory, so Tensor({2}, {1.0}) cannot be
  /// mistaken for a fill.)
  static Tensor filled(std::vector<int64_t> shape, double value);

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Element at a multi-index (bounds-checked, for tests).
  double at(const std::vector<int64_t>& index) const;
};

/// "4x32x64", "scalar" for rank 0. Used in every error message.
std::string shapeString(const std::vector<int64_t>& shape);

/// Batched matrix product. a: [batch..., M, K] ([batch..., K, M] if transposeA),
/// b: [batch..., K, N] ([batch..., N, K] if transposeB), or rank-2 b shared by every batch.
/// Batch dimensions of a and b must be equal when b has rank > 2. Result: [batch..., M, N].
Tensor matmul(const Tensor& a, const Tensor& b, bool transposeA, bool transposeB);

/// Elementwise binary ops with suffix broadcasting: the shapes are equal, or the shorter
/// shape equals the trailing dimensions of the longer one (numpy broadcasting restricted to
/// missing leading dimensions). The result has the longer shape.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);

/// x * factor, elementwise.
Tensor scale(const Tensor& x, double factor);

/// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (Hendrycks & Gimpel 2016;
/// PyTorch gelu(approximate="tanh")).
Tensor gelu(const Tensor& x);

/// max(x, 0).
Tensor relu(const Tensor& x);

/// Layer normalisation over the last dimension C (Ba et al. 2016), biased variance:
/// y = (x - mean) / sqrt(var + eps) * gamma + beta. x: [..., C], gamma and beta: [C].
Tensor layerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps);

/// Softmax over the last dimension, max-subtracted. With causal, x must be [..., T, T] and
/// entries with column > row are excluded (they come out exactly 0).
Tensor softmax(const Tensor& x, bool causal);

/// Row gather: table [V, C], indices [...] (integers in [0, V)) -> [..., C].
/// Throws ShapeError on an index out of range, naming it and its position.
Tensor embedding(const Tensor& table, const Tensor& indices);

/// Same data, new shape with the same element count.
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape);

/// Permute dimensions: result.shape[i] = x.shape[perm[i]].
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm);

/// Split x along axis into `parts` equal pieces (x.shape[axis] % parts == 0).
std::vector<Tensor> split(const Tensor& x, int64_t axis, int64_t parts);

/// Concatenate along axis; all other dimensions must agree.
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);

/// Multi-head causal self-attention on a fused projection (GPT-2 / nanoGPT layout).
/// qkv: [B, T, 3C], laid out as [q | k | v] along the last dimension; each of q, k, v is
/// split into NH heads of HS = C / NH consecutive channels. Per head:
/// y = softmax_causal(q k^T / sqrt(HS)) v. Result: [B, T, C], heads concatenated in order.
Tensor causalAttention(const Tensor& qkv, int64_t numHeads);

/// Mean over tokens of -log softmax(logits)[target]. logits: [..., V]; targets: [...]
/// (integers in [0, V)). Result: scalar. Uses log-sum-exp with max subtraction.
Tensor crossEntropy(const Tensor& logits, const Tensor& targets);

/// Sum / mean over the listed dimensions (each in [0, rank), distinct), which are removed
/// from the result shape (keepdim = false). Reducing every dimension gives a scalar.
Tensor reduceSum(const Tensor& x, const std::vector<int64_t>& dims);
Tensor reduceMean(const Tensor& x, const std::vector<int64_t>& dims);

}  // namespace tessel::ref
