// Reference kernels of the vocab-parallel ops (see ReferenceVocab.h for the promise): each its
// documented formula in f64 with plain loops, after the shared checks of Checks.h.
#include "runtime/reference/ReferenceVocab.h"

#include "runtime/reference/Checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel::ref {
using namespace detail;  // the shared checks of Checks.h

namespace {

/// The shard's first entry: an integer scalar in [0, limit].
int64_t checkOffset(const char* op, const Tensor& offset, int64_t limit,
                    const std::string& limitText) {
  checkTensor(op, "offset", offset);
  if (offset.rank() != 0)
    throw ShapeError(fmt::format("{}: offset must be a scalar, got shape {}", op,
                                 shapeString(offset.shape)));
  return integerIn(offset.data[0], limit + 1, op, "offset", "offset", offset, 0, limitText);
}

/// rows [..., L] (rank >= 1, L >= 1) and each of `others` [...]; returns L.
int64_t checkRows(const char* op, const char* rowsName, const Tensor& rows,
                  std::initializer_list<std::pair<const char*, const Tensor*>> others) {
  checkTensor(op, rowsName, rows);
  if (rows.rank() < 1 || rows.shape.back() < 1)
    throw ShapeError(fmt::format("{}: {} must be [..., Vl] with Vl >= 1, got {}", op, rowsName,
                                 shapeString(rows.shape)));
  std::vector<int64_t> lead(rows.shape.begin(), rows.shape.end() - 1);
  for (auto [name, t] : others) {
    checkTensor(op, name, *t);
    if (t->shape != lead)
      throw ShapeError(fmt::format("{}: {} must be {} without its last dimension ({}), got {}",
                                   op, name, rowsName, shapeString(lead), shapeString(t->shape)));
  }
  return rows.shape.back();
}

}  // namespace

Tensor embeddingShard(const Tensor& table, const Tensor& indices, const Tensor& offset,
                      int64_t vocab) {
  checkTensor("embeddingShard", "table", table);
  checkTensor("embeddingShard", "indices", indices);
  if (table.rank() != 2 || table.shape[0] < 1 || table.shape[0] > vocab)
    throw ShapeError(fmt::format("embeddingShard: table must be [Vl, C] with 1 <= Vl <= vocab = "
                                 "{}, got table {}",
                                 vocab, shapeString(table.shape)));
  int64_t rows = table.shape[0], c = table.shape[1];
  int64_t first = checkOffset("embeddingShard", offset, std::numeric_limits<int32_t>::max(),
                              "an i32");
  std::vector<int64_t> outShape = indices.shape;
  outShape.push_back(c);
  Tensor out(outShape);  // zeros: the rows other shards hold
  std::string boundText = fmt::format("vocab {}", vocab);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t row = integerIn(indices.data[i], vocab, "embeddingShard", "index", "indices", indices,
                            i, boundText) -
                  first;
    if (row >= 0 && row < rows)
      std::copy_n(table.data.begin() + row * c, c, out.data.begin() + i * c);
  }
  return out;
}

Tensor embeddingShardBackward(const Tensor& indices, const Tensor& offset, const Tensor& dy,
                              int64_t rows) {
  checkTensor("embeddingShardBackward", "indices", indices);
  checkTensor("embeddingShardBackward", "dy", dy);
  if (rows < 1 || dy.rank() != indices.rank() + 1 ||
      !std::equal(indices.shape.begin(), indices.shape.end(), dy.shape.begin()))
    throw ShapeError(fmt::format("embeddingShardBackward: dy must be [..., C] with [...] the "
                                 "indices shape, and rows >= 1: indices is {}, dy is {}, rows is "
                                 "{}",
                                 shapeString(indices.shape), shapeString(dy.shape), rows));
  int64_t first = checkOffset("embeddingShardBackward", offset,
                              std::numeric_limits<int32_t>::max(), "an i32");
  int64_t c = dy.shape.back();
  Tensor dtable({rows, c});
  for (int64_t i = 0; i < indices.numel(); ++i) {
    double row = indices.data[i] - static_cast<double>(first);
    if (!(row >= 0 && row < static_cast<double>(rows))) continue;  // another shard's row
    int64_t r = static_cast<int64_t>(row);
    for (int64_t j = 0; j < c; ++j) dtable.data[r * c + j] += dy.data[i * c + j];
  }
  return dtable;
}

Tensor rowMax(const Tensor& x) {
  int64_t l = checkRows("rowMax", "x", x, {});
  Tensor out(std::vector<int64_t>(x.shape.begin(), x.shape.end() - 1));
  for (int64_t n = 0; n < out.numel(); ++n)
    out.data[n] = *std::max_element(x.data.begin() + n * l, x.data.begin() + (n + 1) * l);
  return out;
}

