// ZeRO-1/2 blocks; see ZeroBlocks.h.
#include "passes/ZeroBlocks.h"

namespace tessel {

mlir::FailureOr<bool> hasZeroBlocks(ParamOp p, const GridInfo& grid, int16_t axis, llvm::StringRef pass) {
  auto type = mlir::cast<mlir::RankedTensorType>(p.getType());
  if (type.getRank() == 0) return false;
  TensorSharding layout = shardingOf(p.getResult());
  if (layout.dims.empty()) layout = TensorSharding::replicated(type.getRank());
  llvm::StringRef name = grid.names[axis];
  if (layout.usesAxis(axis) || layout.dims[0].split()) {
    p.emitError() << pass << ": parameter '" << p.getName() << "' is already split ("
                  << describeSharding(layout, grid.names) << "); ZeRO-1/2 blocks over " << name
                  << " need a parameter replicated on dimension 0";
    return mlir::failure();
  }
  const int64_t ranks = grid.sizes[axis];
  if (type.getShape()[0] % ranks != 0) {
    p.emitError() << "parameter '" << p.getName() << "': dimension 0 has " << type.getShape()[0] << " rows, which "
                  << name << "=" << ranks
                  << " does not divide; ZeRO stages 1 and 2 of an uneven first dimension are not supported yet "
                     "(choose a degree that divides it)";
    return mlir::failure();
  }
  return true;
}

mlir::RankedTensorType zeroBlockType(mlir::RankedTensorType type, int64_t ranks) {
  llvm::SmallVector<int64_t> shape(type.getShape());
  shape[0] /= ranks;
  return type.clone(shape);
}

}  // namespace tessel
