//===- FsdpPrefetch.cpp - FSDP: start each unit's gathers units ahead ----------===//
//
// Algorithm (see passes/Passes.td), in every function with a loss (@train_step,
// @accumulate_step), when `prefetch` > 0:
//   1. The unit gathers are the tessel.all_gather ops of parameters tagged tessel.fsdp_unit
//      (directly, or of their bf16 cast under mixed precision), in block order; tessel-fully-
//      shard and tessel-reshard-after-forward placed each unit's gathers together, so the
//      runs of one unit's gathers with only parameters and casts between them are the
//      gather groups, forward then backward. Group k's anchor is its first gather.
//   2. Every gather of group k becomes a tessel.all_gather_start placed before the anchor of
//      group max(0, k - prefetch), after the starts already there (issue order = group
//      order), and a tessel.all_gather_wait where the gather was. While group k computes,
//      the gathers of groups k + 1 .. k + prefetch are in flight, and the waits of group k
//      come after the starts of group k + prefetch: at most prefetch + 1 groups in flight.
//   3. A start's input moves up with it: the bf16 cast of a parameter (and the parameter
//      op itself) are moved before the start when they stand below it.
// Every rank runs the same IR, so every rank issues the same starts in the same order.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "tessel-fsdp-prefetch"

namespace tessel {
#define GEN_PASS_DEF_FSDPPREFETCH
#include "passes/Passes.h.inc"

namespace {

using mlir::Operation;

/// The unit of `gather` when it gathers a tagged parameter (or its cast), else null.
mlir::StringAttr unitOfGather(AllGatherOp gather) {
  mlir::Value shard = gather.getInput();
  if (auto cast = shard.getDefiningOp<CastOp>()) shard = cast.getInput();
  auto param = shard.getDefiningOp<ParamOp>();
  return param ? param->getAttrOfType<mlir::StringAttr>(kFsdpUnitAttr) : nullptr;
}

struct FsdpPrefetchPass : impl::FsdpPrefetchBase<FsdpPrefetchPass> {
  using FsdpPrefetchBase::FsdpPrefetchBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (prefetch < 0) {
      module.emitError() << DEBUG_TYPE << ": prefetch=" << static_cast<int64_t>(prefetch)
                         << " must be at least 0 (0: gathers stay synchronous)";
      return signalPassFailure();
    }
    if (mlir::failed(PipelineStage(module, "train_step")
                         .require(DEBUG_TYPE, module, {StageFact::TrainStep, StageFact::Partitioned},
                                  {StageFact::Fused}, "after tessel-reshard-after-forward, before tessel-fuse")))
      return signalPassFailure();
    if (prefetch == 0) return;
    for (auto f : module.getOps<mlir::func::FuncOp>())
      if (!f.isExternal() && findOutput(f, "loss")) runOn(f);
  }

  void runOn(mlir::func::FuncOp f) {
    // 1. Groups: runs of one unit's gathers with nothing but parameters and casts between
    //    them (a unit's forward and backward gathers are two groups, even when no other
    //    unit's gather stands between them).
    llvm::SmallVector<llvm::SmallVector<AllGatherOp>> groups;
    mlir::StringAttr current;
    for (AllGatherOp gather : f.getBody().front().getOps<AllGatherOp>()) {
      mlir::StringAttr unit = unitOfGather(gather);
      if (!unit) continue;
      bool adjacent = !groups.empty() && unit == current;
      for (Operation* op = adjacent ? groups.back().back()->getNextNode() : nullptr; adjacent && op != gather;
           op = op->getNextNode())
        adjacent = mlir::isa<ParamOp, CastOp>(op);
      if (!adjacent) groups.emplace_back();
      groups.back().push_back(gather);
      current = unit;
    }
    llvm::SmallVector<Operation*> anchors;
    for (auto& group : groups) anchors.push_back(group.front());
    // 2-3. Starts at the anchor `prefetch` groups earlier; waits in place.
    for (auto [k, group] : llvm::enumerate(groups)) {
      const size_t from = k >= static_cast<size_t>(prefetch) ? k - static_cast<size_t>(prefetch) : 0;
      for (AllGatherOp gather : group) {
        Operation* at = anchors[from];  // read each time: a replaced anchor is its wait
        mlir::Value input = gather.getInput();
        if (Operation* def = input.getDefiningOp(); def && at->isBeforeInBlock(def)) {
          def->moveBefore(at);
          if (auto cast = mlir::dyn_cast<CastOp>(def))
            if (Operation* param = cast.getInput().getDefiningOp(); param && def->isBeforeInBlock(param))
              param->moveBefore(def);
        }
        mlir::OpBuilder b(at);
        auto start = AllGatherStartOp::create(b, gather.getLoc(), gather.getType(), input, gather.getGridAttr(),
                                              gather.getGridAxesAttr(), gather.getGatherAxisAttr());
        b.setInsertionPoint(gather);
        auto wait = AllGatherWaitOp::create(b, gather.getLoc(), gather.getType(), start.getInFlight());
        if (auto unit = unitOfGather(gather)) {
          start->setAttr(kFsdpUnitAttr, unit);
          wait->setAttr(kFsdpUnitAttr, unit);
        }
        gather.getResult().replaceAllUsesWith(wait.getResult());
        if (anchors[k] == gather.getOperation()) anchors[k] = wait;
        gather.erase();
      }
    }
  }
};

}  // namespace
}  // namespace tessel
