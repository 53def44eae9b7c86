// Reference kernels of the vocab-parallel ops (compiler/TesselVocabParallelOps.td): the local
// work of one shard of a vocabulary split over ranks, forward and backward, in f64.
//
// Promise: as Reference.h. A shard holds vocabulary entries [offset, offset + Vl) of V; the
// sum over shards of embeddingShard is embedding, and crossEntropyFromStats of the shards'
// statistics combined (max of rowMax, sum of sumExp, sum of targetLogit) is crossEntropy
// (test/unit/VocabParallelTest.cpp checks both). `offset` is an i32 scalar tensor, as in the
// IR. A shard may reach past V (a vocabulary padded to a multiple of the ranks: its entries
// from V on are padding, which no id selects). Ids and targets outside [0, V) and negative
// offsets throw ShapeError.
#pragma once

#include "runtime/reference/Reference.h"

namespace tessel::ref {

/// table [Vl, C] (rows [offset, offset + Vl) of a [vocab, C] table), indices [...] (integers
/// in [0, vocab)) -> [..., C]: row indices - offset where this shard holds it, else zeros.
Tensor embeddingShard(const Tensor& table, const Tensor& indices, const Tensor& offset,
                      int64_t vocab);

/// Backward of embeddingShard: dtable [rows, C], dtable[v] = sum of dy rows whose index is
/// offset + v, in index order; indices outside the shard add nothing.
Tensor embeddingShardBackward(const Tensor& indices, const Tensor& offset, const Tensor& dy,
                              int64_t rows);

/// x [..., Vl] (Vl >= 1) -> [...]: the maximum over the last dimension.
Tensor rowMax(const Tensor& x);

/// x [..., Vl], shift [...] -> [...]: sum over j of exp(x[..., j] - shift[...]).
Tensor sumExp(const Tensor& x, const Tensor& shift);

/// Backward of sumExp with respect to x: dx[..., j] = dy[...] * exp(x[..., j] - shift[...]).
Tensor sumExpBackward(const Tensor& x, const Tensor& shift, const Tensor& dy);

/// logits [..., Vl] (columns [offset, offset + Vl) of [..., vocab]), targets [...] (integers in
/// [0, vocab)) -> [...]: logits[..., target - offset] where this shard holds it, else 0.
Tensor targetLogit(const Tensor& logits, const Tensor& targets, const Tensor& offset,
                   int64_t vocab);

/// x [..., Vl] (columns [offset, offset + Vl) of [..., vocab] padded past vocab) -> x with
/// every column j where offset + j >= vocab set to `fill` (-inf before the row statistics,
/// 0 for the gradient).
Tensor maskVocabPadding(const Tensor& x, const Tensor& offset, int64_t vocab, double fill);

/// Backward of targetLogit: [..., rows], dy[...] at column target - offset where this shard
/// holds the target, 0 elsewhere.
Tensor targetLogitBackward(const Tensor& targets, const Tensor& offset, const Tensor& dy,
                           int64_t rows);

/// max, sum, target [...] (one shape, at least one element) -> scalar: the mean over rows of
/// log(sum) + max - target.
Tensor crossEntropyFromStats(const Tensor& max, const Tensor& sum, const Tensor& target);

/// Gradients of crossEntropyFromStats (none to max: a stop-gradient shift).
struct CrossEntropyFromStatsGrads {
  Tensor dsum;     // dloss / (N sum)
  Tensor dtarget;  // -dloss / N
};
CrossEntropyFromStatsGrads crossEntropyFromStatsBackward(const Tensor& sum, const Tensor& dloss);

}  // namespace tessel::ref
