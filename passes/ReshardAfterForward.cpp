//===- ReshardAfterForward.cpp - FSDP: gather parameters again in backward ------===//
//
// Algorithm (see passes/Passes.td), in every function with a loss (@train_step,
// @accumulate_step):
//   1. The forward ops are those the loss depends on.
//   2. Each tessel.all_gather of a tessel.param (tessel-fully-shard's gather of a stored
//      shard; under mixed precision, of its bf16 cast; for a dimension in blocks, with the
//      reshape back that follows its per-block gather) that a backward op also reads is cloned right before the first such op, and
//      the backward ops read the clone. The forward gather's result then dies after its
//      last forward use, so the gathered parameter is not held from forward to backward
//      (FSDP's reshard_after_forward), at the price of one more all-gather per parameter.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#define DEBUG_TYPE "tessel-reshard-after-forward"

namespace tessel {
#define GEN_PASS_DEF_RESHARDAFTERFORWARD
#include "passes/Passes.h.inc"

namespace {

using mlir::Operation;

struct ReshardAfterForwardPass : impl::ReshardAfterForwardBase<ReshardAfterForwardPass> {
  using ReshardAfterForwardBase::ReshardAfterForwardBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    // Stage: after autodiff (there is a backward pass) and after the last CSE, which would
    // merge the clone back into the forward gather.
    if (mlir::failed(PipelineStage(module, "train_step")
                         .require(DEBUG_TYPE, module, {StageFact::TrainStep, StageFact::Partitioned}, {},
                                  "after tessel-autodiff and the cleanup that follows tessel-optimizer")))
      return signalPassFailure();
    for (auto f : module.getOps<mlir::func::FuncOp>()) {
      if (f.isExternal()) continue;
      if (std::optional<unsigned> loss = findOutput(f, "loss")) runOn(f, *loss);
    }
  }

  void runOn(mlir::func::FuncOp f, unsigned lossIndex) {
    mlir::Block& body = f.getBody().front();
    // 1. Forward ops: those the loss depends on.
    llvm::DenseSet<Operation*> forward = opsResultDependsOn(f, lossIndex);
    // 2. Gathers of stored shards read in backward: gathered again there.
    for (auto gather : llvm::make_early_inc_range(body.getOps<AllGatherOp>())) {
      // The stored shard, or its bf16 copy under mixed precision; a dimension in blocks is
      // gathered per block, between two reshapes (tessel-reshard-to-collectives).
      mlir::Value shard = gather.getInput();
      while (mlir::isa_and_present<CastOp, ReshapeOp>(shard.getDefiningOp()))
        shard = shard.getDefiningOp()->getOperand(0);
      if (!shard.getDefiningOp<ParamOp>() || !forward.contains(gather)) continue;
      Operation* gathered = gather;  // the op whose result is the gathered parameter
      if (gather->hasOneUse() && mlir::isa<ReshapeOp>(*gather->user_begin())) gathered = *gather->user_begin();
      Operation* first = nullptr;
      for (Operation* user : gathered->getUsers())
        if (!forward.contains(user) && (!first || user->isBeforeInBlock(first))) first = user;
      if (!first) continue;
      mlir::OpBuilder b(first);
      Operation* again = b.clone(*gather.getOperation());
      if (gathered != gather) {
        mlir::IRMapping map;
        map.map(gather.getResult(), again->getResult(0));
        again = b.clone(*gathered, map);
      }
      gathered->getResult(0).replaceUsesWithIf(again->getResult(0), [&](mlir::OpOperand& use) {
        return !forward.contains(use.getOwner());
      });
    }
  }
};

}  // namespace
}  // namespace tessel
