// Builders of the vocab-parallel embedding and cross-entropy (Megatron-LM's
// VocabParallelEmbedding and vocab_parallel_cross_entropy) from the local ops of
// compiler/TesselVocabParallelOps.td and all-reduces over the group that splits the
// vocabulary, for the passes that rewrite a `tessel.embedding` or `tessel.cross_entropy`
// whose V dimension is split. The value each returns is replicated over the group and equals
// the unsharded op's, value and gradient (test/unit/VocabParallelGradTest.cpp).
#pragma once

#include "mlir/IR/Builders.h"

namespace tessel {

/// The group a vocabulary is split over: axes of a `shard.grid` (as the collectives name it).
struct VocabGroup {
  mlir::FlatSymbolRefAttr grid;
  llvm::SmallVector<int16_t> axes;
};

/// The mean cross-entropy of logits whose last dimension is this rank's Vl columns
/// [offset, offset + Vl) of `vocab`: `logits` [..., Vl] (f32 or bf16), `targets` i32 [...]
/// (global ids), `offset` an i32 scalar. Builds
///   m = all_reduce max (row_max(logits)),  s = all_reduce sum (sum_exp(logits, m)),
///   zt = all_reduce sum (target_logit(logits, targets, offset)),
///   loss = cross_entropy_from_stats(m, s, zt)
/// at the builder's point with location `loc`, and returns the loss (an f32 scalar).
mlir::Value buildVocabParallelCrossEntropy(mlir::OpBuilder& b, mlir::Location loc,
                                           mlir::Value logits, mlir::Value targets,
                                           mlir::Value offset, int64_t vocab,
                                           const VocabGroup& group);

/// The rows of a table split on its vocabulary: `table` [Vl, C] holds rows
/// [offset, offset + Vl) of `vocab`; `indices` i32 [...]. Builds
/// all_reduce sum (embedding_shard(table, indices, offset)) and returns it ([..., C]).
mlir::Value buildVocabParallelEmbedding(mlir::OpBuilder& b, mlir::Location loc,
                                        mlir::Value table, mlir::Value indices,
                                        mlir::Value offset, int64_t vocab,
                                        const VocabGroup& group);

}  // namespace tessel
