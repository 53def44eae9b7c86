// The plan in the IR; see PlanIr.h.
#include "dsl/PlanIr.h"

#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Verifier.h"

#include <map>

namespace tessel {

void writePlanToModule(Graph& graph, const Plan& plan, const std::vector<ParameterSharding>& shardings) {
  mlir::MLIRContext* ctx = &graph.context();
  mlir::ModuleOp module = graph.module();
  mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(module.getBody());
  llvm::SmallVector<int64_t> shape;
  llvm::SmallVector<llvm::StringRef> names;
  for (const auto& [name, size] : plan.mesh().axes()) {
    names.push_back(name);
    shape.push_back(size);
  }
  const PlanSite& site = plan.mesh().site();
  auto grid = mlir::shard::GridOp::create(
      b, mlir::FileLineColLoc::get(ctx, site.file, static_cast<unsigned>(site.line), static_cast<unsigned>(site.column)),
      kPlanMeshName, shape);
  TesselDialect::AxisNamesAttrHelper(ctx).setAttr(grid, b.getStrArrayAttr(names));

  std::map<std::string, const ParameterSharding*> byName;
  for (const ParameterSharding& s : shardings) byName[s.name] = &s;
  auto gridRef = mlir::FlatSymbolRefAttr::get(ctx, kPlanMeshName);
  TesselDialect::ShardingsAttrHelper shardingsAttr(ctx);
  graph.function().walk([&](ParamOp param) {
    auto it = byName.find(param.getName().str());
    if (it == byName.end()) return;
    llvm::SmallVector<mlir::shard::GridAxesAttr> dims;
    for (const std::vector<int>& axes : it->second->axes) {
      llvm::SmallVector<int16_t> indices(axes.begin(), axes.end());
      dims.push_back(mlir::DenseI16ArrayAttr::get(ctx, indices));
    }
    auto sharding = ShardingAttr::get(ctx, gridRef, mlir::shard::GridAxesArrayAttr::get(ctx, dims), {}, {}, {});
    shardingsAttr.setAttr(param, b.getArrayAttr({sharding}));
  });
  if (mlir::failed(mlir::verify(module))) graph.throwCaptured(grid.getLoc(), "the plan's mesh failed to verify");
}

}  // namespace tessel
