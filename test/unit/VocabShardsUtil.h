// The vocab-parallel cross-entropy over `shards` equal slices of the logits, computed with the
// reference kernels (runtime/reference/ReferenceVocab.h) and combined as the partition pass's
// all-reduces combine the row statistics: max of row_max, sum of sum_exp, sum of target_logit.
// Backward, an all-reduce sum passes its gradient unchanged to every shard. Shared by
// VocabParallelReferenceTest.cpp and the PyTorch comparison's tool
// (test/tools/vocab_cross_entropy_export.cpp).
#pragma once

#include "runtime/reference/ReferenceGrad.h"
#include "runtime/reference/ReferenceVocab.h"

#include <algorithm>
#include <utility>

namespace tessel::ref::vocabshards {

inline Tensor offsetOf(int64_t first) { return Tensor::filled({}, static_cast<double>(first)); }

/// Loss and dlogits (for the loss gradient `dloss`) of the cross-entropy of z [..., V]
/// against `targets`, with V split into `shards` equal parts (V % shards == 0).
inline std::pair<Tensor, Tensor> crossEntropy(const Tensor& z, const Tensor& targets,
                                              const Tensor& dloss, int64_t shards) {
  int64_t v = z.shape.back(), local = v / shards, axis = z.rank() - 1;
  std::vector<Tensor> parts = split(z, axis, shards);
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
    dparts.push_back(add(sumExpBackward(parts[r], m, g.dsum),
                         targetLogitBackward(targets, offsetOf(r * local), g.dtarget, local)));
  return {loss, concat(dparts, axis)};
}

}  // namespace tessel::ref::vocabshards
