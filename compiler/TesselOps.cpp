// Verifiers of the tessel ops. Each one checks its shapes with the shared rule in
// compiler/Shapes.h and names the offending shapes in its message.
#include "compiler/TesselDialect.h"

#include "compiler/ParamTable.h"
#include "compiler/Shapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#define GET_OP_CLASSES
#include "compiler/TesselOps.cpp.inc"

using namespace mlir;

namespace tessel {
namespace {

llvm::ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

std::span<const int64_t> span(llvm::ArrayRef<int64_t> a) { return {a.data(), a.size()}; }

/// Checks a shape rule's verdict against the op's declared result type.
LogicalResult checkResult(Operation* op, const shapes::Result& rule, Value result) {
  if (!rule.ok()) return op->emitOpError() << rule.error;
  llvm::ArrayRef<int64_t> actual = shapeOf(result);
  if (!std::equal(actual.begin(), actual.end(), rule.shape.begin(), rule.shape.end()))
    return op->emitOpError() << "result shape " << shapes::str(span(actual))
                             << " does not match the expected " << shapes::str(rule.shape);
  return success();
}

}  // namespace

LogicalResult ParamOp::verify() {
  InitKind init = getInit();
  if (getName().empty()) return emitOpError() << "parameter name must not be empty";
  std::optional<llvm::APFloat> stddev = getStd();
  if (init == InitKind::normal && !stddev)
    return emitOpError() << "normal init needs a std attribute";
  if (init == InitKind::normal && !(stddev->convertToDouble() > 0.0))
    return emitOpError() << "normal init needs std > 0, got " << stddev->convertToDouble();
  if (init != InitKind::normal && stddev)
    return emitOpError() << "init " << stringifyInitKind(init) << " takes no std attribute";
  // Names are unique within a function: plans and checkpoints refer to parameters by
  // name. One walk per function checks them all (compiler/ParamTable.h).
  return verifyParamNamesUnique(*this);
}

LogicalResult MatmulOp::verify() {
  return checkResult(*this,
                     shapes::matmul(span(shapeOf(getLhs())), span(shapeOf(getRhs())),
                                    getTransposeLhs(), getTransposeRhs()),
                     getResult());
}

template <typename BinaryOp>
static LogicalResult verifyBinary(BinaryOp op) {
  return checkResult(op,
                     shapes::broadcast(span(shapeOf(op.getLhs())), span(shapeOf(op.getRhs()))),
                     op.getResult());
}
LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }

LogicalResult LayerNormOp::verify() {
  if (std::string error = shapes::normEpsilonError(getEpsilon().convertToDouble()); !error.empty())
    return emitOpError() << error;
  return checkResult(*this,
                     shapes::layerNorm(span(shapeOf(getInput())), span(shapeOf(getGamma())),
                                       span(shapeOf(getBeta()))),
                     getResult());
}

LogicalResult RmsNormOp::verify() {
  if (std::string error = shapes::normEpsilonError(getEpsilon().convertToDouble()); !error.empty())
    return emitOpError() << error;
  return checkResult(*this,
                     shapes::rmsNorm(span(shapeOf(getInput())), span(shapeOf(getWeight()))),
                     getResult());
}

LogicalResult SoftmaxOp::verify() {
  return checkResult(*this, shapes::softmax(span(shapeOf(getInput())), getCausal()),
                     getResult());
}

LogicalResult EmbeddingOp::verify() {
  if (getTable().getType().getElementType() != getResult().getType().getElementType())
    return emitOpError() << "result element type " << getResult().getType().getElementType()
                         << " differs from the table's " << getTable().getType().getElementType();
  return checkResult(*this,
                     shapes::embedding(span(shapeOf(getTable())), span(shapeOf(getIndices()))),
                     getResult());
}

LogicalResult CrossEntropyOp::verify() {
  return checkResult(
      *this, shapes::crossEntropy(span(shapeOf(getLogits())), span(shapeOf(getTargets()))),
      getResult());
}

LogicalResult CausalAttentionOp::verify() {
  return checkResult(*this,
                     shapes::causalAttention(span(shapeOf(getQkv())),
                                             static_cast<int64_t>(getNumHeads())),
                     getResult());
}

LogicalResult ReshapeOp::verify() {
  return checkResult(*this,
                     shapes::reshape(span(shapeOf(getInput())), span(shapeOf(getResult()))),
                     getResult());
}

LogicalResult TransposeOp::verify() {
  return checkResult(*this,
                     shapes::transpose(span(shapeOf(getInput())), span(getPermutation())),
                     getResult());
}

LogicalResult SplitOp::verify() {
  auto results = getResults();
  if (results.empty()) return emitOpError() << "needs at least one result";
  shapes::Result rule = shapes::split(span(shapeOf(getInput())),
                                      static_cast<int64_t>(getAxis()),
                                      static_cast<int64_t>(results.size()));
  for (Value r : results)
    if (failed(checkResult(*this, rule, r))) return failure();
  return success();
}

LogicalResult ConcatOp::verify() {
  std::vector<shapes::Shape> inputs;
  for (Value v : getInputs()) {
    llvm::ArrayRef<int64_t> s = shapeOf(v);
    inputs.emplace_back(s.begin(), s.end());
  }
  return checkResult(*this, shapes::concat(inputs, static_cast<int64_t>(getAxis())),
                     getResult());
}

template <typename ReduceOp>
static LogicalResult verifyReduce(ReduceOp op) {
  return checkResult(op, shapes::reduce(span(shapeOf(op.getInput())), span(op.getDims())),
                     op.getResult());
}
LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }

}  // namespace tessel
