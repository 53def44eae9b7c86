// Internal to the kernel emitters (CppEmitterVocab.cpp, CudaEmitterVocab.cpp): the arguments,
// constants and descriptions of the vocab-parallel ops' kernels (TesselVocabParallelOps.td),
// for either emitter's writer, so that the C++ and CUDA twins describe the same arguments.
// Not part of the public API.
#pragma once

#include "codegen/CppEmitterInternal.h"

#include "llvm/ADT/TypeSwitch.h"

namespace tessel::kernelcommon {

/// The sizes a vocab-parallel kernel loops over: `rows` (tokens; N) and `len` (the shard's
/// vocabulary entries per row, V; for embedding_shard(_grad) the channels C) and, for those
/// two, `shardRows` (the table shard's rows, V).
struct VocabSizes {
  int64_t rows = 0, len = 0, shardRows = 0;
};

/// Declares the op's description, arguments (results, then operands, as the op lists them)
/// and constants: N rows, V the shard's entries per row (or table rows), C channels, VOCAB the
/// global vocabulary. Every scalar operand (offset, dloss) is a one-element pointer.
template <class Writer>
VocabSizes declareVocab(Writer& w) {
  using cppgen::Letters;
  mlir::Operation* op = w.op();
  auto lead = [](mlir::Value v) {
    return cppgen::leadingLetters(cppgen::shapeOf(v).size());
  };
  auto withV = [&](mlir::Value statistic) {
    Letters l = lead(statistic);
    l.push_back("V");
    return l;
  };
  auto withC = [&](mlir::Value indices) {
    Letters l = lead(indices);
    l.push_back("C");
    return l;
  };
  auto rowsOf = [](mlir::Value v) { return cppgen::numel(cppgen::shapeOf(v)); };
  auto last = [](mlir::Value v) { return cppgen::shapeOf(v).back(); };
  VocabSizes s;
  llvm::TypeSwitch<mlir::Operation*>(op)
      .Case([&](EmbeddingShardOp o) {
        w.describe("out[n, :] = table[indices[n] - offset, :] where this shard holds the row,");
        w.describe("else 0; an index outside [0, VOCAB) gives a NaN row");
        w.output("out", o.getResult(), withC(o.getIndices()));
        w.input("table", o.getTable(), {"V", "C"});
        w.input("indices", o.getIndices(), lead(o.getIndices()));
        w.input("offset", o.getOffset(), {});
        s = {rowsOf(o.getIndices()), last(o.getTable()), cppgen::shapeOf(o.getTable())[0]};
        w.constant("VOCAB", static_cast<int64_t>(o.getVocab()), "the whole vocabulary");
      })
      .Case([&](EmbeddingShardGradOp o) {
        w.describe("dtable[v, :] = sum of dout[n, :] over n with indices[n] - offset == v, in");
        w.describe("index order; deterministic (no atomics). Other shards' indices are skipped.");
        w.output("dtable", o.getResult(), {"V", "C"});
        w.input("indices", o.getIndices(), lead(o.getIndices()));
        w.input("offset", o.getOffset(), {});
        w.input("dout", o.getGrad(), withC(o.getIndices()));
        s = {rowsOf(o.getIndices()), last(o.getResult()), cppgen::shapeOf(o.getResult())[0]};
      })
      .Case([&](RowMaxOp o) {
        w.describe("out[n] = max over the shard's V entries of inp[n, :]");
        w.output("out", o.getResult(), lead(o.getResult()));
        w.input("inp", o.getInput(), withV(o.getResult()));
        s = {rowsOf(o.getResult()), last(o.getInput())};
      })
      .Case([&](SumExpOp o) {
        w.describe("out[n] = sum over the shard's V entries of exp(inp[n, :] - shift[n]), in f32");
        w.output("out", o.getResult(), lead(o.getResult()));
        w.input("inp", o.getInput(), withV(o.getResult()));
        w.input("shift", o.getShift(), lead(o.getResult()));
        s = {rowsOf(o.getResult()), last(o.getInput())};
      })
      .Case([&](SumExpGradOp o) {
        w.describe("dinp[n, :] = dout[n] * exp(inp[n, :] - shift[n])");
        w.output("dinp", o.getResult(), withV(o.getShift()));
        w.input("inp", o.getInput(), withV(o.getShift()));
        w.input("shift", o.getShift(), lead(o.getShift()));
        w.input("dout", o.getGrad(), lead(o.getShift()));
        s = {rowsOf(o.getShift()), last(o.getInput())};
      })
      .Case([&](TargetLogitOp o) {
        w.describe("out[n] = logits[n, targets[n] - offset] where this shard holds the target,");
        w.describe("else 0; a target outside [0, VOCAB) gives NaN");
        w.output("out", o.getResult(), lead(o.getResult()));
        w.input("logits", o.getLogits(), withV(o.getResult()));
        w.input("targets", o.getTargets(), lead(o.getResult()));
        w.input("offset", o.getOffset(), {});
        s = {rowsOf(o.getResult()), last(o.getLogits())};
        w.constant("VOCAB", static_cast<int64_t>(o.getVocab()), "the whole vocabulary");
      })
      .Case([&](MaskVocabPaddingOp o) {
        w.describe("out[n, j] = FILL where offset + j >= VOCAB (the padding past the");
        w.describe("vocabulary's end), else inp[n, j]");
        w.output("out", o.getResult(), withV(o.getResult()));
        w.input("inp", o.getInput(), withV(o.getResult()));
        w.input("offset", o.getOffset(), {});
        auto shape = cppgen::shapeOf(o.getInput());
        s = {cppgen::numel(shape) / shape.back(), shape.back()};
        w.constant("VOCAB", static_cast<int64_t>(o.getVocab()), "the whole vocabulary");
        // FILL is written into the code as a literal (NVRTC takes no constexpr INFINITY).
      })
      .Case([&](TargetLogitGradOp o) {
        w.describe("dlogits[n, j] = dout[n] where j == targets[n] - offset, else 0");
        w.output("dlogits", o.getResult(), withV(o.getTargets()));
        w.input("targets", o.getTargets(), lead(o.getTargets()));
        w.input("offset", o.getOffset(), {});
        w.input("dout", o.getGrad(), lead(o.getTargets()));
        s = {rowsOf(o.getTargets()), last(o.getResult())};
      })
      .Case([&](CrossEntropyFromStatsOp o) {
        w.describe("loss = mean over rows n of log(sum_exp[n]) + row_max[n] - target_logit[n]:");
        w.describe("per-row losses in f32 as (row_max - target_logit) + log(sum_exp), like");
        w.describe("cross_entropy's, their mean in double in row order");
        w.output("loss", o.getResult(), {});
        w.input("row_max", o.getMax(), lead(o.getMax()));
        w.input("sum_exp", o.getSum(), lead(o.getMax()));
        w.input("target_logit", o.getTarget(), lead(o.getMax()));
        s = {rowsOf(o.getMax()), 1};
      })
      .Case([&](CrossEntropyFromStatsGradOp o) {
        w.describe("dsum_exp[n] = (dloss / N) / sum_exp[n], dtarget_logit[n] = -(dloss / N)");
        w.output("dsum_exp", o.getDsum(), lead(o.getSum()));
        w.output("dtarget_logit", o.getDtarget(), lead(o.getSum()));
        w.input("sum_exp", o.getSum(), lead(o.getSum()));
        w.input("dloss", o.getDloss(), {});
        s = {rowsOf(o.getSum()), 1};
      });
  w.constant("N", s.rows, "rows");
  if (mlir::isa<EmbeddingShardOp, EmbeddingShardGradOp>(op)) {
    w.constant("V", s.shardRows, "rows of the table shard");
    w.constant("C", s.len);
  } else if (!mlir::isa<CrossEntropyFromStatsOp, CrossEntropyFromStatsGradOp>(op)) {
    w.constant("V", s.len, "the shard's vocabulary entries");
  }
  return s;
}

}  // namespace tessel::kernelcommon
