// Verifiers of the backward and optimizer ops (TesselGradOps.td, TesselOptimOps.td).
#include "compiler/TesselDialect.h"

#include "compiler/ParamTable.h"
#include "compiler/Shapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace tessel {
namespace {

std::span<const int64_t> shapeOf(Value v) { return tensorShape(v); }

bool sameShape(Value a, Value b) {
  auto x = shapeOf(a), y = shapeOf(b);
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

}  // namespace

LogicalResult BroadcastOp::verify() {
  auto dims = getDims();
  shapes::Result rule = shapes::broadcast(shapeOf(getInput()), shapeOf(getResult()),
                                          {dims.data(), dims.size()});
  if (!rule.ok()) return emitOpError() << rule.error;
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  shapes::Result rule =
      shapes::layerNorm(shapeOf(getInput()), shapeOf(getGamma()), shapeOf(getGamma()));
  if (!rule.ok()) return emitOpError() << rule.error;
  if (!sameShape(getGrad(), getInput()))
    return emitOpError() << "grad " << shapes::str(shapeOf(getGrad()))
                         << " must have the input's shape " << shapes::str(shapeOf(getInput()));
  if (!sameShape(getDinput(), getInput()) || !sameShape(getDgamma(), getGamma()) ||
      !sameShape(getDbeta(), getGamma()))
    return emitOpError() << "results must be shaped like the input, gamma and gamma";
  if (std::string error = shapes::normEpsilonError(getEpsilon().convertToDouble()); !error.empty())
    return emitOpError() << error;
  return success();
}

LogicalResult RmsNormGradOp::verify() {
  shapes::Result rule = shapes::rmsNorm(shapeOf(getInput()), shapeOf(getWeight()));
  if (!rule.ok()) return emitOpError() << rule.error;
  if (!sameShape(getGrad(), getInput()))
    return emitOpError() << "grad " << shapes::str(shapeOf(getGrad()))
                         << " must have the input's shape " << shapes::str(shapeOf(getInput()));
  if (!sameShape(getDinput(), getInput()) || !sameShape(getDweight(), getWeight()))
    return emitOpError() << "results must be shaped like the input and the weight";
  if (std::string error = shapes::normEpsilonError(getEpsilon().convertToDouble()); !error.empty())
    return emitOpError() << error;
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  shapes::Result rule = shapes::embedding(shapeOf(getResult()), shapeOf(getIndices()));
  if (!rule.ok()) return emitOpError() << "result: " << rule.error;
  auto grad = shapeOf(getGrad());
  if (!std::equal(grad.begin(), grad.end(), rule.shape.begin(), rule.shape.end()))
    return emitOpError() << "grad " << shapes::str(grad) << " must be [indices..., C] = "
                         << shapes::str(rule.shape);
  if (getGrad().getType().getElementType() != getResult().getType().getElementType())
    return emitOpError() << "grad and result element types differ";
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  shapes::Result rule = shapes::crossEntropy(shapeOf(getLogits()), shapeOf(getTargets()));
  if (!rule.ok()) return emitOpError() << rule.error;
  if (getResult().getType() != getLogits().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the logits type " << getLogits().getType();
  return success();
}

LogicalResult FusedClassifierOp::verify() {
  shapes::Result rule = shapes::crossEntropy(shapeOf(getLogits()), shapeOf(getTargets()));
  if (!rule.ok()) return emitOpError() << rule.error;
  if (getDlogits().getType() != getLogits().getType())
    return emitOpError() << "dlogits type " << getDlogits().getType()
                         << " must equal the logits type " << getLogits().getType();
  return success();
}

LogicalResult AssignOp::verify() {
  auto func = (*this)->getParentOfType<func::FuncOp>();
  if (!func) return emitOpError() << "must be inside a function";
  // The target must exist with the value's type; one walk per function checks every
  // assignment (compiler/ParamTable.h).
  return verifyAssignTargets(*this, func);
}

}  // namespace tessel

namespace tessel {

mlir::LogicalResult FusedOp::verify() {
  mlir::Block& body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments() << " arguments for "
                         << getInputs().size() << " inputs";
  for (auto [arg, input] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError() << "body argument type " << arg.getType()
                           << " differs from its input's " << input.getType();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values whose types differ from the results";
  return mlir::success();
}

}  // namespace tessel
