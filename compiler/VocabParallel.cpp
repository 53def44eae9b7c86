// Builders of the vocab-parallel embedding and cross-entropy; see VocabParallel.h.
#include "compiler/VocabParallel.h"

#include "compiler/TesselDialect.h"

namespace tessel {
namespace {

mlir::Value allReduce(mlir::OpBuilder& b, mlir::Location loc, mlir::Value x, ReduceKind kind,
                      const VocabGroup& group) {
  return AllReduceOp::create(b, loc, x, ReduceKindAttr::get(b.getContext(), kind), group.grid,
                             b.getDenseI16ArrayAttr(group.axes));
}

}  // namespace

mlir::Value buildVocabParallelCrossEntropy(mlir::OpBuilder& b, mlir::Location loc,
                                           mlir::Value logits, mlir::Value targets,
                                           mlir::Value offset, int64_t vocab,
                                           const VocabGroup& group) {
  auto rows = mlir::cast<mlir::RankedTensorType>(logits.getType()).getShape().drop_back();
  auto stats = mlir::RankedTensorType::get(rows, b.getF32Type());
  mlir::Value m =
      allReduce(b, loc, RowMaxOp::create(b, loc, stats, logits), ReduceKind::max, group);
  mlir::Value s =
      allReduce(b, loc, SumExpOp::create(b, loc, stats, logits, m), ReduceKind::sum, group);
  mlir::Value zt = allReduce(
      b, loc,
      TargetLogitOp::create(b, loc, stats, logits, targets, offset, static_cast<uint64_t>(vocab)),
      ReduceKind::sum, group);
  return CrossEntropyFromStatsOp::create(b, loc, m, s, zt);
}

mlir::Value buildVocabParallelEmbedding(mlir::OpBuilder& b, mlir::Location loc,
                                        mlir::Value table, mlir::Value indices,
                                        mlir::Value offset, int64_t vocab,
                                        const VocabGroup& group) {
  auto t = mlir::cast<mlir::RankedTensorType>(table.getType());
  llvm::SmallVector<int64_t> shape(
      mlir::cast<mlir::RankedTensorType>(indices.getType()).getShape());
  shape.push_back(t.getDimSize(1));
  auto rowsType = mlir::RankedTensorType::get(shape, t.getElementType());
  mlir::Value local = EmbeddingShardOp::create(b, loc, rowsType, table, indices, offset,
                                               static_cast<uint64_t>(vocab));
  return allReduce(b, loc, local, ReduceKind::sum, group);
}

}  // namespace tessel
