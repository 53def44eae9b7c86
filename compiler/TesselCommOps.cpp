// Verifiers and result types of the collective ops (TesselCommOps.td).
#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace tessel {

namespace {

/// The `shard.grid` that `grid` names from `op`, or null.
shard::GridOp lookupGrid(Operation* op, FlatSymbolRefAttr grid) {
  return SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, grid);
}

}  // namespace

int64_t gridGroupSize(Operation* op, FlatSymbolRefAttr gridRef, ArrayRef<int16_t> axes) {
  shard::GridOp grid = lookupGrid(op, gridRef);
  if (!grid) return 0;
  int64_t size = 1;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(grid.getShape().size())) return 0;
    size *= grid.getShape()[axis];
  }
  return size;
}

llvm::SmallVector<llvm::StringRef> gridAxisNames(Operation* op, FlatSymbolRefAttr gridRef,
                                                 ArrayRef<int16_t> axes) {
  llvm::SmallVector<llvm::StringRef> names;
  shard::GridOp grid = lookupGrid(op, gridRef);
  auto all = grid ? TesselDialect::AxisNamesAttrHelper(op->getContext()).getAttr(grid) : ArrayAttr();
  if (!all) return names;
  for (int16_t axis : axes) names.push_back(cast<StringAttr>(all[axis]).getValue());
  return names;
}

shard::GridOp AllReduceStartOp::resolveGrid() { return lookupGrid(*this, getGridAttr()); }

int64_t AllReduceStartOp::getGroupSize() {
  return gridGroupSize(*this, getGridAttr(), getGridAxes());
}

llvm::SmallVector<llvm::StringRef> AllReduceStartOp::getAxisNames() {
  return gridAxisNames(*this, getGridAttr(), getGridAxes());
}

int64_t AllReduceOp::getGroupSize() { return gridGroupSize(*this, getGridAttr(), getGridAxes()); }

llvm::SmallVector<llvm::StringRef> AllReduceOp::getAxisNames() {
  return gridAxisNames(*this, getGridAttr(), getGridAxes());
}

std::span<const int64_t> tensorShape(Value v) {
  auto s = cast<RankedTensorType>(v.getType()).getShape();
  return {s.data(), s.size()};
}

LogicalResult verifyGridAxes(Operation* op, FlatSymbolRefAttr gridRef, ArrayRef<int16_t> axes) {
  Operation* target = SymbolTable::lookupNearestSymbolFrom(op, gridRef);
  if (!target)
    return op->emitOpError() << "grid " << gridRef << " is not a symbol of the module";
  auto grid = dyn_cast<shard::GridOp>(target);
  if (!grid)
    return op->emitOpError() << "grid " << gridRef << " names a '" << target->getName()
                             << "', not a shard.grid";
  ArrayRef<int64_t> shape = grid.getShape();
  for (int64_t size : shape)
    if (ShapedType::isDynamic(size) || size < 1)
      return op->emitOpError() << "grid " << gridRef
                               << " must have static sizes >= 1 (the group size derives from it)";
  // The names themselves are checked where they are declared (TesselDialect.cpp).
  if (!TesselDialect::AxisNamesAttrHelper(op->getContext()).isAttrPresent(grid))
    return op->emitOpError() << "grid " << gridRef << " has no "
                             << TesselDialect::AxisNamesAttrHelper::getNameStr()
                             << ": the runtime needs a name for each axis";
  if (axes.empty()) return op->emitOpError() << "grid_axes must name at least one axis";
  llvm::SmallDenseSet<int16_t> seen;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
      return op->emitOpError() << "grid axis " << axis << " is out of range for grid "
                               << gridRef << " of rank " << shape.size();
    if (!seen.insert(axis).second)
      return op->emitOpError() << "grid axis " << axis << " appears twice in grid_axes";
  }
  return success();
}

LogicalResult AllReduceStartOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                 ValueRange operands, DictionaryAttr,
                                                 OpaqueProperties, RegionRange,
                                                 llvm::SmallVectorImpl<Type>& types) {
  for (Value v : operands) types.push_back(v.getType());
  return success();
}

LogicalResult AllReduceWaitOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                ValueRange operands, DictionaryAttr,
                                                OpaqueProperties, RegionRange,
                                                llvm::SmallVectorImpl<Type>& types) {
  for (Value v : operands) types.push_back(v.getType());
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  if (getInputs().empty()) return emitOpError() << "needs at least one input";
  if (failed(verifyGridAxes(*this, getGridAttr(), getGridAxes()))) return failure();
  int64_t bucket = static_cast<int64_t>(getBucket());
  if (bucket < 0) return emitOpError() << "bucket must be >= 0, got " << bucket;
  if (getParams().size() != getInputs().size())
    return emitOpError() << "names " << getParams().size() << " params for "
                         << getInputs().size() << " inputs";
  // Every in-flight value goes to one wait, which takes all of them in order.
  Operation* wait = nullptr;
  for (Value r : getInFlight())
    for (Operation* user : r.getUsers()) {
      if (!isa<AllReduceWaitOp>(user))
        return emitOpError() << "in-flight result used by '" << user->getName()
                             << "'; only tessel.all_reduce_wait may use it";
      if (wait && wait != user)
        return emitOpError() << "in-flight results go to more than one tessel.all_reduce_wait";
      wait = user;
    }
  // A collective that is never waited for would be left in flight (and its results unused):
  // every rank must complete what it starts.
  if (!wait)
    return emitOpError() << "bucket " << getBucket()
                         << " is never waited for: its in-flight results need a "
                            "tessel.all_reduce_wait";
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  if (getInFlight().empty()) return emitOpError() << "needs at least one operand";
  auto start = getInFlight().front().getDefiningOp<AllReduceStartOp>();
  if (!start) return emitOpError() << "operand #0 is not a result of tessel.all_reduce_start";
  if (start.getInFlight().size() != getInFlight().size())
    return emitOpError() << "waits for " << getInFlight().size() << " of the "
                         << start.getInFlight().size() << " tensors of bucket "
                         << start.getBucket() << "; it must wait for all of them";
  for (auto [i, v] : llvm::enumerate(getInFlight()))
    if (v != start.getInFlight()[i])
      return emitOpError() << "operand #" << i << " is not result #" << i
                           << " of the same tessel.all_reduce_start";
  if (start->getBlock() == (*this)->getBlock() && !start->isBeforeInBlock(*this))
    return emitOpError() << "waits before its tessel.all_reduce_start";
  return success();
}

LogicalResult AllReduceOp::verify() { return verifyGridAxes(*this, getGridAttr(), getGridAxes()); }

LogicalResult ReplicateOp::verify() { return verifyGridAxes(*this, getGridAttr(), getGridAxes()); }

LogicalResult ReshardOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getElementType() != out.getElementType() || in.getRank() != out.getRank())
    return emitOpError() << "changes the element type or rank (" << in << " to " << out
                         << "); a reshard only moves data between ranks";
  for (ShardingAttr s : {getFrom(), getSharding()})
    if (static_cast<int64_t>(s.getSplitAxes().size()) != in.getRank())
      return emitOpError() << "sharding " << s << " has " << s.getSplitAxes().size()
                           << " dimensions, the tensor " << in.getRank();
  return success();
}

}  // namespace tessel
