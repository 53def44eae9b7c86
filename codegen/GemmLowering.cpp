// GEMM steps from matmuls; see GemmLowering.h.
#include "codegen/GemmLowering.h"

#include "compiler/TesselDialect.h"

#include <cassert>

namespace tessel {

rt::GemmStep lowerGemm(mlir::Operation* op, llvm::ArrayRef<int> operands, llvm::ArrayRef<int> results) {
  auto shape = [&](unsigned i, bool result) {
    mlir::Value v = result ? op->getResult(i) : op->getOperand(i);
    return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
  };
  rt::GemmStep g;
  g.a = operands[0];
  g.b = operands[1];
  g.c = results[0];
  if (auto mm = mlir::dyn_cast<MatmulOp>(op)) {
    g.transA = mm.getTransposeLhs();
    g.transB = mm.getTransposeRhs();
  } else {
    auto e = mlir::cast<MatmulEpilogueOp>(op);
    g.transA = e.getTransposeLhs();
    g.transB = e.getTransposeRhs();
    size_t next = 2;
    if (e.getBias()) g.epilogue.bias = operands[next++];
    if (e.getResidual()) g.epilogue.residual = operands[next++];
    g.epilogue.gelu = e.getGelu();
    if (e.getPreActivation()) g.epilogue.preActivation = results[1];
    if (e.getBiasGradient()) g.epilogue.biasGradient = results.back();
    assert(next == operands.size() && "matmul_epilogue operands out of step with its flags");
  }
  llvm::ArrayRef<int64_t> as = shape(0, false), bs = shape(1, false), cs = shape(0, true);
  g.m = cs[cs.size() - 2];
  g.n = cs.back();
  g.k = g.transA ? as[as.size() - 2] : as.back();
  g.batch = 1;
  for (size_t d = 0; d + 2 < cs.size(); ++d) g.batch *= cs[d];
  g.strideA = g.m * g.k;
  g.strideB = bs.size() > 2 ? g.k * g.n : 0;
  g.strideC = g.m * g.n;
  if (g.strideB == 0 && !g.transA && g.batch > 1) {
    // A shared weight: the batches of A and C are contiguous rows, so one GEMM with
    // batch * m rows does the same work with one library call instead of `batch` (the
    // epilogue's per-row bias, pre-activation and residual fold the same way).
    g.m *= g.batch;
    g.batch = 1;
    g.strideA = g.m * g.k;
    g.strideC = g.m * g.n;
  }
  return g;
}

}  // namespace tessel
