// Reference kernels: the numerical oracle of Tessel (see Reference.h for the promise).
//
// Every kernel is a direct transcription of its formula in f64 with plain loops, summing in
// index order. Every kernel first checks that each input's data size matches its shape
// (Tensor's fields are public, so a caller can break that) and then the op's own shape rules,
// throwing ShapeError with the offending shapes spelled by shapeString.
#include "runtime/reference/Reference.h"

#include "runtime/reference/Checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

namespace tessel::ref {
using namespace detail;  // the shared checks of Checks.h

namespace {

/// Elementwise binary op with suffix broadcasting (see Reference.h).
template <typename F>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, F f) {
  checkTensor(op, "a", a);
  checkTensor(op, "b", b);
  const Tensor& longer = a.rank() >= b.rank() ? a : b;
  const Tensor& shorter = a.rank() >= b.rank() ? b : a;
  size_t offset = longer.shape.size() - shorter.shape.size();
  if (!std::equal(shorter.shape.begin(), shorter.shape.end(), longer.shape.begin() + offset))
    throw ShapeError(fmt::format(
        "{}: shapes are not broadcast-compatible: a is {}, b is {} (the shorter shape must equal "
        "the trailing dimensions of the longer)",
        op, shapeString(a.shape), shapeString(b.shape)));
  Tensor out(longer.shape);
  // When the shorter tensor has no elements, neither has the longer one, so `%` never sees 0.
  int64_t na = a.numel(), nb = b.numel();
  for (int64_t i = 0; i < out.numel(); ++i) out.data[i] = f(a.data[i % na], b.data[i % nb]);
  return out;
}

/// Throws unless dims are distinct and in [0, rank); returns a per-dimension "reduced" mask.
std::vector<bool> reducedMask(const char* op, const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= x.rank())
      throw ShapeError(fmt::format("{}: dimension {} out of range for x of shape {} (rank {})", op,
                                   d, shapeString(x.shape), x.rank()));
    if (reduced[d])
      throw ShapeError(fmt::format("{}: dimension {} listed twice for x of shape {}", op, d,
                                   shapeString(x.shape)));
    reduced[d] = true;
  }
  return reduced;
}

/// reduceSum, with the op's name for error messages.
Tensor sumOver(const char* op, const Tensor& x, const std::vector<int64_t>& dims) {
  checkTensor(op, "x", x);
  std::vector<bool> reduced = reducedMask(op, x, dims);
  std::vector<int64_t> outShape;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (!reduced[d]) outShape.push_back(x.shape[d]);
  Tensor out(outShape);
  if (x.numel() == 0) return out;
  // Walk x in row-major order; the output offset uses only the kept dimensions.
  std::vector<int64_t> outStrides = stridesOf(outShape), index(x.shape.size(), 0);
  int64_t flat = 0;
  do {
    int64_t dst = 0;
    for (size_t d = 0, o = 0; d < x.shape.size(); ++d)
      if (!reduced[d]) dst += index[d] * outStrides[o++];
    out.data[dst] += x.data[flat++];
  } while (nextIndex(index, x.shape));
  return out;
}

}  // namespace

// ---- Tensor ---------------------------------------------------------------------------------

Tensor::Tensor(std::vector<int64_t> shape_)
    : shape(std::move(shape_)), data(checkedNumel(shape, "Tensor"), 0.0) {}

Tensor Tensor::filled(std::vector<int64_t> shape, double value) {
  Tensor t(std::move(shape));
  std::fill(t.data.begin(), t.data.end(), value);
  return t;
}

Tensor::Tensor(std::vector<int64_t> shape_, std::vector<double> data_)
    : shape(std::move(shape_)), data(std::move(data_)) {
  checkTensor("Tensor", "the new tensor", *this);
}

double Tensor::at(const std::vector<int64_t>& index) const {
  bool ok = index.size() == shape.size();
  for (size_t i = 0; ok && i < index.size(); ++i) ok = index[i] >= 0 && index[i] < shape[i];
  if (!ok)
    throw ShapeError(fmt::format("Tensor::at: index {} out of range for shape {}",
                                 indexString(index), shapeString(shape)));
  int64_t flat = 0;
  for (size_t i = 0; i < index.size(); ++i) flat = flat * shape[i] + index[i];
  return data.at(flat);
}

