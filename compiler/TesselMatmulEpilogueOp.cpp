// Verifier of tessel.matmul_epilogue (TesselFusedOps.td): the matmul's shape rule, then each
// epilogue part against the result, and the combinations both executors run (docs/gpu.md).
#include "compiler/TesselDialect.h"

#include "compiler/Shapes.h"

using namespace mlir;

namespace tessel {

LogicalResult MatmulEpilogueOp::verify() {
  auto typeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  const size_t expected = 1 + (getPreActivation() ? 1 : 0) + (getBiasGradient() ? 1 : 0);
  if (getResults().size() != expected)
    return emitOpError() << "has " << getResults().size() << " results, its flags need " << expected
                         << " (the result, then the pre-activation, then the bias gradient)";
  shapes::Result rule = shapes::matmul(tensorShape(getLhs()), tensorShape(getRhs()), getTransposeLhs(),
                                       getTransposeRhs());
  if (!rule.ok()) return emitOpError() << rule.error;
  RankedTensorType out = typeOf(getResult());
  if (!std::equal(out.getShape().begin(), out.getShape().end(), rule.shape.begin(), rule.shape.end()))
    return emitOpError() << "result shape " << shapes::str(tensorShape(getResult()))
                         << " does not match the expected " << shapes::str(rule.shape);
  Type element = out.getElementType();
  if (typeOf(getLhs()).getElementType() != element || typeOf(getRhs()).getElementType() != element)
    return emitOpError() << "operands and result must have one element type";
  const int64_t n = out.getShape().back();
  if (Value bias = getBias()) {
    RankedTensorType b = typeOf(bias);
    if (b.getRank() != 1 || b.getDimSize(0) != n || b.getElementType() != element)
      return emitOpError() << "bias " << b << " must be " << n << " elements of the result's type";
  }
  if (Value residual = getResidual()) {
    if (residual.getType() != out) return emitOpError() << "residual " << residual.getType() << " must be " << out;
    if (getGelu())
      return emitOpError() << "a residual after gelu cannot be fused (cuBLASLt adds it before the activation)";
  }
  if (getPreActivation()) {
    if (!getGelu()) return emitOpError() << "pre_activation needs gelu";
    if (getPreActivationResult().getType() != out)
      return emitOpError() << "pre-activation " << getPreActivationResult().getType() << " must be " << out;
    if (n % 8 != 0)
      return emitOpError() << "a pre-activation needs N a multiple of 8 (cuBLASLt's aux leading dimension), got "
                           << n;
  }
  if (getBiasGradient()) {
    if (getBias() || getGelu() || getResidual())
      return emitOpError() << "a bias gradient cannot be combined with another epilogue";
    if (typeOf(getLhs()).getRank() != 2 || typeOf(getRhs()).getRank() != 2 || !element.isF32())
      return emitOpError() << "a bias gradient needs rank-2 f32 operands";
    RankedTensorType g = typeOf(getBiasGradientResult());
    const int64_t m = out.getDimSize(0);
    if (g.getRank() != 1 || g.getDimSize(0) != m || !g.getElementType().isF32())
      return emitOpError() << "bias gradient " << g << " must be tensor<" << m << "xf32>";
  }
  return success();
}

}  // namespace tessel
