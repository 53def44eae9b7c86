//===- ReshardToCollectives.cpp - reshards become collectives ------------------===//
//
// Algorithm (see passes/Passes.td): for each tessel.reshard, compare its input's sharding
// (the producer's tessel.shardings) with its target. Resolving pending sums with the splits
// unchanged is an all-reduce sum over the resolved axes; no other change has a rule yet,
// and asking for one is an error naming both layouts.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#define DEBUG_TYPE "tessel-reshard-to-collectives"

namespace tessel {
#define GEN_PASS_DEF_RESHARDTOCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

struct ReshardToCollectivesPass : impl::ReshardToCollectivesBase<ReshardToCollectivesPass> {
  using ReshardToCollectivesBase::ReshardToCollectivesBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto f = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(forwardName);
    if (!f) {
      module.emitError() << DEBUG_TYPE << ": no function @" << forwardName;
      return signalPassFailure();
    }
    if (mlir::failed(PipelineStage(module, forwardName)
                         .require(DEBUG_TYPE, f, {StageFact::ShardingsPropagated},
                                  {StageFact::Partitioned, StageFact::TrainStep},
                                  "after tessel-insert-reshards and before tessel-partition")))
      return signalPassFailure();
    auto grid = findGrid(module, DEBUG_TYPE);
    if (mlir::failed(grid)) return signalPassFailure();
    for (auto r : llvm::make_early_inc_range(f.getBody().getOps<ReshardOp>()))
      if (mlir::failed(lower(r, *grid))) return signalPassFailure();
  }

  mlir::LogicalResult lower(ReshardOp r, const GridInfo& grid) {
    TensorSharding from = shardingOf(r.getInput());
    auto type = mlir::cast<mlir::RankedTensorType>(r.getType());
    TensorSharding to = TensorSharding::fromAttr(r.getSharding(), type.getRank());
    llvm::SmallVector<int16_t> resolved;
    for (int16_t a : from.partial)
      if (!llvm::is_contained(to.partial, a)) resolved.push_back(a);
    bool subset = llvm::all_of(to.partial, [&](int16_t a) { return llvm::is_contained(from.partial, a); });
    if (from.dims == to.dims && subset && !resolved.empty()) {
      mlir::OpBuilder b(r);
      auto sum = AllReduceOp::create(b, r.getLoc(), r.getInput(),
                                     ReduceKindAttr::get(&getContext(), ReduceKind::sum), grid.ref,
                                     b.getDenseI16ArrayAttr(resolved));
      setShardings(sum, {to}, grid.ref);
      r.replaceAllUsesWith(sum.getResult());
      r.erase();
      return mlir::success();
    }
    if (from == to) {  // nothing to do (a reshard written by hand)
      r.replaceAllUsesWith(r.getInput());
      r.erase();
      return mlir::success();
    }
    return r.emitError() << "this op needs its operand resharded from "
                         << describeSharding(from, grid.names) << " to "
                         << describeSharding(to, grid.names)
                         << ", which needs a collective this version cannot insert yet (only "
                            "resolving a pending sum, an all-reduce); shard the parameters so "
                            "that the layouts meet";
  }
};

}  // namespace
}  // namespace tessel
