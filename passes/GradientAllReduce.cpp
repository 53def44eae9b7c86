//===- GradientAllReduce.cpp - average gradients over the replica group --------===//
//
// Algorithm (see passes/Passes.td): before the return of @train_step, every gradient
// result g (except autodiff's explicit zeros) becomes
//   %f = tessel.all_reduce_start %g reduce avg on @mesh grid_axes = [<index of axis>] bucket <i>
//   %r = tessel.all_reduce_wait %f
// and the function returns %r. `axis` may list several axes ("dp,fsdp": the batch is split
// over all of them); a gradient whose parameter is stored split over some of them (fully
// sharded) is already a reduce-scatter sum over those, which becomes an average (a scale by
// 1 / ranks after gradient accumulation), and is all-reduced over the rest only; so is a
// gradient block of a replicated parameter reduce-scattered over `scattered-axis` (ZeRO-2). The plan's
// mesh is the module's `shard.grid @mesh`; the pass creates it, `shard.grid @mesh(shape =
// <N>) {tessel.axis_names = ["<axis>"]}`, when the module has none (one axis), and otherwise
// finds the axes among its axis names. Buckets are numbered in
// result order here; tessel-bucket-gradients renumbers them in production order.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"

#define DEBUG_TYPE "tessel-gradient-all-reduce"

