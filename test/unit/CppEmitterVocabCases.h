// Case builders of the vocab-parallel ops (compiler/TesselVocabParallelOps.td) for
// CppEmitterTest.cpp and CudaKernelOpsTest.cpp, as CppEmitterCases.h's for the other ops.
// Ids, targets and offsets are drawn so that some ids fall in the shard and some outside it
// (the offset is uniform in [0, vocab - Vl], every valid one).
//
// Tolerances (u = 2^-24): copies and selections are exact; exp(x - m) errs by 1.5 u (the
// preamble's exp, measured) plus u |x - m| for the rounding of its argument (|x - m| <= 6
// here: x in [-5, 5], m in [-1, 1]), so at most 8 u relative.
#pragma once

#include "test/unit/CppEmitterCases.h"

#include "runtime/reference/ReferenceVocab.h"

namespace tessel::cpptest {

/// Logits-shaped rows [..., Vl] and their statistics' shape [...].
inline Shape statsOf(const Shape& rows) { return Shape(rows.begin(), rows.end() - 1); }

/// An offset argument for a shard of `local` entries of `vocab`: uniform in [0, vocab - local].
inline Arg offsetArg(int64_t vocab, int64_t local) {
  return {{}, 0, static_cast<double>(vocab - local + 1), true};
}

inline Case embeddingShard(const Shape& table, const Shape& idx, int64_t vocab) {
  Shape out = idx;
  out.push_back(table[1]);
  return makeCase(fmt::format("embedding_shard_{}_{}_{}", nameOf(table), nameOf(idx), vocab),
                  {{table}, {idx, 0, static_cast<double>(vocab), true}, offsetArg(vocab, table[0])},
                  fmt::format("%r = tessel.embedding_shard %a0, %a1, %a2 vocab {} : ({}, {}, "
                              "tensor<i32>) -> {}",
                              vocab, ty(table), ty(idx, "i32"), ty(out)),
                  {ty(out)}, {{0, 0}});  // a copy or a zero: exact
}

inline Case embeddingShardGrad(const Shape& idx, int64_t v, int64_t c, int64_t vocab) {
  Shape grad = idx;
  grad.push_back(c);
  // As embedding_grad: row v is an f32 sum, in index order, of the k rows whose index is
  // offset + v: at most k u sum |terms|.
  Case k = makeCase(
      fmt::format("embedding_shard_grad_{}_{}x{}_{}", nameOf(idx), v, c, vocab),
      {{idx, 0, static_cast<double>(vocab), true}, offsetArg(vocab, v), {grad}},
      fmt::format("%r = tessel.embedding_shard_grad %a0, %a1, %a2 : ({}, tensor<i32>, {}) -> {}",
                  ty(idx, "i32"), ty(grad), ty({v, c})),
      {ty({v, c})}, {{0, kU, kMagnitude}});
  k.magnitude = [v](const std::vector<ref::Tensor>& in) {
    ref::Tensor count =
        ref::embeddingShardBackward(in[0], in[1], ref::Tensor::filled(in[2].shape, 1.0), v);
    return std::vector<ref::Tensor>{
        ref::mul(count, ref::embeddingShardBackward(in[0], in[1], absOf(in[2]), v))};
  };
  return k;
}

inline Case rowMax(const Shape& rows) {
  return makeCase(fmt::format("row_max_{}", nameOf(rows)), {{rows, -5, 5}},
                  fmt::format("%r = tessel.row_max %a0 : {} -> {}", ty(rows), ty(statsOf(rows))),
                  {ty(statsOf(rows))}, {{0, 0}});  // a selection: exact
}

inline Case sumExp(const Shape& rows) {
  // V positive terms of 8 u relative error each, summed in f32: (V + 8) u relative.
  return makeCase(fmt::format("sum_exp_{}", nameOf(rows)), {{rows, -5, 5}, {statsOf(rows)}},
                  fmt::format("%r = tessel.sum_exp %a0, %a1 : ({}, {}) -> {}", ty(rows),
                              ty(statsOf(rows)), ty(statsOf(rows))),
                  {ty(statsOf(rows))}, {{(rows.back() + 8) * kU, 0}});
}

inline Case sumExpGrad(const Shape& rows) {
  // dout * exp(x - m): the exp's 8 u and the product's u.
  return makeCase(fmt::format("sum_exp_grad_{}", nameOf(rows)),
                  {{rows, -5, 5}, {statsOf(rows)}, {statsOf(rows)}},
                  fmt::format("%r = tessel.sum_exp_grad %a0, %a1, %a2 : ({}, {}, {}) -> {}",
                              ty(rows), ty(statsOf(rows)), ty(statsOf(rows)), ty(rows)),
                  {ty(rows)}, {{9 * kU, 0}});
}

inline Case targetLogit(const Shape& rows, int64_t vocab) {
  Shape t = statsOf(rows);
  return makeCase(fmt::format("target_logit_{}_{}", nameOf(rows), vocab),
                  {{rows, -5, 5}, {t, 0, static_cast<double>(vocab), true},
                   offsetArg(vocab, rows.back())},
                  fmt::format("%r = tessel.target_logit %a0, %a1, %a2 vocab {} : ({}, {}, "
                              "tensor<i32>) -> {}",
                              vocab, ty(rows), ty(t, "i32"), ty(t)),
                  {ty(t)}, {{0, 0}});  // a selection or a zero: exact
}

inline Case targetLogitGrad(const Shape& rows, int64_t vocab) {
  Shape t = statsOf(rows);
  return makeCase(fmt::format("target_logit_grad_{}_{}", nameOf(rows), vocab),
                  {{t, 0, static_cast<double>(vocab), true}, offsetArg(vocab, rows.back()), {t}},
                  fmt::format("%r = tessel.target_logit_grad %a0, %a1, %a2 : ({}, tensor<i32>, "
                              "{}) -> {}",
                              ty(t, "i32"), ty(t), ty(rows)),
                  {ty(rows)}, {{0, 0}});  // a copy or a zero: exact
}

/// mask_vocab_padding of `rows` [..., Vl] of `vocab`, `fill` -inf (true) or 0: the offset is
/// uniform in [vocab - Vl, vocab], from a shard with no padding to one of padding only.
inline Case maskVocabPadding(const Shape& rows, int64_t vocab, bool minusInfinity) {
  const int64_t l = rows.back();
  return makeCase(fmt::format("mask_vocab_padding_{}_{}_{}", nameOf(rows), vocab, minusInfinity ? "inf" : "0"),
                  {{rows, -5, 5}, {{}, static_cast<double>(vocab - l), static_cast<double>(vocab + 1), true}},
                  fmt::format("%r = tessel.mask_vocab_padding %a0, %a1 vocab {} fill {} : ({}, tensor<i32>) -> {}",
                              vocab, minusInfinity ? "0xFFF0000000000000" : "0.0", ty(rows), ty(rows)),
                  {ty(rows)}, {{0, 0}});  // a copy or the constant: exact
}

inline Case crossEntropyFromStats(const Shape& stats) {
  // Per row: log(s) errs by u |log s|, (m - zt) and the sum by u each of |m - zt| + |log s|
  // <= 16 here; the mean is taken in double. So 48 u absolute.
  return makeCase(fmt::format("cross_entropy_from_stats_{}", nameOf(stats)),
                  {{stats, -5, 5}, {stats, 0.5, 100}, {stats, -5, 5}},
                  fmt::format("%r = tessel.cross_entropy_from_stats %a0, %a1, %a2 : ({}, {}, {}) "
                              "-> tensor<f32>",
                              ty(stats), ty(stats), ty(stats)),
                  {"tensor<f32>"}, {{0, 48 * kU}});
}

inline Case crossEntropyFromStatsGrad(const Shape& stats) {
  // dloss / N (one rounding), then / s (one more): 2 u relative; -dloss / N: u.
  return makeCase(fmt::format("cross_entropy_from_stats_grad_{}", nameOf(stats)),
                  {{stats, 0.5, 100}, {{}, 0.5, 2}},
                  fmt::format("%r:2 = tessel.cross_entropy_from_stats_grad %a0, %a1 : ({}, "
                              "tensor<f32>) -> ({}, {})",
                              ty(stats), ty(stats), ty(stats)),
                  {ty(stats), ty(stats)}, {{3 * kU, 0}, {2 * kU, 0}});
}

/// Every vocab-parallel op at sizes 1, odd and a parallel one (rows x entries >= 32 Ki).
inline std::vector<Case> vocabCases() {
  std::vector<Case> c;
  c.push_back(embeddingShard({7, 33}, {2, 7}, 20));
  c.push_back(embeddingShard({1, 1}, {}, 3));
  c.push_back(embeddingShard({128, 64}, {8, 64}, 256));
  c.push_back(embeddingShardGrad({2, 7}, 5, 33, 12));
  c.push_back(embeddingShardGrad({1}, 1, 7, 1));
  c.push_back(embeddingShardGrad({8, 64}, 128, 64, 256));
  for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 7, 33}, Shape{64, 7, 128}}) {
    c.push_back(rowMax(s));
    c.push_back(sumExp(s));
    c.push_back(sumExpGrad(s));
    c.push_back(targetLogit(s, 3 * s.back()));
    c.push_back(targetLogitGrad(s, 3 * s.back()));
  }
  c.push_back(targetLogit({2, 7, 33}, 33));  // one shard: every target is held here
  for (bool inf : {true, false}) {
    c.push_back(maskVocabPadding({1, 1}, 1, inf));
    c.push_back(maskVocabPadding({2, 7, 33}, 40, inf));
    c.push_back(maskVocabPadding({64, 7, 128}, 300, inf));
  }
  for (Shape s : {Shape{1}, Shape{7}, Shape{2, 7}, Shape{64, 64}}) {
    c.push_back(crossEntropyFromStats(s));
    c.push_back(crossEntropyFromStatsGrad(s));
  }
  return c;
}

}  // namespace tessel::cpptest
