//===- ReshardToCollectives.cpp - reshards become collectives ------------------===//
//
// Algorithm (see passes/Passes.td): for each tessel.reshard (on local shapes, after
// tessel-partition), compare its two layouts: a pending sum resolved with the splits
// unchanged is an all-reduce sum over the resolved axes; one dimension's split removed is an
// all-gather along it; a pending sum resolved into one dimension's split over the same axes
// is a reduce-scatter. Any other change is an error naming both layouts.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "tessel-reshard-to-collectives"

namespace tessel {
#define GEN_PASS_DEF_RESHARDTOCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

struct ReshardToCollectivesPass : impl::ReshardToCollectivesBase<ReshardToCollectivesPass> {
  using ReshardToCollectivesBase::ReshardToCollectivesBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto target = shardingTarget(module, forwardName, DEBUG_TYPE, {StageFact::Partitioned},
                                 {StageFact::TrainStep},
                                 "after tessel-partition and before tessel-autodiff");
    if (mlir::failed(target)) return signalPassFailure();
    mlir::func::FuncOp f = target->function;
    const GridInfo* grid = &target->grid;
    for (auto r : llvm::make_early_inc_range(f.getBody().getOps<ReshardOp>()))
      if (mlir::failed(lower(r, *grid))) return signalPassFailure();
  }

  mlir::LogicalResult lower(ReshardOp r, const GridInfo& grid) {
    auto type = mlir::cast<mlir::RankedTensorType>(r.getType());
    TensorSharding from = TensorSharding::fromAttr(r.getFrom(), type.getRank());
    TensorSharding to = TensorSharding::fromAttr(r.getSharding(), type.getRank());
    mlir::OpBuilder b(r);
    auto sum = ReduceKindAttr::get(&getContext(), ReduceKind::sum);
    auto replace = [&](mlir::Value v) {
      r.replaceAllUsesWith(v);
      r.erase();
      return mlir::success();
    };
    if (from == to) return replace(r.getInput());  // nothing to move
    llvm::SmallVector<int16_t> resolved;
    for (int16_t a : from.partial)
      if (!llvm::is_contained(to.partial, a)) resolved.push_back(a);
    bool partialShrinks =
        llvm::all_of(to.partial, [&](int16_t a) { return llvm::is_contained(from.partial, a); });
    // The one dimension whose split differs, if exactly one does.
    int64_t changed = -1, changes = 0;
    for (size_t d = 0; d < from.dims.size(); ++d)
      if (!(from.dims[d] == to.dims[d])) changed = d, ++changes;
    // 1. A pending sum resolved, splits unchanged: all-reduce.
    if (changes == 0 && partialShrinks && !resolved.empty())
      return replace(AllReduceOp::create(b, r.getLoc(), r.getInput(), sum, grid.ref,
                                         b.getDenseI16ArrayAttr(resolved)));
    if (changes == 1) {
      const DimSharding& f = from.dims[changed];
      const DimSharding& t = to.dims[changed];
      // 2. A split gathered: all-gather along that dimension.
      if (f.split() && !t.split() && f.blocks == 1 && from.partial == to.partial)
        return replace(AllGatherOp::create(b, r.getLoc(), type, r.getInput(), grid.ref,
                                           b.getDenseI16ArrayAttr(f.axes), b.getI64IntegerAttr(changed)));
      // 3. A pending sum resolved into a split of the same axes: reduce-scatter.
      llvm::SmallVector<int16_t> axes(t.axes);
      llvm::sort(axes);
      if (!f.split() && t.split() && t.blocks == 1 && partialShrinks && resolved == axes)
        return replace(ReduceScatterOp::create(b, r.getLoc(), type, r.getInput(), sum, grid.ref,
                                               b.getDenseI16ArrayAttr(t.axes), b.getI64IntegerAttr(changed)));
    }
    return r.emitError() << "this op needs its operand resharded from "
                         << describeSharding(from, grid.names) << " to "
                         << describeSharding(to, grid.names)
                         << ", which needs a collective this version cannot insert yet (it "
                            "inserts all-reduces of pending sums, all-gathers of one split "
                            "dimension and reduce-scatters of a pending sum into one); shard "
                            "the parameters so that the layouts meet";
  }
};

}  // namespace
}  // namespace tessel
