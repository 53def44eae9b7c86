//===- ReshardToCollectives.cpp - reshards become collectives ------------------===//
//
// Algorithm (see passes/Passes.td): for each tessel.reshard (on local shapes, after
// tessel-partition), compare its two layouts: a pending sum resolved with the splits
// unchanged is an all-reduce sum over the resolved axes; one dimension's split removed, or
// only its innermost axes (the last listed: #tessel.sharding numbers parts row-major, first
// axis outermost, so the ranks that differ only there hold consecutive parts of the block
// the remaining axes keep), is an all-gather over the removed axes along it; a pending sum
// resolved into one dimension's split over the same axes is a reduce-scatter. Any other
// change is an error naming both layouts.
//
// A dimension in B > 1 blocks holds, on each rank, its part of every block ([B][l] along
// the dimension), so the gather runs per block: the local tensor is reshaped to [B, l]
// there, gathered along l, and reshaped back. A padded dimension gathered whole is
// gathered, then trimmed to its true size (the all-gather's result type drops the padding;
// tessel-partition allows only that use of a padded parameter).
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <algorithm>

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

  /// The all-gather of `r`'s input over `axes` along dimension `dim` (local shapes), made of
  /// `blocks` blocks: per block when blocks > 1 (reshape [.., B * l, ..] -> [.., B, l, ..],
  /// gather along l, reshape back). The result has `r`'s type, which is shorter than the
  /// concatenation when the gather trims a padded dimension.
  static mlir::Value gather(mlir::OpBuilder& b, ReshardOp r, int64_t dim, llvm::ArrayRef<int16_t> axes,
                            int64_t blocks, const GridInfo& grid) {
    auto type = mlir::cast<mlir::RankedTensorType>(r.getType());
    mlir::Location loc = r.getLoc();
    if (blocks == 1)
      return AllGatherOp::create(b, loc, type, r.getInput(), grid.ref, b.getDenseI16ArrayAttr(axes),
                                 b.getI64IntegerAttr(dim));
    auto in = mlir::cast<mlir::RankedTensorType>(r.getInput().getType());
    auto perBlock = [&](mlir::RankedTensorType t) {
      llvm::SmallVector<int64_t> shape(t.getShape());
      shape[dim] /= blocks;
      shape.insert(shape.begin() + dim, blocks);
      return mlir::RankedTensorType::get(shape, t.getElementType());
    };
    mlir::Value blocked = ReshapeOp::create(b, loc, perBlock(in), r.getInput());
    mlir::Value gathered = AllGatherOp::create(b, loc, perBlock(type), blocked, grid.ref,
                                               b.getDenseI16ArrayAttr(axes), b.getI64IntegerAttr(dim + 1));
    return ReshapeOp::create(b, loc, type, gathered);
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
      // 2. A split gathered, whole or its innermost axes: all-gather over the removed axes.
      bool innermost = f.axes.size() > t.axes.size() &&
                       std::equal(t.axes.begin(), t.axes.end(), f.axes.begin()) &&
                       (!t.split() || t.blocks == f.blocks);
      if (innermost && from.partial == to.partial) {
        llvm::ArrayRef<int16_t> gathered = llvm::ArrayRef(f.axes).drop_front(t.axes.size());
        return replace(gather(b, r, changed, gathered, f.blocks, grid));
      }
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
                            "dimension or of its innermost axes, and reduce-scatters of a "
                            "pending sum into one); shard "
                            "the parameters so that the layouts meet";
  }
};

}  // namespace
}  // namespace tessel
