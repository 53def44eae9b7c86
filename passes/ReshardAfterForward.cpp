//===- ReshardAfterForward.cpp - FSDP: gather parameters again in backward ------===//
//
// Algorithm (see passes/Passes.td), in every function with a loss (@train_step,
// @accumulate_step):
//   1. The forward ops are those the loss depends on.
//   2. Each tessel.all_gather of a tessel.param (tessel-fully-shard's gather of a stored
//      shard; under mixed precision, of its bf16 cast) that a backward op also reads is cloned right before the first such op, and
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
      // The stored shard, or its bf16 copy under mixed precision.
      mlir::Value shard = gather.getInput();
      if (auto cast = shard.getDefiningOp<CastOp>()) shard = cast.getInput();
      if (!shard.getDefiningOp<ParamOp>() || !forward.contains(gather)) continue;
      Operation* first = nullptr;
      for (Operation* user : gather->getUsers())
        if (!forward.contains(user) && (!first || user->isBeforeInBlock(first))) first = user;
      if (!first) continue;
      mlir::OpBuilder b(first);
      Operation* again = b.clone(*gather.getOperation());
      gather.getResult().replaceUsesWithIf(again->getResult(0), [&](mlir::OpOperand& use) {
        return !forward.contains(use.getOwner());
      });
    }
  }
};

}  // namespace
}  // namespace tessel
