//===- GradientAllReduce.cpp - average gradients over the replica group --------===//
//
// Algorithm (see passes/Passes.td): before the return of @train_step, every gradient
// result g (except autodiff's explicit zeros) becomes
//   %f = tessel.all_reduce_start %g reduce avg on @mesh grid_axes = [<index of axis>] bucket <i>
//   %r = tessel.all_reduce_wait %f
// and the function returns %r. The plan's mesh is the module's `shard.grid @mesh`; the pass
// creates it, `shard.grid @mesh(shape = <N>) {tessel.axis_names = ["<axis>"]}`, when the
// module has none, and otherwise finds `axis` among its axis names. Buckets are numbered in
// result order here; tessel-bucket-gradients renumbers them in production order.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#define DEBUG_TYPE "tessel-gradient-all-reduce"

namespace tessel {
#define GEN_PASS_DEF_GRADIENTALLREDUCE
#include "passes/Passes.h.inc"

namespace {

/// The symbol of the plan's mesh (one fixed name: a plan has one mesh).
constexpr llvm::StringLiteral kMeshName = "mesh";

/// The index of mesh axis `axis` (of `group` ranks) in the module's `shard.grid @mesh`,
/// creating the 1-D grid when the module has no @mesh; fails with an error at the
/// conflicting symbol when @mesh is not a grid, has no such axis or another size along it.
mlir::FailureOr<int16_t> meshAxis(mlir::ModuleOp module, llvm::StringRef axis, int64_t group) {
  mlir::Builder names(module.getContext());
  TesselDialect::AxisNamesAttrHelper axisNamesAttr(module.getContext());
  mlir::Operation* existing = mlir::SymbolTable(module).lookup(kMeshName);
  if (!existing) {
    mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(module.getBody());
    auto grid = mlir::shard::GridOp::create(b, module.getLoc(), kMeshName,
                                            llvm::ArrayRef<int64_t>{group});
    axisNamesAttr.setAttr(grid, names.getStrArrayAttr({axis}));
    return 0;
  }
  auto grid = mlir::dyn_cast<mlir::shard::GridOp>(existing);
  mlir::ArrayAttr axisNames = grid ? axisNamesAttr.getAttr(grid) : nullptr;
  if (!axisNames) {
    existing->emitError() << "tessel-gradient-all-reduce: @" << kMeshName
                          << " must be a shard.grid with " << axisNamesAttr.getNameStr();
    return mlir::failure();
  }
  for (auto [i, name] : llvm::enumerate(axisNames)) {
    if (name != names.getStringAttr(axis)) continue;
    if (grid.getShape()[i] != group) {
      grid.emitError() << "tessel-gradient-all-reduce: mesh axis '" << axis << "' has "
                       << grid.getShape()[i] << " ranks, but the pass was asked for " << group;
      return mlir::failure();
    }
    return static_cast<int16_t>(i);
  }
  grid.emitError() << "tessel-gradient-all-reduce: @" << kMeshName << " has no axis '" << axis
                   << "'";
  return mlir::failure();
}

struct GradientAllReducePass : impl::GradientAllReduceBase<GradientAllReducePass> {
  using GradientAllReduceBase::GradientAllReduceBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    // Stage: gradients as autodiff (or accumulation) returns them, not yet reduced, and no
    // optimizer yet (clipping must see the reduced gradients).
    auto step = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(trainStepName);
    mlir::Operation* anchor = step ? step.getOperation() : module.getOperation();
    if (mlir::failed(PipelineStage(module, trainStepName, trainStepName)
                         .require(DEBUG_TYPE, anchor, {StageFact::TrainStep},
                                  {StageFact::GradientsReduced, StageFact::Optimizer,
                                   StageFact::Fused},
                                  "once, after tessel-autodiff and before tessel-optimizer")))
      return signalPassFailure();
    if (group < 1 || axis.empty()) {
      step.emitError() << "tessel-gradient-all-reduce: needs a mesh axis and group >= 1";
      return signalPassFailure();
    }
    mlir::FailureOr<int16_t> meshAxisIndex = meshAxis(module, axis, group);
    if (mlir::failed(meshAxisIndex)) return signalPassFailure();
    auto ret = llvm::cast<mlir::func::ReturnOp>(step.getBody().front().getTerminator());
    mlir::OpBuilder b(ret);
    int64_t bucket = 0;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto name = gradName(step, i);
      if (!name) continue;
      mlir::Value g = ret.getOperand(i);
      if (auto zero = g.getDefiningOp<ConstantOp>(); zero && zero.getValue().isZero()) continue;
      mlir::Location loc = g.getLoc();
      auto start = AllReduceStartOp::create(
          b, loc, mlir::ValueRange{g}, ReduceKindAttr::get(b.getContext(), ReduceKind::avg),
          mlir::FlatSymbolRefAttr::get(b.getContext(), kMeshName),
          b.getDenseI16ArrayAttr({*meshAxisIndex}), b.getI64IntegerAttr(bucket++),
          b.getStrArrayAttr({name.getValue()}));
      auto wait = AllReduceWaitOp::create(b, loc, start.getInFlight());
      ret.setOperand(i, wait.getResults()[0]);
    }
  }
};

}  // namespace
}  // namespace tessel
