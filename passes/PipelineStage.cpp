// Stage facts read from the IR; see PipelineStage.h.
#include "passes/PipelineStage.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/TesselDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"

#include <fmt/format.h>

#include <map>

namespace tessel {

namespace {

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
  if (isPartitioned(f)) set(StageFact::Partitioned);
  auto shardings = TesselDialect::ShardingsAttrHelper(f.getContext());
  f.walk([&](mlir::Operation* op) {
    if (!mlir::isa<ParamOp>(op) && shardings.isAttrPresent(op)) set(StageFact::ShardingsPropagated);
    if (mlir::isa<ReshardOp>(op)) set(StageFact::ReshardsPending);
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
  // What the IR shows, per fact: {when it holds, when it does not}. Placeholders: {f} the
  // function, {step} the train step, {acc} @accumulate_step, {shards} tessel.batch_shards.
  struct Text {
    const char* present;
    const char* absent;
  };
  static const std::map<StageFact, Text> texts{
      {StageFact::TrainStep,
       {"@{step} already exists (tessel-autodiff has run)",
        "there is no @{step} (run tessel-autodiff first)"}},
      {StageFact::AccumulateStep,
       {"@{acc} already exists (tessel-gradient-accumulation has run)", "there is no @{acc}"}},
      {StageFact::BatchSharded,
       {"@{f} already runs on a local batch ({shardsAttr} = {shards})",
        "@{f} does not run on a local batch (no {shardsAttr})"}},
      {StageFact::MixedPrecision,
       {"@{f} already computes in bf16 ({mixedAttr})",
        "@{f} does not compute in bf16 (no {mixedAttr})"}},
      {StageFact::ShardingsPropagated,
       {"@{f} already has shardings on its ops (tessel-propagate-sharding has run)",
        "@{f} has no shardings on its ops (run tessel-propagate-sharding first)"}},
      {StageFact::ReshardsPending,
       {"@{f} has tessel.reshard ops (run tessel-reshard-to-collectives first)",
        "@{f} has no tessel.reshard"}},
      {StageFact::Partitioned,
       {"@{f} already has local shapes (tessel.partitioned)",
        "@{f} is not partitioned (no tessel.partitioned)"}},
      {StageFact::GradientsReduced,
       {"@{f} already reduces its gradients (tessel.all_reduce_start present)",
        "@{f} reduces no gradients (no tessel.all_reduce_start)"}},
      {StageFact::GradientsBucketed,
       {"@{f} already has gradient buckets (a tessel.all_reduce_start with several inputs)",
        "@{f} has no gradient buckets"}},
      {StageFact::CollectivesInterleaved,
       {"@{f} uses a reduced value before its last collective (the collectives are already "
        "interleaved with their users)",
        "@{f} uses no reduced value before its last collective"}},
      {StageFact::Optimizer,
       {"@{f} already updates the parameters (tessel.global_norm, tessel.adamw or tessel.sgd "
        "present)",
        "@{f} has no optimizer"}},
      {StageFact::ClassifierFused,
       {"@{f} already has a tessel.fused_classifier", "@{f} has no tessel.fused_classifier"}},
      {StageFact::Fused,
       {"@{f} is already fused (tessel.fused present)", "@{f} is not fused"}},
  };
  const Text& text = texts.at(fact);
  return fmt::format(fmt::runtime(present ? text.present : text.absent),
                     fmt::arg("f", function_), fmt::arg("step", trainStep_),
                     fmt::arg("acc", kAccumulateStep.str()), fmt::arg("shards", shards_),
                     fmt::arg("shardsAttr", kBatchShardsAttr.str()),
                     fmt::arg("mixedAttr", kMixedPrecisionAttr.str()));
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

mlir::FailureOr<ShardingTarget> shardingTarget(mlir::ModuleOp module, llvm::StringRef function,
                                               llvm::StringRef pass,
                                               std::initializer_list<StageFact> required,
                                               std::initializer_list<StageFact> forbidden,
                                               llvm::StringRef order) {
  auto f = module.lookupSymbol<mlir::func::FuncOp>(function);
  if (!f) {
    module.emitError() << pass << ": no function @" << function;
    return mlir::failure();
  }
  if (mlir::failed(PipelineStage(module, function).require(pass, f, required, forbidden, order)))
    return mlir::failure();
  auto grid = findGrid(module, pass);
  if (mlir::failed(grid)) return mlir::failure();
  return ShardingTarget{f, *grid};
}

mlir::func::FuncOp unreducedTrainStep(mlir::ModuleOp module, llvm::StringRef name, llvm::StringRef pass,
                                      llvm::StringRef where) {
  auto step = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(name);
  if (!step) {
    module.emitError() << pass << ": no function @" << name;
    return nullptr;
  }
  if (mlir::failed(PipelineStage(module, name, name)
                       .require(pass, step, {StageFact::TrainStep},
                                {StageFact::GradientsReduced, StageFact::Optimizer, StageFact::Fused}, where)))
    return nullptr;
  return step;
}

}  // namespace tessel
