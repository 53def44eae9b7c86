//===- ReshardAfterForward.cpp - FSDP: gather parameters again in backward ------===//
//
// Algorithm (see passes/Passes.td), in every function with a loss (@train_step,
// @accumulate_step):
//   1. The forward ops are those the loss depends on.
//   2. Each tessel.all_gather of a tessel.param (tessel-fully-shard's gather of a stored
//      shard; under mixed precision, of its bf16 cast; a dimension in blocks, the fused q,
//      k, v weight under fsdp x tp, is gathered per block between two reshapes, and the
//      gather is cloned with its reshape back) that a backward op also reads is cloned
//      right before the first such op, and
//      the backward ops read the clone. The forward gather's result then dies after its
//      last forward use, so the gathered parameter is not held from forward to backward
//      (FSDP's reshard_after_forward), at the price of one more all-gather per parameter.
//   3. With FSDP units (parameters tagged tessel.fsdp_unit, compiler/FsdpUnits.h), step 2
//      works per unit instead: the forward gathers of every parameter of a unit are cloned
//      together, in forward order, right before the first backward op that reads any of
//      them, whether or not the backward pass reads that parameter (FSDP2 gathers a
//      module's parameters as one); the root unit (tag "") is not gathered again, its
//      forward gathers are read by the backward pass (FSDP2 never reshards the root).
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

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
    // 2-3. Gathers of stored shards read in backward: gathered again there, per parameter,
    //      or per unit.
    llvm::MapVector<llvm::StringRef, llvm::SmallVector<Gathered>> units;
    for (auto gather : llvm::make_early_inc_range(body.getOps<AllGatherOp>())) {
      // The stored shard, or its bf16 copy under mixed precision; a dimension in blocks is
      // gathered per block, between two reshapes (tessel-reshard-to-collectives).
      mlir::Value shard = gather.getInput();
      while (mlir::isa_and_present<CastOp, ReshapeOp>(shard.getDefiningOp()))
        shard = shard.getDefiningOp()->getOperand(0);
      auto param = shard.getDefiningOp<ParamOp>();
      if (!param || !forward.contains(gather)) continue;
      Gathered g{gather, gather};
      if (gather->hasOneUse() && mlir::isa<ReshapeOp>(*gather->user_begin())) g.result = *gather->user_begin();
      if (auto unit = param->getAttrOfType<mlir::StringAttr>(kFsdpUnitAttr)) {
        gather->setAttr(kFsdpUnitAttr, unit);  // for --explain and the trace (the clone keeps it)
        if (!unit.getValue().empty()) units[unit.getValue()].push_back(g);
        continue;  // the root unit's forward gathers are kept for the backward pass
      }
      regather({g}, forward);
    }
    for (auto& [unit, gathers] : units) regather(gathers, forward);
  }

  /// A forward all-gather of a parameter and the op whose result is the gathered parameter:
  /// the gather itself, or the reshape back after a gather per block.
  struct Gathered {
    AllGatherOp gather;
    Operation* result;
  };

  /// Clones `gathers` (forward order) right before the first backward op that reads any of
  /// their results, which then reads the clones; nothing when no backward op reads one.
  static void regather(llvm::ArrayRef<Gathered> gathers, const llvm::DenseSet<Operation*>& forward) {
    Operation* first = nullptr;
    for (const Gathered& g : gathers)
      for (Operation* user : g.result->getUsers())
        if (!forward.contains(user) && (!first || user->isBeforeInBlock(first))) first = user;
    if (!first) return;
    mlir::OpBuilder b(first);
    for (Gathered g : gathers) {
      Operation* again = b.clone(*g.gather.getOperation());
      if (g.result != g.gather.getOperation()) {
        mlir::IRMapping map;
        map.map(g.gather.getResult(), again->getResult(0));
        again = b.clone(*g.result, map);
      }
      g.result->getResult(0).replaceUsesWithIf(again->getResult(0), [&](mlir::OpOperand& use) {
        return !forward.contains(use.getOwner());
      });
    }
  }
};

}  // namespace
}  // namespace tessel
