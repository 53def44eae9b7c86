// How far the pipeline has taken a module, read from the IR, and the check every pass makes
// of its input's stage before it changes anything.
//
// Each pass states its precondition as stage facts that must hold and facts that must not
// (passes/Passes.td says the same in words), e.g. tessel-gradient-all-reduce:
//
//   PipelineStage stage(module, "train_step");
//   if (failed(stage.require("tessel-gradient-all-reduce", module,
//                            /*required=*/{StageFact::TrainStep},
//                            /*forbidden=*/{StageFact::GradientsReduced, StageFact::Optimizer},
//                            "once, after tessel-autodiff and before tessel-optimizer")))
//     return signalPassFailure();
//
// and a second run fails with
//   tessel-gradient-all-reduce: @train_step already reduces its gradients
//   (tessel.all_reduce_start present); it runs once, after tessel-autodiff and before
//   tessel-optimizer
//
// Facts come from the IR alone (the ops present, or the tessel.* markers passes leave where
// the ops cannot show it), never from a record of which passes ran, so hand-written IR at
// any stage gets the same checks as the pipeline's.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "compiler/ShardingRules.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <initializer_list>
#include <string>

namespace tessel {

/// The name of the no-sync microstep function tessel-gradient-accumulation creates.
inline constexpr llvm::StringLiteral kAccumulateStep = "accumulate_step";

/// One fact about how far the pipeline has taken a function or its module.
enum class StageFact : uint8_t {
  /// The module has @train_step (tessel-autodiff ran).
  TrainStep,
  /// The module has @accumulate_step (tessel-gradient-accumulation ran).
  AccumulateStep,
  /// The function runs on a local batch: `tessel.batch_shards` (tessel-shard-batch ran).
  BatchSharded,
  /// The function computes in bf16: `tessel.mixed_precision` (tessel-mixed-precision ran).
  MixedPrecision,
  /// The function has a tessel.all_reduce_start (tessel-gradient-all-reduce ran).
  GradientsReduced,
  /// A non-parameter op of the function has `tessel.shardings` (tessel-propagate-sharding
  /// ran; tessel-partition removes them again).
  ShardingsPropagated,
  /// The function has a tessel.reshard (tessel-insert-reshards ran, and
  /// tessel-reshard-to-collectives not yet).
  ReshardsPending,
  /// The function has local shapes: `tessel.partitioned` (tessel-partition ran).
  Partitioned,
  /// A tessel.all_reduce_start carries more than one tensor (tessel-bucket-gradients ran).
  GradientsBucketed,
  /// A result of a tessel.all_reduce_wait is used before the function's last collective op:
  /// the collectives are interleaved with the ops that use them.
  CollectivesInterleaved,
  /// The function has tessel.global_norm, tessel.adamw or tessel.sgd (tessel-optimizer ran).
  Optimizer,
  /// The function has a tessel.fused_classifier (tessel-fuse-classifier ran).
  ClassifierFused,
  /// The function has tessel.fused regions (tessel-fuse ran).
  Fused,
};

/// The stage facts of one function and, when built from a module, of the module too.
class PipelineStage {
 public:
  /// The facts of `f` alone. Function passes use this form: they must not look at other
  /// functions, which may be transformed in parallel.
  explicit PipelineStage(mlir::func::FuncOp f);
  /// The facts of @`function` in `module` (none when it is missing) and the module's
  /// (TrainStep is @`trainStep`, AccumulateStep is @accumulate_step).
  PipelineStage(mlir::ModuleOp module, llvm::StringRef function,
                llvm::StringRef trainStep = "train_step");

  /// Whether `fact` holds.
  bool has(StageFact fact) const;

  /// The precondition of pass `pass`: every fact of `required` holds and none of
  /// `forbidden`. On the first one that fails (required first, in the order given) emits
  /// at `anchor` "<pass>: <what the IR shows>; it runs <order>" and returns failure.
  mlir::LogicalResult require(llvm::StringRef pass, mlir::Operation* anchor,
                              std::initializer_list<StageFact> required,
                              std::initializer_list<StageFact> forbidden,
                              llvm::StringRef order) const;

  /// What the IR shows about `fact`, in words, when it holds (`present`) or not, e.g.
  /// "@train_step already reduces its gradients (tessel.all_reduce_start present)".
  std::string describe(StageFact fact, bool present) const;

 private:
  void read(mlir::func::FuncOp f);
  void set(StageFact fact) { facts_ |= 1u << static_cast<unsigned>(fact); }

  uint32_t facts_ = 0;
  int64_t shards_ = 0;
  std::string function_;   // the function the facts are about
  std::string trainStep_;  // the module's train step name
};

/// What a sharding pass works on: the forward function and the plan's mesh.
struct ShardingTarget {
  mlir::func::FuncOp function;
  GridInfo grid;
};

/// The common start of the sharding passes (tensor-parallel, propagate-sharding,
/// insert-reshards, partition, reshard-to-collectives): @`function` of `module` (else
/// "<pass>: no function @<function>" at the module), its stage checked as
/// PipelineStage::require does, and the module's `shard.grid @mesh` (findGrid). Fails after
/// emitting the error.
mlir::FailureOr<ShardingTarget> shardingTarget(mlir::ModuleOp module, llvm::StringRef function,
                                               llvm::StringRef pass,
                                               std::initializer_list<StageFact> required,
                                               std::initializer_list<StageFact> forbidden,
                                               llvm::StringRef order);

/// The train step `name` of `module` at the stage the pipeline-parallel passes after autodiff
/// take (tessel-microbatch, tessel-schedule-pipeline): @`name` exists, with gradients not yet
/// reduced, no optimizer and nothing fused. Otherwise emits "<pass>: ..." (ending "it runs
/// <where>") and returns null.
mlir::func::FuncOp unreducedTrainStep(mlir::ModuleOp module, llvm::StringRef name, llvm::StringRef pass,
                                      llvm::StringRef where);

}  // namespace tessel
