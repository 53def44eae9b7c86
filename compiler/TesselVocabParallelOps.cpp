// Verifiers of the vocab-parallel ops (TesselVocabParallelOps.td). Each checks its shapes with
// the shared rules of compiler/Shapes.h and names the offending shapes in its message.
#include "compiler/TesselDialect.h"

#include "compiler/Shapes.h"

using namespace mlir;

namespace tessel {
namespace {

std::span<const int64_t> shapeOf(Value v) { return tensorShape(v); }

/// Whether `v` has exactly `shape`.
bool hasShape(Value v, const shapes::Shape& shape) {
  auto s = shapeOf(v);
  return std::equal(s.begin(), s.end(), shape.begin(), shape.end());
}

/// The row statistic of `rows` ([..., Vl] -> [...]) must be the shape of every value in
/// `others`, each named in the message.
LogicalResult checkRows(Operation* op, Value rows, const char* rowsName,
                        std::initializer_list<std::pair<Value, const char*>> others) {
  shapes::Result rule = shapes::rowStatistic(shapeOf(rows));
  if (!rule.ok()) return op->emitOpError() << rowsName << ": " << rule.error;
  for (auto [v, name] : others)
    if (!hasShape(v, rule.shape))
      return op->emitOpError() << name << " " << shapes::str(shapeOf(v)) << " must be " << rowsName
                               << " " << shapes::str(shapeOf(rows))
                               << " without its last dimension, i.e. "
                               << shapes::str(rule.shape);
  return success();
}

/// A shard of `rows`' last dimension cannot hold more entries than the whole vocabulary.
LogicalResult checkVocab(Operation* op, Value rows, int64_t vocab) {
  int64_t local = shapeOf(rows).back();
  if (local > vocab)
    return op->emitOpError() << "shard of " << local << " vocabulary entries exceeds vocab "
                             << vocab;
  return success();
}

}  // namespace

LogicalResult MeshCoordinateOp::verify() {
  return verifyGridAxes(*this, getGridAttr(), getGridAxes());
}

LogicalResult EmbeddingShardOp::verify() {
  if (getTable().getType().getElementType() != getResult().getType().getElementType())
    return emitOpError() << "result element type " << getResult().getType().getElementType()
                         << " differs from the table's " << getTable().getType().getElementType();
  shapes::Result rule = shapes::embeddingShard(shapeOf(getTable()), shapeOf(getIndices()),
                                               static_cast<int64_t>(getVocab()));
  if (!rule.ok()) return emitOpError() << rule.error;
  if (!hasShape(getResult(), rule.shape))
    return emitOpError() << "result shape " << shapes::str(shapeOf(getResult()))
                         << " does not match the expected " << shapes::str(rule.shape);
  return success();
}

LogicalResult RowMaxOp::verify() {
  return checkRows(*this, getInput(), "input", {{getResult(), "result"}});
}

LogicalResult SumExpOp::verify() {
  return checkRows(*this, getInput(), "input", {{getShift(), "shift"}, {getResult(), "result"}});
}

LogicalResult TargetLogitOp::verify() {
  if (failed(checkRows(*this, getLogits(), "logits",
                       {{getTargets(), "targets"}, {getResult(), "result"}})))
    return failure();
  return checkVocab(*this, getLogits(), static_cast<int64_t>(getVocab()));
}

LogicalResult MaskVocabPaddingOp::verify() {
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the input type " << getInput().getType();
  if (getInput().getType().getRank() < 1)
    return emitOpError() << "input must have a vocabulary (last) dimension";
  return checkVocab(*this, getInput(), static_cast<int64_t>(getVocab()));
}

LogicalResult CrossEntropyFromStatsOp::verify() {
  shapes::Result rule =
      shapes::crossEntropyFromStats(shapeOf(getMax()), shapeOf(getSum()), shapeOf(getTarget()));
  if (!rule.ok()) return emitOpError() << rule.error;
  return success();
}

LogicalResult EmbeddingShardGradOp::verify() {
  shapes::Result rule = shapes::embedding(shapeOf(getResult()), shapeOf(getIndices()));
  if (!rule.ok()) return emitOpError() << "result: " << rule.error;
  if (!hasShape(getGrad(), rule.shape))
    return emitOpError() << "grad " << shapes::str(shapeOf(getGrad()))
                         << " must be [indices..., C] = " << shapes::str(rule.shape);
  if (getGrad().getType().getElementType() != getResult().getType().getElementType())
    return emitOpError() << "grad and result element types differ";
  return success();
}

LogicalResult SumExpGradOp::verify() {
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the input type " << getInput().getType();
  return checkRows(*this, getInput(), "input", {{getShift(), "shift"}, {getGrad(), "grad"}});
}

LogicalResult TargetLogitGradOp::verify() {
  return checkRows(*this, getResult(), "result", {{getTargets(), "targets"}, {getGrad(), "grad"}});
}

LogicalResult CrossEntropyFromStatsGradOp::verify() {
  shapes::Result rule =
      shapes::crossEntropyFromStats(shapeOf(getSum()), shapeOf(getSum()), shapeOf(getSum()));
  if (!rule.ok()) return emitOpError() << rule.error;
  if (getDsum().getType() != getSum().getType() || getDtarget().getType() != getSum().getType())
    return emitOpError() << "dsum and dtarget must have the type of sum, " << getSum().getType();
  return success();
}

}  // namespace tessel
