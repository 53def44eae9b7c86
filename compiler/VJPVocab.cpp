// Vector-Jacobian products of the vocab-parallel ops (TesselVocabParallelOps.td), beside
// compiler/VJP.cpp's rules for the other ops. Notation as there: dy is the gradient of the
// result, d[i] that of operand i (null: no gradient).
//
// The shift m of log-sum-exp (row_max, then an all-reduce max) is a stop-gradient: the loss
// log(sum_j exp(z_j - m)) + m - z_t does not depend on m, since the -1 of d log(s) / dm
// cancels the +1 of the explicit m. So neither sum_exp nor cross_entropy_from_stats gives m a
// gradient, row_max gives none to its input, and the gradient with respect to the logits is
// still exact: dz = dl / N * (exp(z - m) / s - onehot(t)).
#include "compiler/TesselDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace tessel {

LogicalResult EmbeddingShardOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                         llvm::SmallVectorImpl<Value>& d) {
  d.assign(3, nullptr);  // indices and offset are integers: no gradient
  if (dy[0])
    d[0] = EmbeddingShardGradOp::create(b, getLoc(), getTable().getType(), getIndices(),
                                        getOffset(), dy[0]);
  return success();
}

LogicalResult RowMaxOp::buildVJP(OpBuilder&, llvm::ArrayRef<Value>,
                                 llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);  // the shift is a stop-gradient (see the top of this file)
  return success();
}

LogicalResult SumExpOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                 llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);  // none to the shift (see the top of this file)
  if (dy[0])
    d[0] = SumExpGradOp::create(b, getLoc(), getInput().getType(), getInput(), getShift(), dy[0]);
  return success();
}

LogicalResult TargetLogitOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                      llvm::SmallVectorImpl<Value>& d) {
  d.assign(3, nullptr);  // targets and offset are integers: no gradient
  if (dy[0])
    d[0] = TargetLogitGradOp::create(b, getLoc(), getLogits().getType(), getTargets(),
                                     getOffset(), dy[0]);
  return success();
}

LogicalResult MaskVocabPaddingOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                           llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);  // the offset is an integer: no gradient
  if (dy[0])  // a constant where the padding is: no gradient there
    d[0] = MaskVocabPaddingOp::create(b, getLoc(), dy[0].getType(), dy[0], getOffset(),
                                      getVocabAttr(), b.getF64FloatAttr(0.0));
  return success();
}

LogicalResult CrossEntropyFromStatsOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                                llvm::SmallVectorImpl<Value>& d) {
  d.assign(3, nullptr);  // none to the shift (see the top of this file)
  if (!dy[0]) return success();
  Type stats = getSum().getType();
  auto g = CrossEntropyFromStatsGradOp::create(b, getLoc(), stats, stats, getSum(), dy[0]);
  d[1] = g.getDsum();
  d[2] = g.getDtarget();
  return success();
}

}  // namespace tessel
