// Row-local ops; see RowLocal.h.
#include "compiler/RowLocal.h"

#include "compiler/TesselDialect.h"

namespace tessel {

std::optional<llvm::SmallVector<int64_t>> rowLocalShape(mlir::Operation* op) {
  const bool listed =
      llvm::isa<AddOp, SubOp, MulOp, ScaleOp, GeluOp, ReluOp, GeluGradOp, ReluGradOp, CastOp,
                SoftmaxOp, SoftmaxGradOp, LayerNormOp, AdamWOp, SGDOp>(op) ||
      llvm::isa<SiluOp, SiluGradOp>(op) ||
      llvm::isa<RmsNormOp>(op);
  if (!listed) return std::nullopt;
  auto first = mlir::cast<mlir::RankedTensorType>(op->getResult(0).getType());
  auto isFloat = [](mlir::Type e) { return e.isF32() || e.isBF16(); };
  if (first.getRank() < 1 || !isFloat(first.getElementType())) return std::nullopt;
  llvm::ArrayRef<int64_t> s = first.getShape();
  for (mlir::Value r : op->getResults())
    if (mlir::cast<mlir::RankedTensorType>(r.getType()).getShape() != s) return std::nullopt;
  for (mlir::Value v : op->getOperands()) {
    auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
    if (!isFloat(t.getElementType())) return std::nullopt;
    llvm::ArrayRef<int64_t> o = t.getShape();
    bool suffix = o.size() <= s.size() && o == s.take_back(o.size());
    if (!suffix) return std::nullopt;
  }
  return llvm::SmallVector<int64_t>(s.begin(), s.end());
}

}  // namespace tessel