std::string shapeString(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  // Appended piecewise: `"x" + std::to_string(...)` trips GCC 12's false -Wrestrict (PR 105329).
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

// ---- matmul ---------------------------------------------------------------------------------

Tensor matmul(const Tensor& a, const Tensor& b, bool transposeA, bool transposeB) {
  checkTensor("matmul", "a", a);
  checkTensor("matmul", "b", b);
  if (a.rank() < 2 || b.rank() < 2)
    throw ShapeError(fmt::format("matmul: operands must have rank >= 2: a is {}, b is {}",
                                 shapeString(a.shape), shapeString(b.shape)));
  size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = transposeA ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t ka = transposeA ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = transposeB ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = transposeB ? b.shape[rb - 2] : b.shape[rb - 1];
  if (ka != kb)
    throw ShapeError(fmt::format(
        "matmul: contracting dimensions differ: a is {} (K={}), b is {} (K={})",
        shapeString(a.shape), ka, shapeString(b.shape), kb));
  std::vector<int64_t> batchA(a.shape.begin(), a.shape.end() - 2);
  std::vector<int64_t> batchB(b.shape.begin(), b.shape.end() - 2);
  bool sharedB = rb == 2;
  if (!sharedB && batchA != batchB)
    throw ShapeError(fmt::format(
        "matmul: batch dimensions differ: a is {} (batch {}), b is {} (batch {})",
        shapeString(a.shape), shapeString(batchA), shapeString(b.shape), shapeString(batchB)));

  int64_t k = ka, batches = product(batchA);
  std::vector<int64_t> outShape = batchA;
  outShape.push_back(m);
  outShape.push_back(n);
  Tensor out(outShape);
  for (int64_t bt = 0; bt < batches; ++bt) {
    const double* pa = a.data.data() + bt * m * k;
    const double* pb = b.data.data() + (sharedB ? 0 : bt * k * n);
    double* po = out.data.data() + bt * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p)
          sum += (transposeA ? pa[p * m + i] : pa[i * k + p]) *
                 (transposeB ? pb[j * k + p] : pb[p * n + j]);
        po[i * n + j] = sum;
      }
  }
  return out;
}

