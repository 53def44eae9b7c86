//===- FuseClassifier.cpp - cross_entropy + its grad -> fused_classifier --------===//
//
// Algorithm (see passes/Passes.td):
//   1. Pair each cross_entropy with the single cross_entropy_grad on the same logits and
//      targets in its block.
//   2. Skip the pair when the grad's dloss depends on the loss (its backward slice reaches
//      the cross_entropy) or when an op of the slice after the cross_entropy has memory
//      effects.
//   3. Move the slice's ops after the first of the two to right before it (block order), put
//      tessel.fused_classifier there and replace both ops' results.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/PipelineAttrs.h"

#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define DEBUG_TYPE "tessel-fuse-classifier"

namespace tessel {
#define GEN_PASS_DEF_FUSECLASSIFIER
#include "passes/Passes.h.inc"

namespace {

/// The ops of `block` after `anchor` that `value` is computed from (transitively), in
/// block order; nullopt if `ce` is among them (the value depends on the loss) or one of
/// them has memory effects (it cannot move).
std::optional<llvm::SmallVector<mlir::Operation*>> sliceAfter(mlir::Value value,
                                                              mlir::Operation* anchor,
                                                              mlir::Operation* ce,
                                                              mlir::Block& block) {
  llvm::SmallVector<mlir::Operation*> slice;
  llvm::SmallPtrSet<mlir::Operation*, 8> seen;
  llvm::SmallVector<mlir::Value> work{value};
  while (!work.empty()) {
    mlir::Operation* def = work.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != &block || !seen.insert(def).second) continue;
    if (def == ce) return std::nullopt;
    if (def->isBeforeInBlock(anchor)) continue;  // already available where the fused op goes
    if (!mlir::isMemoryEffectFree(def)) return std::nullopt;
    slice.push_back(def);
    for (mlir::Value operand : def->getOperands()) work.push_back(operand);
  }
  llvm::sort(slice, [](mlir::Operation* a, mlir::Operation* b) { return a->isBeforeInBlock(b); });
  return slice;
}

struct FuseClassifierPass : impl::FuseClassifierBase<FuseClassifierPass> {
  void runOnOperation() override {
    // Stage: after autodiff, before tessel-fuse (a fused region could hold the ops between
    // the loss and its gradient, which this pass must see and move).
    if (mlir::failed(PipelineStage(getOperation())
                         .require(DEBUG_TYPE, getOperation(), {}, {StageFact::Fused},
                                  "after tessel-autodiff and before tessel-fuse")))
      return signalPassFailure();
    mlir::Block& block = getOperation().getBody().front();
    llvm::SmallVector<CrossEntropyOp> losses(block.getOps<CrossEntropyOp>());
    for (CrossEntropyOp ce : losses) {
      llvm::SmallVector<CrossEntropyGradOp> grads;
      for (mlir::Operation* user : ce.getLogits().getUsers())
        if (auto g = llvm::dyn_cast<CrossEntropyGradOp>(user);
            g && g->getBlock() == &block && g.getTargets() == ce.getTargets() &&
            llvm::find(grads, g) == grads.end())
          grads.push_back(g);
      if (grads.size() != 1) continue;
      CrossEntropyGradOp grad = grads.front();
      // The fused op replaces the first of the two, so every user of either result follows it.
      mlir::Operation* anchor = grad->isBeforeInBlock(ce) ? grad.getOperation() : ce.getOperation();
      std::optional<llvm::SmallVector<mlir::Operation*>> slice =
          sliceAfter(grad.getDloss(), anchor, ce, block);
      if (!slice) continue;
      for (mlir::Operation* op : *slice) op->moveBefore(anchor);
      mlir::OpBuilder b(anchor);
      auto fused = FusedClassifierOp::create(b, ce.getLoc(), ce.getType(), grad.getType(),
                                             ce.getLogits(), ce.getTargets(), grad.getDloss());
      copyPipelineTags(ce, fused);  // a pipeline stage's forward action of its microbatch
      ce.getResult().replaceAllUsesWith(fused.getLoss());
      grad.getResult().replaceAllUsesWith(fused.getDlogits());
      grad.erase();
      ce.erase();
    }
  }
};

}  // namespace
}  // namespace tessel
