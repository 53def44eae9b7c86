// The mesh side of lowering; see MeshLowering.h.
#include "codegen/MeshLowering.h"

#include "compiler/ShardingRules.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

#include <set>

namespace tessel {
namespace {

/// The grid `grid` names from `op`, or null.
mlir::shard::GridOp gridOf(mlir::Operation* op, mlir::FlatSymbolRefAttr grid) {
  return mlir::SymbolTable::lookupNearestSymbolFrom<mlir::shard::GridOp>(op, grid);
}

}  // namespace

std::vector<std::string> axisNames(mlir::Operation* op, mlir::FlatSymbolRefAttr grid, llvm::ArrayRef<int16_t> axes) {
  std::vector<std::string> out;
  mlir::shard::GridOp g = gridOf(op, grid);
  mlir::ArrayAttr names = g ? TesselDialect::AxisNamesAttrHelper(op->getContext()).getAttr(g) : nullptr;
  if (!names) return out;
  for (int16_t a : axes) out.push_back(mlir::cast<mlir::StringAttr>(names[a]).str());
  return out;
}

std::string locationPath(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc)) return name.getName().str();
  return "";
}

mlir::FailureOr<std::vector<rt::MeshAxis>> lowerMesh(mlir::ModuleOp module) {
  TesselDialect::AxisNamesAttrHelper axisNamesAttr(module.getContext());
  TesselDialect::ShardingsAttrHelper shardingsAttr(module.getContext());
  // The grids the module's collectives and shardings name, with the first op naming each.
  std::map<std::string, mlir::Operation*> named;
  module.walk([&](mlir::Operation* op) {
    mlir::FlatSymbolRefAttr grid;
    if (auto s = mlir::dyn_cast<AllReduceStartOp>(op)) grid = s.getGridAttr();
    else if (auto a = mlir::dyn_cast<AllReduceOp>(op)) grid = a.getGridAttr();
    else if (auto r = mlir::dyn_cast<ReplicateOp>(op)) grid = r.getGridAttr();
    else if (auto g = mlir::dyn_cast<AllGatherOp>(op)) grid = g.getGridAttr();
    else if (auto s = mlir::dyn_cast<ReduceScatterOp>(op)) grid = s.getGridAttr();
    else if (auto t = mlir::dyn_cast<AllToAllOp>(op)) grid = t.getGridAttr();
    if (grid) named.emplace(grid.getValue().str(), op);
    if (mlir::ArrayAttr list = shardingsAttr.getAttr(op))
      for (mlir::Attribute a : list)
        if (auto s = mlir::dyn_cast<ShardingAttr>(a)) named.emplace(s.getGrid().getValue().str(), op);
  });
  if (named.size() > 1) {
    auto second = std::next(named.begin());
    return second->second->emitError() << "names grid @" << second->first << ", but the program already runs on @"
                                       << named.begin()->first << ": a program runs on one mesh";
  }
  mlir::shard::GridOp grid;
  if (!named.empty()) {
    grid = gridOf(named.begin()->second, mlir::FlatSymbolRefAttr::get(module.getContext(), named.begin()->first));
  } else {
    for (auto g : module.getOps<mlir::shard::GridOp>()) {
      if (!axisNamesAttr.isAttrPresent(g)) continue;
      if (grid) return std::vector<rt::MeshAxis>{};  // several unused grids: no mesh to choose
      grid = g;
    }
  }
  std::vector<rt::MeshAxis> mesh;
  if (!grid || !axisNamesAttr.isAttrPresent(grid)) return mesh;  // the ops' verifiers report a bad grid
  mlir::ArrayAttr names = axisNamesAttr.getAttr(grid);
  for (auto [i, size] : llvm::enumerate(grid.getShape())) {
    if (mlir::ShapedType::isDynamic(size) || size < 1 || size > INT32_MAX)
      return grid.emitError() << "axis " << i << " needs a static size from 1 to 2^31 - 1 to run";
    mesh.push_back({mlir::cast<mlir::StringAttr>(names[i]).str(), static_cast<int>(size)});
  }
  return mesh;
}

mlir::LogicalResult lowerParamSharding(ParamOp param, rt::Buffer& buffer) {
  mlir::ArrayAttr list = TesselDialect::ShardingsAttrHelper(param->getContext()).getAttr(param);
  if (!list || list.empty()) return mlir::success();
  auto sharding = mlir::cast<ShardingAttr>(list[0]);  // verified: one per result
  if (!sharding.getPartialAxes().empty())
    return param.emitOpError() << "\"" << param.getName()
                               << "\" is partial in its sharding; a parameter holds values, not pending sums";
  if (shardingOf(param.getResult()).isReplicated()) return mlir::success();
  mlir::shard::GridOp grid = gridOf(param, sharding.getGrid());
  if (!grid) return param.emitOpError() << "sharding names " << sharding.getGrid() << ", which is not a shard.grid";
  const std::vector<int64_t> local = buffer.shape;
  for (size_t d = 0; d < local.size(); ++d) {
    rt::ShardDim dim;
    dim.axes = axisNames(param, sharding.getGrid(), sharding.axesOf(static_cast<int64_t>(d)));
    dim.blocks = sharding.blocksOf(static_cast<int64_t>(d));
    if (dim.axes.size() != sharding.axesOf(static_cast<int64_t>(d)).size())
      return param.emitOpError() << "sharding names axes of " << sharding.getGrid()
                                 << ", which has no tessel.axis_names";
    if (local[d] % dim.blocks != 0)
      return param.emitOpError() << "\"" << param.getName() << "\" dimension " << d << " of local size " << local[d]
                                 << " is not " << dim.blocks << " equal blocks";
    int64_t parts = 1;
    for (int16_t a : sharding.axesOf(static_cast<int64_t>(d))) parts *= grid.getShape()[a];
    dim.padding = sharding.paddingOf(static_cast<int64_t>(d));
    if (dim.padding >= parts && dim.padding > 0)
      return param.emitOpError() << "\"" << param.getName() << "\" dimension " << d << " is padded by "
                                 << dim.padding << " over " << parts << " ranks (at most " << parts - 1 << ")";
    buffer.globalShape.push_back(local[d] * parts - dim.padding);
    buffer.sharding.push_back(std::move(dim));
  }
  return mlir::success();
}

}  // namespace tessel
