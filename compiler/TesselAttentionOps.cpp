// Verifiers and the VJPs of the attention ops (TesselAttentionOps.td, and causal_attention's
// VJP, TesselOps.td). The verifiers check
// shapes with the shared rules of compiler/Shapes.h (the DSL uses the same rules) and name
// the offending shapes in their messages.
#include "compiler/TesselDialect.h"

#include "compiler/Shapes.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace tessel {
namespace {

/// The gradient `grad` must have the attention result's shape `rule.shape`.
LogicalResult checkGrad(Operation* op, const shapes::Result& rule, Value grad) {
  if (!rule.ok()) return op->emitOpError() << rule.error;
  std::span<const int64_t> actual = tensorShape(grad);
  if (!std::equal(actual.begin(), actual.end(), rule.shape.begin(), rule.shape.end()))
    return op->emitOpError() << "gradient shape " << shapes::str(actual)
                             << " does not match the attention result's "
                             << shapes::str(rule.shape);
  return success();
}

/// Checks that `result` has the shape of `like`.
LogicalResult checkSameShape(Operation* op, Value result, Value like, const char* name) {
  std::span<const int64_t> a = tensorShape(result), e = tensorShape(like);
  if (!std::equal(a.begin(), a.end(), e.begin(), e.end()))
    return op->emitOpError() << name << " shape " << shapes::str(a) << " does not match "
                             << shapes::str(e);
  return success();
}

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

LogicalResult GroupedAttentionOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                           llvm::SmallVectorImpl<Value>& d) {
  // The probabilities are recomputed from q and k by the backward kernel (as layer_norm_grad
  // recomputes its statistics), so the forward keeps a single result.
  d.assign(3, nullptr);
  if (!dy[0]) return success();
  auto g = GroupedAttentionGradOp::create(b, getLoc(), getQ().getType(), getK().getType(),
                                          getV().getType(), getQ(), getK(), getV(), dy[0],
                                          getNumHeadsAttr(), getNumKvHeadsAttr());
  d[0] = g.getDq();
  d[1] = g.getDk();
  d[2] = g.getDv();
  return success();
}

LogicalResult CausalAttentionOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                          llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  d[0] = CausalAttentionGradOp::create(b, getLoc(), getQkv().getType(), getQkv(), dy[0],
                                       getNumHeadsAttr());
  return success();
}

LogicalResult CausalAttentionGradOp::verify() {
  if (failed(checkGrad(*this,
                       shapes::causalAttention(tensorShape(getQkv()),
                                               static_cast<int64_t>(getNumHeads())),
                       getGrad())))
    return failure();
  return checkSameShape(*this, getResult(), getQkv(), "result");
}

LogicalResult GroupedAttentionGradOp::verify() {
  if (failed(checkGrad(*this,
                       shapes::groupedAttention(tensorShape(getQ()), tensorShape(getK()),
                                                tensorShape(getV()),
                                                static_cast<int64_t>(getNumHeads()),
                                                static_cast<int64_t>(getNumKvHeads())),
                       getGrad())))
    return failure();
  if (failed(checkSameShape(*this, getDq(), getQ(), "dq")) ||
      failed(checkSameShape(*this, getDk(), getK(), "dk")))
    return failure();
  return checkSameShape(*this, getDv(), getV(), "dv");
}

}  // namespace tessel
