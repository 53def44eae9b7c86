// Stage facts read from the IR; see PipelineStage.h.
#include "passes/PipelineStage.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/TesselDialect.h"

#include "mlir/IR/Diagnostics.h"

#include <fmt/format.h>

namespace tessel {

namespace {
constexpr llvm::StringLiteral kAccumulateStep = "accumulate_step";

/// True if a result of a tessel.all_reduce_wait in `block` is used (by an op of the block,
/// or one nested in it) before the block's last collective op.
bool collectivesInterleaved(mlir::Block& block) {
  mlir::Operation* last = nullptr;
  for (mlir::Operation& op : block)
    if (mlir::isa<AllReduceStartOp, AllReduceWaitOp>(op)) last = &op;
  if (!last) return false;
  for (auto wait : block.getOps<AllReduceWaitOp>())
    for (mlir::Operation* user : wait->getUsers()) {
      while (user && user->getBlock() != &block) user = user->getParentOp();
      if (user && user->isBeforeInBlock(last)) return true;
    }
  return false;
}
}  // namespace

PipelineStage::PipelineStage(mlir::func::FuncOp f) : trainStep_("train_step") { read(f); }

PipelineStage::PipelineStage(mlir::ModuleOp module, llvm::StringRef function,
                             llvm::StringRef trainStep)
    : function_(function.str()), trainStep_(trainStep.str()) {
  if (module.lookupSymbol<mlir::func::FuncOp>(trainStep)) set(StageFact::TrainStep);
  if (module.lookupSymbol<mlir::func::FuncOp>(kAccumulateStep)) set(StageFact::AccumulateStep);
  if (auto f = module.lookupSymbol<mlir::func::FuncOp>(function)) read(f);
}

void PipelineStage::read(mlir::func::FuncOp f) {
  function_ = f.getSymName().str();
  shards_ = batchShards(f);
  if (shards_ > 0) set(StageFact::BatchSharded);
  if (isMixedPrecision(f)) set(StageFact::MixedPrecision);
  f.walk([&](mlir::Operation* op) {
    if (auto start = mlir::dyn_cast<AllReduceStartOp>(op)) {
      set(StageFact::GradientsReduced);
      if (start.getInputs().size() > 1) set(StageFact::GradientsBucketed);
    } else if (mlir::isa<GlobalNormOp, AdamWOp, SGDOp>(op)) {
      set(StageFact::Optimizer);
    } else if (mlir::isa<FusedClassifierOp>(op)) {
      set(StageFact::ClassifierFused);
    } else if (mlir::isa<FusedOp>(op)) {
      set(StageFact::Fused);
    }
  });
  if (!f.getBody().empty() && collectivesInterleaved(f.getBody().front()))
    set(StageFact::CollectivesInterleaved);
}

bool PipelineStage::has(StageFact fact) const {
  return (facts_ >> static_cast<unsigned>(fact)) & 1u;
}

std::string PipelineStage::describe(StageFact fact, bool present) const {
  const std::string& f = function_;
  switch (fact) {
  case StageFact::TrainStep:
    return present ? fmt::format("@{} already exists (tessel-autodiff has run)", trainStep_)
                   : fmt::format("there is no @{} (run tessel-autodiff first)", trainStep_);
  case StageFact::AccumulateStep:
    return present ? fmt::format("@{} already exists (tessel-gradient-accumulation has run)",
                                 kAccumulateStep.str())
                   : fmt::format("there is no @{}", kAccumulateStep.str());
  case StageFact::BatchSharded:
    return present ? fmt::format("@{} already runs on a local batch ({} = {})", f,
                                 kBatchShardsAttr.str(), shards_)
                   : fmt::format("@{} does not run on a local batch (no {})", f,
                                 kBatchShardsAttr.str());
  case StageFact::MixedPrecision:
    return present ? fmt::format("@{} already computes in bf16 ({})", f,
                                 kMixedPrecisionAttr.str())
                   : fmt::format("@{} does not compute in bf16 (no {})", f,
                                 kMixedPrecisionAttr.str());
  case StageFact::GradientsReduced:
    return present ? fmt::format("@{} already reduces its gradients (tessel.all_reduce_start "
                                 "present)", f)
                   : fmt::format("@{} reduces no gradients (no tessel.all_reduce_start)", f);
  case StageFact::GradientsBucketed:
    return present ? fmt::format("@{} already has gradient buckets (a tessel.all_reduce_start "
                                 "with several inputs)", f)
                   : fmt::format("@{} has no gradient buckets", f);
  case StageFact::CollectivesInterleaved:
    return present ? fmt::format("@{} uses a reduced value before its last collective (the "
                                 "collectives are already interleaved with their users)", f)
                   : fmt::format("@{} uses no reduced value before its last collective", f);
  case StageFact::Optimizer:
    return present ? fmt::format("@{} already updates the parameters (tessel.global_norm, "
                                 "tessel.adamw or tessel.sgd present)", f)
                   : fmt::format("@{} has no optimizer", f);
  case StageFact::ClassifierFused:
    return present ? fmt::format("@{} already has a tessel.fused_classifier", f)
                   : fmt::format("@{} has no tessel.fused_classifier", f);
  case StageFact::Fused:
    return present ? fmt::format("@{} is already fused (tessel.fused present)", f)
                   : fmt::format("@{} is not fused", f);
  }
  return "unknown stage fact";
}

mlir::LogicalResult PipelineStage::require(llvm::StringRef pass, mlir::Operation* anchor,
                                           std::initializer_list<StageFact> required,
                                           std::initializer_list<StageFact> forbidden,
                                           llvm::StringRef order) const {
  auto fail = [&](StageFact fact, bool present) {
    anchor->emitError() << pass << ": " << describe(fact, present) << "; it runs " << order;
    return mlir::failure();
  };
  for (StageFact fact : required)
    if (!has(fact)) return fail(fact, false);
  for (StageFact fact : forbidden)
    if (has(fact)) return fail(fact, true);
  return mlir::success();
}

}  // namespace tessel
