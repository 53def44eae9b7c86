// Internal to the reference kernels (Reference.cpp, ReferenceGrad.cpp): the shape and index
// helpers they share, so that every kernel validates and words its ShapeErrors the same way.
// Not part of the public API; do not include from outside runtime/reference/.
#pragma once

#include "runtime/reference/Reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tessel::ref::detail {

/// Product of dims[begin, end). Callers have already rejected negative dimensions.
inline int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}

inline int64_t product(const std::vector<int64_t>& dims) { return product(dims, 0, dims.size()); }

/// Element count of a shape; throws on a negative dimension.
inline int64_t checkedNumel(const std::vector<int64_t>& shape, const char* what) {
  for (int64_t d : shape)
    if (d < 0)
      throw ShapeError(fmt::format("{}: negative dimension in shape {}", what, shapeString(shape)));
  return product(shape);
}

/// Throws unless t's data holds exactly as many values as its shape says.
inline void checkTensor(const char* op, const char* name, const Tensor& t) {
  int64_t expected = checkedNumel(t.shape, op);
  if (expected != t.numel())
    throw ShapeError(fmt::format("{}: {} has shape {} ({} elements) but holds {} values", op, name,
                                 shapeString(t.shape), expected, t.numel()));
}

/// Throws unless b has exactly a's shape (both are checked with checkTensor first).
inline void checkSameShape(const char* op, const char* nameA, const Tensor& a, const char* nameB,
                           const Tensor& b) {
  checkTensor(op, nameA, a);
  checkTensor(op, nameB, b);
  if (a.shape != b.shape)
    throw ShapeError(fmt::format("{}: {} and {} must have the same shape: {} is {}, {} is {}", op,
                                 nameA, nameB, nameA, shapeString(a.shape), nameB,
                                 shapeString(b.shape)));
}

/// "[1, 2]": a multi-index, for error messages.
inline std::string indexString(const std::vector<int64_t>& index) {
  std::string s = "[";
  for (size_t i = 0; i < index.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(index[i]);
  }
  return s + "]";
}

/// The multi-index of flat position `flat` in a row-major tensor of this shape.
inline std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t i = shape.size(); i-- > 0;) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

/// Row-major strides of a shape.
inline std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

/// Advances a row-major multi-index; returns false after the last one.
inline bool nextIndex(std::vector<int64_t>& index, const std::vector<int64_t>& shape) {
  for (size_t i = shape.size(); i-- > 0;) {
    if (++index[i] < shape[i]) return true;
    index[i] = 0;
  }
  return false;
}

/// Reads an integer stored as a double (a token id or target) and checks it lies in [0, bound).
/// `what` names one value ("index"), `holderName` the tensor holding it ("indices"), and
/// `boundText` what the bound comes from; they only shape the error message.
inline int64_t integerIn(double value, int64_t bound, const char* op, const char* what,
                         const char* holderName, const Tensor& holder, int64_t flat,
                         const std::string& boundText) {
  auto where = [&] {
    return fmt::format("at position {} of {} {}", indexString(unravel(flat, holder.shape)),
                       holderName, shapeString(holder.shape));
  };
  if (!std::isfinite(value) || value != std::floor(value))
    throw ShapeError(fmt::format("{}: {} {} {} is not an integer", op, what, value, where()));
  if (value < 0 || value >= static_cast<double>(bound))
    throw ShapeError(fmt::format("{}: {} {} {} is out of range [0, {}) for {}", op, what, value,
                                 where(), bound, boundText));
  return static_cast<int64_t>(value);
}

/// Throws unless axis is in [0, rank).
inline void checkAxis(const char* op, int64_t axis, const Tensor& x, const char* name) {
  if (axis < 0 || axis >= x.rank())
    throw ShapeError(fmt::format("{}: axis {} out of range for {} of shape {} (rank {})", op, axis,
                                 name, shapeString(x.shape), x.rank()));
}

/// The check shared by crossEntropy and its backward: logits [..., V], targets [...], and at
/// least one token to average over.
inline void checkLogitsTargets(const char* op, const Tensor& logits, const Tensor& targets) {
  checkTensor(op, "logits", logits);
  checkTensor(op, "targets", targets);
  if (logits.rank() < 1 ||
      !std::equal(targets.shape.begin(), targets.shape.end(), logits.shape.begin(),
                  logits.shape.end() - 1))
    throw ShapeError(fmt::format("{}: logits must be [..., V] and targets [...]: logits is {}, "
                                 "targets is {}",
                                 op, shapeString(logits.shape), shapeString(targets.shape)));
  if (targets.numel() == 0)
    throw ShapeError(fmt::format("{}: no tokens to average over: logits is {}, targets is {}", op,
                                 shapeString(logits.shape), shapeString(targets.shape)));
}

}  // namespace tessel::ref::detail
