// Vector-Jacobian products of silu and rms_norm (the Llama block's activation and norm),
// beside compiler/VJP.cpp's rules for the other ops. Notation as there: dy is the gradient of
// the result, d[i] that of operand i (null: no gradient).
#include "compiler/TesselDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace tessel {

LogicalResult SiluOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                               llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, dy[0] ? SiluGradOp::create(b, getLoc(), getType(), getInput(), dy[0]).getResult()
                    : Value());
  return success();
}

LogicalResult RmsNormOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                  llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);
  if (!dy[0]) return success();
  // The statistic r = rsqrt(mean(x^2) + eps) is recomputed from x in the backward kernel, as
  // layer_norm_grad recomputes its mean and rstd: nothing beyond x is kept for the backward.
  auto g = RmsNormGradOp::create(b, getLoc(), getInput().getType(), getWeight().getType(),
                                 getInput(), getWeight(), dy[0], getEpsilonAttr());
  d[0] = g.getDinput();
  d[1] = g.getDweight();
  return success();
}

}  // namespace tessel
