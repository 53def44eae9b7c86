// Lowering tessel.all_gather / reduce_scatter / all_to_all; see ShardMoveLowering.h.
#include "codegen/ShardMoveLowering.h"

#include "codegen/MeshLowering.h"
#include "compiler/FunctionAttrs.h"
#include "compiler/Location.h"
#include "compiler/TesselDialect.h"

namespace tessel {
namespace {

/// Fails at `op` unless `axes` ascend: DeviceMesh numbers a group's ranks row-major over its
/// axes in mesh order, and the IR's shardings number parts in the listed order, so only
/// the grid's order makes the two agree.
mlir::LogicalResult requireMeshOrder(mlir::Operation* op, llvm::ArrayRef<int16_t> axes) {
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] <= axes[i - 1])
      return op->emitOpError() << "grid_axes must be listed in the grid's order (outermost first) to run: "
                                  "the runtime's groups number their ranks in that order";
  return mlir::success();
}

}  // namespace

bool isShardMove(mlir::Operation* op) { return mlir::isa<AllGatherOp, ReduceScatterOp, AllToAllOp>(op); }

mlir::FailureOr<ShardMove> lowerShardMove(mlir::Operation* op) {
  auto type = mlir::cast<mlir::RankedTensorType>(op->getOperand(0).getType());
  mlir::Type element = type.getElementType();
  if (!element.isF32() && !element.isBF16())
    return op->emitOpError() << "moves " << element << " tensors; the runtime's collectives move f32 and bf16";
  ShardMove out;
  rt::CollectiveStep& c = out.step;
  c.synchronous = true;
  c.bucket = 0;
  c.reduce = "sum";
  c.location = locationString(op->getLoc());
  c.names = {locationPath(op->getLoc())};
  const int64_t numel = type.getNumElements();
  llvm::ArrayRef<int16_t> axes;
  auto gather = [&](auto g) {
    c.kind = rt::CollectiveStep::Kind::AllGather;
    c.dim = static_cast<int64_t>(g.getGatherAxis());
    c.axes = axisNames(op, g.getGridAttr(), g.getGridAxes());
    c.group = g.getGroupSize();
    axes = g.getGridAxes();
    out.stagingNumel = numel * c.group;
  };
  // The FSDP unit: the gather's own tag, or its parameter's (through a bf16 cast).
  auto unit = op->getAttrOfType<mlir::StringAttr>(kFsdpUnitAttr);
  mlir::Operation* def = op->getOperand(0).getDefiningOp();
  if (auto cast = mlir::dyn_cast_or_null<CastOp>(def)) def = cast.getInput().getDefiningOp();
  if (!unit && mlir::isa_and_nonnull<ParamOp>(def)) unit = def->getAttrOfType<mlir::StringAttr>(kFsdpUnitAttr);
  if (unit)
    c.unit = unit.getValue().empty() ? "(root)" : unit.getValue().str();
  if (auto g = mlir::dyn_cast<AllGatherOp>(op)) {
    gather(g);
  } else if (auto s = mlir::dyn_cast<AllGatherStartOp>(op)) {
    gather(s);
    c.phase = rt::CollectiveStep::Phase::Start;
  } else if (auto r = mlir::dyn_cast<ReduceScatterOp>(op)) {
    if (r.getReduce() != ReduceKind::sum && r.getReduce() != ReduceKind::avg)
      return op->emitOpError() << "reduce " << stringifyReduceKind(r.getReduce())
                               << " cannot run: the runtime's reduce_scatter sums or averages";
    c.kind = rt::CollectiveStep::Kind::ReduceScatter;
    c.dim = static_cast<int64_t>(r.getScatterAxis());
    c.reduce = stringifyReduceKind(r.getReduce()).str();
    c.axes = axisNames(op, r.getGridAttr(), r.getGridAxes());
    c.group = r.getGroupSize();
    axes = r.getGridAxes();
    // The input padded to group x the result along the scatter axis (an uneven dimension).
    out.stagingNumel = mlir::cast<mlir::RankedTensorType>(r.getType()).getNumElements() * c.group;
  } else {
    auto a = mlir::cast<AllToAllOp>(op);
    c.kind = rt::CollectiveStep::Kind::AllToAll;
    c.dim = static_cast<int64_t>(a.getSplitAxis());
    c.concatDim = static_cast<int64_t>(a.getConcatAxis());
    c.axes = axisNames(op, a.getGridAttr(), a.getGridAxes());
    c.group = a.getGroupSize();
    axes = a.getGridAxes();
    out.stagingNumel = 2 * numel;
  }
  if (mlir::failed(requireMeshOrder(op, axes))) return mlir::failure();
  return out;
}

}  // namespace tessel
