// The plan's source lines inside the compiler; see PlanSite.h.
#include "compiler/PlanSite.h"

#include "compiler/Shapes.h"
#include "compiler/TesselDialect.h"

#include "mlir/IR/Diagnostics.h"

#include <fmt/format.h>

namespace tessel {

std::string planSiteString(const std::string& file, int line, int column) {
  return fmt::format("{}:{}:{}", file, line, column);
}

mlir::Location planSiteLocation(mlir::MLIRContext* ctx, llvm::StringRef site, mlir::Location fallback) {
  auto [rest, columnText] = site.rsplit(':');
  auto [file, lineText] = rest.rsplit(':');
  unsigned line = 0, column = 0;
  // rsplit returns the whole string and "" when there is no ':'; getAsInteger fails on "".
  if (file.empty() || lineText.getAsInteger(10, line) || columnText.getAsInteger(10, column)) return fallback;
  return mlir::FileLineColLoc::get(ctx, file, line, column);
}

mlir::LogicalResult checkTensorParallelHeads(mlir::ModuleOp module, llvm::StringRef axis, int64_t tp,
                                             mlir::Location site) {
  if (tp <= 1) return mlir::success();
  mlir::LogicalResult result = mlir::success();
  module.walk([&](CausalAttentionOp op) {
    int64_t heads = static_cast<int64_t>(op.getNumHeads());
    if (heads % tp == 0) return mlir::WalkResult::advance();
    mlir::InFlightDiagnostic error = mlir::emitError(site)
                                     << "tensor_parallel(\"" << axis << "\"): " << axis << "=" << tp
                                     << " does not divide the " << heads
                                     << " attention heads (each rank holds heads / " << axis
                                     << " of them; uneven heads are not supported)";
    error.attachNote(op.getLoc()) << "the attention with " << heads << " heads";
    result = mlir::failure();
    return mlir::WalkResult::interrupt();
  });
  return result;
}

mlir::LogicalResult checkSequenceParallelNorms(mlir::ModuleOp module, llvm::StringRef axis, mlir::Location site) {
  bool splittable = false;
  mlir::Operation* withoutT = nullptr;
  module.walk([&](mlir::Operation* op) {
    if (!mlir::isa<LayerNormOp, RmsNormOp>(op)) return mlir::WalkResult::advance();
    if (mlir::cast<mlir::RankedTensorType>(op->getOperand(0).getType()).getRank() >= 3) {
      splittable = true;
      return mlir::WalkResult::advance();
    }
    withoutT = op;
    return mlir::WalkResult::interrupt();
  });
  if (withoutT) {
    auto type = mlir::cast<mlir::RankedTensorType>(withoutT->getOperand(0).getType());
    mlir::InFlightDiagnostic error =
        mlir::emitError(site) << "sequence_parallel splits the sequence dimension T of every layer and RMS "
                                 "norm's input [B, T, C] over "
                              << axis << ", but this model has a norm whose input has no T dimension";
    error.attachNote(withoutT->getLoc()) << "this norm's input " << shapes::str(type.getShape()) << " has no T";
    return mlir::failure();
  }
  if (!splittable) {
    mlir::emitError(site) << "sequence_parallel splits the sequence dimension T of the layer and RMS norms' "
                             "inputs [B, T, C] over "
                          << axis << ", but this model has no norm: there is nothing to split";
    return mlir::failure();
  }
  return mlir::success();
}

}  // namespace tessel