// ---- elementwise ----------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b) {
  return binary("add", a, b, [](double x, double y) { return x + y; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary("sub", a, b, [](double x, double y) { return x - y; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary("mul", a, b, [](double x, double y) { return x * y; });
}

Tensor scale(const Tensor& x, double factor) {
  checkTensor("scale", "x", x);
  Tensor out = x;
  for (double& v : out.data) v *= factor;
  return out;
}

Tensor gelu(const Tensor& x) {
  checkTensor("gelu", "x", x);
  const double c = std::sqrt(2.0 / std::numbers::pi);
  Tensor out = x;
  for (double& v : out.data) v = 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
  return out;
}

Tensor relu(const Tensor& x) {
  checkTensor("relu", "x", x);
  Tensor out = x;
  for (double& v : out.data) v = v > 0.0 ? v : 0.0;
  return out;
}

// ---- normalisation --------------------------------------------------------------------------

Tensor layerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  checkTensor("layerNorm", "x", x);
  checkTensor("layerNorm", "gamma", gamma);
  checkTensor("layerNorm", "beta", beta);
  if (x.rank() < 1)
    throw ShapeError(fmt::format("layerNorm: x must have rank >= 1, got x of shape {}",
                                 shapeString(x.shape)));
  int64_t c = x.shape.back();
  if (gamma.shape != std::vector<int64_t>{c} || beta.shape != std::vector<int64_t>{c})
    throw ShapeError(fmt::format(
        "layerNorm: gamma and beta must be [C] with C={}: x is {}, gamma is {}, beta is {}", c,
        shapeString(x.shape), shapeString(gamma.shape), shapeString(beta.shape)));
  Tensor out(x.shape);
  int64_t rows = product(x.shape, 0, x.shape.size() - 1);
  for (int64_t r = 0; c > 0 && r < rows; ++r) {
    const double* px = x.data.data() + r * c;
    double* po = out.data.data() + r * c;
    double mean = 0.0;
    for (int64_t i = 0; i < c; ++i) mean += px[i];
    mean /= static_cast<double>(c);
    double var = 0.0;  // two-pass biased variance
    for (int64_t i = 0; i < c; ++i) var += (px[i] - mean) * (px[i] - mean);
    var /= static_cast<double>(c);
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < c; ++i)
      po[i] = (px[i] - mean) * rstd * gamma.data[i] + beta.data[i];
  }
  return out;
}

Tensor softmax(const Tensor& x, bool causal) {
  checkTensor("softmax", "x", x);
  if (x.rank() < (causal ? 2 : 1) ||
      (causal && x.shape[x.shape.size() - 1] != x.shape[x.shape.size() - 2]))
    throw ShapeError(fmt::format("softmax: x must be {}, got x of shape {}",
                                 causal ? "[..., T, T] when causal" : "of rank >= 1",
                                 shapeString(x.shape)));
  int64_t len = x.shape.back();
  int64_t rows = product(x.shape, 0, x.shape.size() - 1);
  Tensor out(x.shape);  // zero-filled: masked entries stay exactly 0
  for (int64_t r = 0; r < rows; ++r) {
    const double* px = x.data.data() + r * len;
    double* po = out.data.data() + r * len;
    // In the causal case row r of the flattened tensor is query position r % T.
    int64_t valid = causal ? r % len + 1 : len;
    if (valid == 0) continue;
    double mx = px[0];
    for (int64_t i = 1; i < valid; ++i) mx = std::max(mx, px[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < valid; ++i) sum += po[i] = std::exp(px[i] - mx);
    for (int64_t i = 0; i < valid; ++i) po[i] /= sum;
  }
  return out;
}

// ---- gather and layout ----------------------------------------------------------------------

Tensor embedding(const Tensor& table, const Tensor& indices) {
  checkTensor("embedding", "table", table);
  checkTensor("embedding", "indices", indices);
  if (table.rank() != 2)
    throw ShapeError(fmt::format("embedding: table must be [V, C], got table {} (indices {})",
                                 shapeString(table.shape), shapeString(indices.shape)));
  int64_t v = table.shape[0], c = table.shape[1];
  std::vector<int64_t> outShape = indices.shape;
  outShape.push_back(c);
  Tensor out(outShape);
  std::string boundText = fmt::format("table {}", shapeString(table.shape));
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t row =
        integerIn(indices.data[i], v, "embedding", "index", "indices", indices, i, boundText);
    std::copy_n(table.data.begin() + row * c, c, out.data.begin() + i * c);
  }
  return out;
}

Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape) {
  checkTensor("reshape", "x", x);
  if (checkedNumel(shape, "reshape") != x.numel())
    throw ShapeError(fmt::format("reshape: cannot reshape x of shape {} ({} elements) to {} ({} "
                                 "elements)",
                                 shapeString(x.shape), x.numel(), shapeString(shape),
                                 product(shape)));
  return Tensor(shape, x.data);
}

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  checkTensor("transpose", "x", x);
  std::vector<bool> seen(x.shape.size(), false);
  bool ok = perm.size() == x.shape.size();
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < x.rank() && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok)
    throw ShapeError(fmt::format("transpose: {} is not a permutation of the {} dimensions of x "
                                 "of shape {}",
                                 indexString(perm), x.rank(), shapeString(x.shape)));
  std::vector<int64_t> outShape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) outShape[i] = x.shape[perm[i]];
  Tensor out(outShape);
  if (out.numel() == 0) return out;
  std::vector<int64_t> xStrides = stridesOf(x.shape), index(perm.size(), 0);
  int64_t flat = 0;
  do {
    int64_t src = 0;
    for (size_t i = 0; i < perm.size(); ++i) src += index[i] * xStrides[perm[i]];
    out.data[flat++] = x.data[src];
  } while (nextIndex(index, outShape));
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t axis, int64_t parts) {
  checkTensor("split", "x", x);
  checkAxis("split", axis, x, "x");
  if (parts < 1 || x.shape[axis] % parts != 0)
    throw ShapeError(fmt::format("split: cannot split axis {} of x of shape {} into {} equal parts",
                                 axis, shapeString(x.shape), parts));
  int64_t piece = x.shape[axis] / parts;
  int64_t outer = product(x.shape, 0, axis), inner = product(x.shape, axis + 1, x.shape.size());
  std::vector<int64_t> pieceShape = x.shape;
  pieceShape[axis] = piece;
  std::vector<Tensor> out;
  for (int64_t p = 0; p < parts; ++p) {
    Tensor t(pieceShape);
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(x.data.begin() + (o * x.shape[axis] + p * piece) * inner, piece * inner,
                  t.data.begin() + o * piece * inner);
    out.push_back(std::move(t));
  }
  return out;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw ShapeError("concat: no inputs (shapes: none)");
  for (const Tensor& x : xs) checkTensor("concat", "an input", x);
  checkAxis("concat", axis, xs[0], "input 0");
  std::vector<int64_t> outShape = xs[0].shape;
  outShape[axis] = 0;
  for (size_t t = 0; t < xs.size(); ++t) {
    bool ok = xs[t].rank() == xs[0].rank();
    for (size_t d = 0; ok && d < outShape.size(); ++d)
      ok = static_cast<int64_t>(d) == axis || xs[t].shape[d] == xs[0].shape[d];
    if (!ok)
      throw ShapeError(fmt::format("concat: along axis {}, input {} of shape {} does not match "
                                   "input 0 of shape {}",
                                   axis, t, shapeString(xs[t].shape), shapeString(xs[0].shape)));
    outShape[axis] += xs[t].shape[axis];
  }
  Tensor out(outShape);
  int64_t outer = product(outShape, 0, axis), inner = product(outShape, axis + 1, outShape.size());
  auto dst = out.data.begin();
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor& x : xs) {
      int64_t chunk = x.shape[axis] * inner;
      dst = std::copy_n(x.data.begin() + o * chunk, chunk, dst);
    }
  return out;
}

