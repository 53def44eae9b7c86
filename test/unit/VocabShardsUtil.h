// The vocab-parallel cross-entropy over `shards` equal slices of the logits, computed with the
// reference kernels (runtime/reference/ReferenceVocab.h) and combined as the partition pass's
// all-reduces combine the row statistics: max of row_max, sum of sum_exp, sum of target_logit.
// Backward, an all-reduce sum passes its gradient unchanged to every shard. A vocabulary the
// shards do not divide is padded at its end with zero logits (a padding row of the table
// gives a zero logit) to `shards` x ceil(V / shards), and each shard reads its slice through
// mask_vocab_padding (-inf on padding; its gradient 0 there), as the partition pass builds
// it. Shared by
// VocabParallelReferenceTest.cpp and the PyTorch comparison's tool
// (test/tools/vocab_cross_entropy_export.cpp).
#pragma once

#include "runtime/reference/ReferenceGrad.h"
#include "runtime/reference/ReferenceVocab.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace tessel::ref::vocabshards {

inline Tensor offsetOf(int64_t first) { return Tensor::filled({}, static_cast<double>(first)); }

/// x [..., V] with its last dimension cut or zero-padded to `columns`.
inline Tensor resizeLast(const Tensor& x, int64_t columns) {
  std::vector<int64_t> shape = x.shape;
  int64_t v = shape.back(), rows = x.numel() / v;
  shape.back() = columns;
  Tensor out(shape);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t j = 0; j < std::min(v, columns); ++j) out.data[n * columns + j] = x.data[n * v + j];
  return out;
}

/// Loss and dlogits (for the loss gradient `dloss`) of the cross-entropy of z [..., V]
/// against `targets`, with V split into `shards` parts of ceil(V / shards) columns, the last
/// ones padded.
inline std::pair<Tensor, Tensor> crossEntropy(const Tensor& z, const Tensor& targets,
                                              const Tensor& dloss, int64_t shards) {
  int64_t v = z.shape.back(), local = (v + shards - 1) / shards, axis = z.rank() - 1;
  std::vector<Tensor> parts = split(resizeLast(z, local * shards), axis, shards);
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < shards; ++r) parts[r] = maskVocabPadding(parts[r], offsetOf(r * local), v, -inf);
  Tensor m = rowMax(parts[0]);
  for (int64_t r = 1; r < shards; ++r) {  // all_reduce max
    Tensor mr = rowMax(parts[r]);
    for (int64_t n = 0; n < m.numel(); ++n) m.data[n] = std::max(m.data[n], mr.data[n]);
  }
  Tensor s(m.shape), zt(m.shape);
  for (int64_t r = 0; r < shards; ++r) {  // all_reduce sum, twice
    s = add(s, sumExp(parts[r], m));
    zt = add(zt, targetLogit(parts[r], targets, offsetOf(r * local), v));
  }
  Tensor loss = crossEntropyFromStats(m, s, zt);
  CrossEntropyFromStatsGrads g = crossEntropyFromStatsBackward(s, dloss);
  std::vector<Tensor> dparts;
  for (int64_t r = 0; r < shards; ++r)
    dparts.push_back(maskVocabPadding(
        add(sumExpBackward(parts[r], m, g.dsum),
            targetLogitBackward(targets, offsetOf(r * local), g.dtarget, local)),
        offsetOf(r * local), v, 0.0));
  return {loss, resizeLast(concat(dparts, axis), v)};
}

}  // namespace tessel::ref::vocabshards