namespace tessel {
#define GEN_PASS_DEF_GRADIENTALLREDUCE
#include "passes/Passes.h.inc"

namespace {

/// The symbol of the plan's mesh (one fixed name: a plan has one mesh).
constexpr llvm::StringLiteral kMeshName = "mesh";

/// The indices of mesh axes `axes` (of `group` ranks together) in the module's
/// `shard.grid @mesh`, creating the 1-D grid when the module has no @mesh (one axis only);
/// fails with an error at the conflicting symbol when @mesh is not a grid, lacks an axis or
/// has another group size along them.
mlir::FailureOr<llvm::SmallVector<int16_t>> meshAxes(mlir::ModuleOp module, llvm::ArrayRef<llvm::StringRef> axes,
                                                     int64_t group) {
  mlir::Builder names(module.getContext());
  TesselDialect::AxisNamesAttrHelper axisNamesAttr(module.getContext());
  mlir::Operation* existing = mlir::SymbolTable(module).lookup(kMeshName);
  if (!existing && axes.size() == 1) {
    mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(module.getBody());
    auto grid = mlir::shard::GridOp::create(b, module.getLoc(), kMeshName,
                                            llvm::ArrayRef<int64_t>{group});
    axisNamesAttr.setAttr(grid, names.getStrArrayAttr(axes));
    return llvm::SmallVector<int16_t>{0};
  }
  auto grid = mlir::dyn_cast_or_null<mlir::shard::GridOp>(existing);
  mlir::ArrayAttr axisNames = grid ? axisNamesAttr.getAttr(grid) : nullptr;
  if (!axisNames) {
    (existing ? existing : module.getOperation())->emitError()
        << "tessel-gradient-all-reduce: @" << kMeshName << " must be a shard.grid with "
        << axisNamesAttr.getNameStr() << " (a batch split over several axes needs the plan's mesh)";
    return mlir::failure();
  }
  llvm::SmallVector<int16_t> indices;
  int64_t size = 1;
  for (llvm::StringRef axis : axes) {
    auto it = llvm::find(axisNames, names.getStringAttr(axis));
    if (it == axisNames.end()) {
      grid.emitError() << "tessel-gradient-all-reduce: @" << kMeshName << " has no axis '" << axis << "'";
      return mlir::failure();
    }
    indices.push_back(static_cast<int16_t>(it - axisNames.begin()));
    size *= grid.getShape()[indices.back()];
  }
  if (size != group) {
    grid.emitError() << "tessel-gradient-all-reduce: mesh " << (axes.size() == 1 ? "axis '" : "axes '")
                     << llvm::join(axes, ",") << (axes.size() == 1 ? "' has " : "' have ") << size
                     << " ranks, but the pass was asked for " << group;
    return mlir::failure();
  }
  llvm::sort(indices);  // a replica group names its axes in mesh order
  return indices;
}

/// The parameter named `name` in `step`, or null.
ParamOp findParam(mlir::func::FuncOp step, llvm::StringRef name) {
  ParamOp found;
  step.walk([&](ParamOp p) {
    if (p.getName() == name) found = p;
  });
  return found;
}

/// Under mixed precision a stored shard's gradient is `cast(reduce_scatter(bf16))` (for a
/// dimension in blocks, `cast(reshape(reduce_scatter(bf16)))`: FSDP x TP's fused q, k, v
/// weight, scattered per block): the ranks' bf16 parts would be summed in bf16, rounding at
/// every hop of a ring. Returns the same gradient summed in f32 instead,
/// `[reshape](reduce_scatter(cast(bf16 -> f32)))`, or `g` when it is not of that form.
mlir::Value reduceScatterInF32(mlir::Value g) {
  auto cast = g.getDefiningOp<CastOp>();
  auto reshape = cast ? cast.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  mlir::Value scattered = reshape ? reshape.getInput() : cast ? cast.getInput() : mlir::Value();
  auto rs = scattered ? scattered.getDefiningOp<ReduceScatterOp>() : ReduceScatterOp();
  if (!rs || !rs->hasOneUse() || (reshape && !reshape->hasOneUse())) return g;
  mlir::OpBuilder b(rs);
  auto wide = mlir::cast<mlir::RankedTensorType>(rs.getInput().getType()).clone(b.getF32Type());
  mlir::Value input = CastOp::create(b, rs.getLoc(), wide, rs.getInput());
  auto sumType = mlir::cast<mlir::RankedTensorType>(rs.getType()).clone(b.getF32Type());
  mlir::Value sum = ReduceScatterOp::create(b, rs.getLoc(), sumType, input, rs.getReduceAttr(), rs.getGridAttr(),
                                            rs.getGridAxesAttr(), rs.getScatterAxisAttr());
  if (reshape) sum = ReshapeOp::create(b, reshape.getLoc(), g.getType(), sum);
  cast.getResult().replaceAllUsesWith(sum);
  cast.erase();
  if (reshape) reshape.erase();
  rs.erase();
  return sum;
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
    llvm::SmallVector<llvm::StringRef> axisNames;
    llvm::StringRef(axis).split(axisNames, ',');
    mlir::FailureOr<llvm::SmallVector<int16_t>> batchAxes = meshAxes(module, axisNames, group);
    if (mlir::failed(batchAxes)) return signalPassFailure();
    // ZeRO-2: the axis over which gradient blocks of replicated parameters arrive.
    int16_t blockAxis = -1;
    if (!scatteredAxis.empty()) {
      auto grid = findGrid(module, DEBUG_TYPE);
      if (mlir::failed(grid)) return signalPassFailure();
      blockAxis = grid->axis(scatteredAxis);
      if (!llvm::is_contained(*batchAxes, blockAxis)) {
        step.emitError() << DEBUG_TYPE << ": scattered-axis '" << scatteredAxis << "' is not one of the batch axes '"
                         << axis << "'";
        return signalPassFailure();
      }
    }
    auto ret = llvm::cast<mlir::func::ReturnOp>(step.getBody().front().getTerminator());
    mlir::OpBuilder b(ret);
    auto avg = ReduceKindAttr::get(b.getContext(), ReduceKind::avg);
    int64_t bucket = 0;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto name = gradName(step, i);
      if (!name) continue;
      mlir::Value g = ret.getOperand(i);
      if (auto zero = g.getDefiningOp<ConstantOp>(); zero && zero.getValue().isZero()) continue;
      // A parameter stored split over batch axes (fully sharded) has its gradient
      // reduce-scattered over them already, by the transpose of its all-gather: that sum
      // becomes the mean, and only the other batch axes (HSDP's replicas) are all-reduced.
      llvm::SmallVector<int16_t> scattered, replicas;
      ParamOp param = findParam(step, name.getValue());
      // A gradient block of a replicated parameter (tessel-reduce-scatter-gradients).
      const bool block = blockAxis >= 0 && param && g.getType() != param.getType();
      for (int16_t a : *batchAxes)
        (param && (shardingOf(param.getResult()).usesAxis(a) || (block && a == blockAxis)) ? scattered : replicas)
            .push_back(a);
      if (!scattered.empty()) {
        g = reduceScatterInF32(g);
        auto rs = g.getDefiningOp<ReduceScatterOp>();
        if (rs && rs.getReduce() == ReduceKind::sum && rs.getGridAxes() == llvm::ArrayRef<int16_t>(scattered)) {
          rs.setReduceAttr(avg);
        } else {
          // Gradient accumulation sums (and averages) the microsteps' reduce-scatters
          // before this point: the mean over the ranks is then a scale of that sum.
          auto grid = mlir::cast<mlir::shard::GridOp>(mlir::SymbolTable(module).lookup(kMeshName));
          int64_t ranks = 1;
          for (int16_t a : scattered) ranks *= grid.getShape()[a];
          g = ScaleOp::create(b, g.getLoc(), g.getType(), g, b.getF64FloatAttr(1.0 / static_cast<double>(ranks)));
          ret.setOperand(i, g);
        }
      }
      if (replicas.empty()) continue;
      mlir::Location loc = g.getLoc();
      auto start = AllReduceStartOp::create(
          b, loc, mlir::ValueRange{g}, avg, mlir::FlatSymbolRefAttr::get(b.getContext(), kMeshName),
          b.getDenseI16ArrayAttr(replicas), b.getI64IntegerAttr(bucket++),
          b.getStrArrayAttr({name.getValue()}));
      auto wait = AllReduceWaitOp::create(b, loc, start.getInFlight());
      ret.setOperand(i, wait.getResults()[0]);
    }
  }
};

}  // namespace
}  // namespace tessel
