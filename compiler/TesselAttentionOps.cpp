// Verifiers and the VJP of the attention ops (TesselAttentionOps.td). The verifiers check
// shapes with the shared rules of compiler/Shapes.h (the DSL uses the same rules) and name
// the offending shapes in their messages.
#include "compiler/TesselDialect.h"

#include "compiler/Shapes.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace tessel {
namespace {

/// Checks a shape rule's verdict against the op's result type.
LogicalResult checkResult(Operation* op, const shapes::Result& rule, Value result) {
  if (!rule.ok()) return op->emitOpError() << rule.error;
  std::span<const int64_t> actual = tensorShape(result);
  if (!std::equal(actual.begin(), actual.end(), rule.shape.begin(), rule.shape.end()))
    return op->emitOpError() << "result shape " << shapes::str(actual)
                             << " does not match the expected " << shapes::str(rule.shape);
  return success();
}

}  // namespace

LogicalResult RopeOp::verify() {
  return checkResult(*this,
                     shapes::rope(tensorShape(getInput()), static_cast<int64_t>(getNumHeads()),
                                  getTheta().convertToDouble()),
                     getResult());
}

LogicalResult RopeOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                               llvm::SmallVectorImpl<Value>& d) {
  // y = R x with R orthogonal (a rotation per pair), so dx = R^T dy = R^{-1} dy: the same op
  // turning the other way.
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  d[0] = RopeOp::create(b, getLoc(), getType(), dy[0], getNumHeadsAttr(), getThetaAttr(),
                        getInverse() ? UnitAttr() : b.getUnitAttr());
  return success();
}

LogicalResult GroupedAttentionOp::verify() {
  return checkResult(*this,
                     shapes::groupedAttention(tensorShape(getQ()), tensorShape(getK()),
                                              tensorShape(getV()),
                                              static_cast<int64_t>(getNumHeads()),
                                              static_cast<int64_t>(getNumKvHeads())),
                     getResult());
}

}  // namespace tessel