Tensor sumExp(const Tensor& x, const Tensor& shift) {
  int64_t l = checkRows("sumExp", "x", x, {{"shift", &shift}});
  Tensor out(shift.shape);
  for (int64_t n = 0; n < out.numel(); ++n)
    for (int64_t j = 0; j < l; ++j) out.data[n] += std::exp(x.data[n * l + j] - shift.data[n]);
  return out;
}

Tensor sumExpBackward(const Tensor& x, const Tensor& shift, const Tensor& dy) {
  int64_t l = checkRows("sumExpBackward", "x", x, {{"shift", &shift}, {"dy", &dy}});
  Tensor dx(x.shape);
  for (int64_t n = 0; n < dy.numel(); ++n)
    for (int64_t j = 0; j < l; ++j)
      dx.data[n * l + j] = dy.data[n] * std::exp(x.data[n * l + j] - shift.data[n]);
  return dx;
}

Tensor targetLogit(const Tensor& logits, const Tensor& targets, const Tensor& offset,
                   int64_t vocab) {
  int64_t l = checkRows("targetLogit", "logits", logits, {{"targets", &targets}});
  if (l > vocab)
    throw ShapeError(fmt::format("targetLogit: logits {} hold more than vocab = {} columns",
                                 shapeString(logits.shape), vocab));
  int64_t first = checkOffset("targetLogit", offset, std::numeric_limits<int32_t>::max(),
                              "an i32");
  Tensor out(targets.shape);
  std::string boundText = fmt::format("vocab {}", vocab);
  for (int64_t n = 0; n < targets.numel(); ++n) {
    int64_t j = integerIn(targets.data[n], vocab, "targetLogit", "target", "targets", targets, n,
                          boundText) -
                first;
    if (j >= 0 && j < l) out.data[n] = logits.data[n * l + j];
  }
  return out;
}

Tensor maskVocabPadding(const Tensor& x, const Tensor& offset, int64_t vocab, double fill) {
  int64_t l = checkRows("maskVocabPadding", "x", x, {});
  if (l > vocab)
    throw ShapeError(fmt::format("maskVocabPadding: x {} holds more than vocab = {} columns",
                                 shapeString(x.shape), vocab));
  int64_t first = checkOffset("maskVocabPadding", offset, std::numeric_limits<int32_t>::max(),
                              "an i32");
  Tensor out = x;
  for (int64_t n = 0; n < x.numel() / l; ++n)
    for (int64_t j = std::max<int64_t>(0, vocab - first); j < l; ++j) out.data[n * l + j] = fill;
  return out;
}

Tensor targetLogitBackward(const Tensor& targets, const Tensor& offset, const Tensor& dy,
                           int64_t rows) {
  checkSameShape("targetLogitBackward", "targets", targets, "dy", dy);
  if (rows < 1)
    throw ShapeError(fmt::format("targetLogitBackward: the shard must hold at least one column, "
                                 "got {}",
                                 rows));
  int64_t first = checkOffset("targetLogitBackward", offset, std::numeric_limits<int32_t>::max(),
                              "an i32");
  std::vector<int64_t> shape = targets.shape;
  shape.push_back(rows);
  Tensor dx(shape);
  for (int64_t n = 0; n < targets.numel(); ++n) {
    double j = targets.data[n] - static_cast<double>(first);
    if (j >= 0 && j < static_cast<double>(rows))
      dx.data[n * rows + static_cast<int64_t>(j)] = dy.data[n];
  }
  return dx;
}

Tensor crossEntropyFromStats(const Tensor& max, const Tensor& sum, const Tensor& target) {
  checkSameShape("crossEntropyFromStats", "max", max, "sum", sum);
  checkSameShape("crossEntropyFromStats", "max", max, "target", target);
  if (max.numel() == 0)
    throw ShapeError(fmt::format("crossEntropyFromStats: no rows to average over: the "
                                 "statistics are {}",
                                 shapeString(max.shape)));
  double total = 0.0;
  for (int64_t n = 0; n < max.numel(); ++n)
    total += std::log(sum.data[n]) + max.data[n] - target.data[n];
  return Tensor::filled({}, total / static_cast<double>(max.numel()));
}

CrossEntropyFromStatsGrads crossEntropyFromStatsBackward(const Tensor& sum, const Tensor& dloss) {
  checkTensor("crossEntropyFromStatsBackward", "sum", sum);
  checkTensor("crossEntropyFromStatsBackward", "dloss", dloss);
  if (dloss.rank() != 0 || sum.numel() == 0)
    throw ShapeError(fmt::format("crossEntropyFromStatsBackward: dloss must be a scalar and sum "
                                 "non-empty: dloss is {}, sum is {}",
                                 shapeString(dloss.shape), shapeString(sum.shape)));
  double factor = dloss.data[0] / static_cast<double>(sum.numel());
  CrossEntropyFromStatsGrads g{Tensor(sum.shape), Tensor::filled(sum.shape, -factor)};
  for (int64_t n = 0; n < sum.numel(); ++n) g.dsum.data[n] = factor / sum.data[n];
  return g;
}

}  // namespace tessel::ref