// ---- attention and loss ---------------------------------------------------------------------

Tensor causalAttention(const Tensor& qkv, int64_t numHeads) {
  checkTensor("causalAttention", "qkv", qkv);
  if (qkv.rank() != 3 || qkv.shape[2] == 0 || qkv.shape[2] % 3 != 0 || numHeads < 1 ||
      (qkv.shape[2] / 3) % numHeads != 0)
    throw ShapeError(fmt::format(
        "causalAttention: qkv must be [B, T, 3C] with C > 0 a multiple of numHeads={}, got qkv "
        "of shape {}",
        numHeads, shapeString(qkv.shape)));
  int64_t bSize = qkv.shape[0], t = qkv.shape[1], c3 = qkv.shape[2], c = c3 / 3;
  int64_t hs = c / numHeads;
  double norm = std::sqrt(static_cast<double>(hs));
  Tensor out({bSize, t, c});
  std::vector<double> weights(t);
  for (int64_t b = 0; b < bSize; ++b)
    for (int64_t h = 0; h < numHeads; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const double* q = qkv.data.data() + (b * t + i) * c3 + h * hs;
        // Scores against keys 0..i (later keys are masked out), then a max-subtracted softmax.
        double mx = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          const double* k = qkv.data.data() + (b * t + j) * c3 + c + h * hs;
          double dot = 0.0;
          for (int64_t d = 0; d < hs; ++d) dot += q[d] * k[d];
          weights[j] = dot / norm;
          mx = j == 0 ? weights[j] : std::max(mx, weights[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += weights[j] = std::exp(weights[j] - mx);
        double* y = out.data.data() + (b * t + i) * c + h * hs;
        for (int64_t d = 0; d < hs; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j)
            acc += weights[j] / sum * qkv.data[(b * t + j) * c3 + 2 * c + h * hs + d];
          y[d] = acc;
        }
      }
  return out;
}

Tensor crossEntropy(const Tensor& logits, const Tensor& targets) {
  checkLogitsTargets("crossEntropy", logits, targets);
  int64_t v = logits.shape.back(), tokens = targets.numel();
  std::string boundText = fmt::format("logits {}", shapeString(logits.shape));
  double total = 0.0;
  for (int64_t n = 0; n < tokens; ++n) {
    int64_t target = integerIn(targets.data[n], v, "crossEntropy", "target", "targets", targets,
                               n, boundText);
    const double* row = logits.data.data() + n * v;
    double mx = *std::max_element(row, row + v);
    double sum = 0.0;
    for (int64_t i = 0; i < v; ++i) sum += std::exp(row[i] - mx);
    total += mx + std::log(sum) - row[target];
  }
  return Tensor::filled({}, total / static_cast<double>(tokens));  // a scalar: shape {}
}

// ---- reductions -----------------------------------------------------------------------------

Tensor reduceSum(const Tensor& x, const std::vector<int64_t>& dims) {
  return sumOver("reduceSum", x, dims);
}

Tensor reduceMean(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor out = sumOver("reduceMean", x, dims);
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape[d];
  if (count == 0)
    throw ShapeError(fmt::format("reduceMean: the mean over dimensions {} of x of shape {} has "
                                 "no elements",
                                 indexString(dims), shapeString(x.shape)));
  for (double& v : out.data) v /= static_cast<double>(count);
  return out;
}

}  // namespace tessel::ref
