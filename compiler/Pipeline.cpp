// The pass-pipeline driver; see Pipeline.h.
//
// Stages run one PassManager each, so the IR after every stage can be written out. The
// stage table below is the single place that says what the compiler does and in what order.
#include "compiler/Pipeline.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

namespace tessel {
namespace {

struct Stage {
  std::string name;
  std::function<void(mlir::OpPassManager&)> addPasses;  // empty: nothing to run (the input)
};

void cleanup(mlir::OpPassManager& pm) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
}

/// The compiler's stages, in order. Later passes (sharding, fusion, memory planning) are
/// appended here as they arrive.
std::vector<Stage> stages(const PipelineOptions& o) {
  auto fuse = [](mlir::OpPassManager& pm) {
    pm.addNestedPass<mlir::func::FuncOp>(createFuse());
  };
  std::vector<Stage> s{{"dsl", {}}, {"canonicalize", cleanup}};
  const bool dataParallel = o.dp > 1;
  // Under a pipeline the batch is split into dp x M_eff pieces (batchPieces) and microsteps
  // is 1, so gradient-accumulation below does not run: the pipeline's passes unroll the M_eff
  // microbatches inside @train_step instead (tessel-microbatch).
  if (o.train && batchPieces(o) > 1)
    s.push_back({"shard-batch", [o](mlir::OpPassManager& pm) {
                   pm.addPass(createShardBatch(ShardBatchOptions{batchPieces(o), o.forwardName}));
                 }});
  if (o.train && (!o.tensorParallelAxis.empty() || o.shardedParameters || !o.fullyShardAxis.empty())) {
    const std::string fwd = o.forwardName;
    if (!o.tensorParallelAxis.empty())
      s.push_back({"tensor-parallel", [o](mlir::OpPassManager& pm) {
                     pm.addPass(createTensorParallel(TensorParallelOptions{
                         o.tensorParallelAxis, o.tensorParallelSite, o.forwardName}));
                   }});
    const std::string sequenceAxis = o.sequenceParallel ? o.tensorParallelAxis : "";
    s.push_back({"propagate-sharding", [fwd, sequenceAxis](mlir::OpPassManager& pm) {
                   pm.addPass(createPropagateSharding(PropagateShardingOptions{fwd, sequenceAxis}));
                 }});
    s.push_back({"insert-reshards", [fwd](mlir::OpPassManager& pm) {
                   pm.addPass(createInsertReshards(InsertReshardsOptions{fwd}));
                 }});
    if (!o.fullyShardAxis.empty() && o.zeroStage == 3)
      s.push_back({"fully-shard", [fwd, o](mlir::OpPassManager& pm) {
                     FullyShardOptions f{fwd, o.fullyShardAxis};
                     f.units.assign(o.fsdpUnits.begin(), o.fsdpUnits.end());
                     f.planSite = o.fullyShardSite;
                     pm.addPass(createFullyShard(f));
                   }});
    s.push_back({"partition", [fwd, o](mlir::OpPassManager& pm) {
                   PartitionOptions p;
                   p.forwardName = fwd;
                   llvm::SmallVector<llvm::StringRef> batchAxes;
                   if (o.dp > 1) llvm::StringRef(o.batchAxis).split(batchAxes, ',');
                   for (llvm::StringRef axis : batchAxes) p.batchAxes.push_back(axis.str());
                   pm.addPass(createPartition(p));
                 }});
    s.push_back({"reshard-to-collectives", [fwd](mlir::OpPassManager& pm) {
                   pm.addPass(createReshardToCollectives(ReshardToCollectivesOptions{fwd}));
                 }});
  }
  if (o.decomposeAttention)
    s.push_back({"decompose-attention", [](mlir::OpPassManager& pm) {
                   pm.addNestedPass<mlir::func::FuncOp>(createDecomposeAttention());
                 }});
  if (o.precision == "bf16")
    s.push_back({"mixed-precision", [o](mlir::OpPassManager& pm) {
                   pm.addPass(createMixedPrecision(MixedPrecisionOptions{o.forwardName}));
                 }});
  // Pipeline parallelism: this rank's stage of @forward, on local shapes and final ops (so
  // that every op autodiff and the microbatch unrolling see carries its chunk).
  const bool pipelined = o.train && !o.pipelineAxis.empty() && o.pipelineStages > 1;
  if (pipelined)
    s.push_back({"split-stages", [o](mlir::OpPassManager& pm) {
                   SplitStagesOptions sp;
                   sp.axis = o.pipelineAxis;
                   sp.stage = o.pipelineStage;
                   sp.virtualStages = o.pipelineVirtualStages;
                   std::string ranges;
                   for (const auto& [first, last] : o.pipelineLayerRanges)
                     ranges += fmt::format("{}{}-{}", ranges.empty() ? "" : ",", first, last);
                   sp.layerRanges = ranges;
                   sp.forwardName = o.forwardName;
                   sp.planSite = o.pipelineSite;
                   pm.addPass(createSplitStages(sp));
                 }});
  if (o.train) {
    s.push_back({"autodiff", [o](mlir::OpPassManager& pm) {
                   pm.addPass(createAutodiff(AutodiffOptions{o.forwardName, "train_step"}));
                 }});
    if (pipelined) {
      s.push_back({"microbatch", [o](mlir::OpPassManager& pm) {
                     pm.addPass(createMicrobatch(MicrobatchOptions{o.pipelineMicrobatches, "train_step"}));
                   }});
      s.push_back({"schedule-pipeline", [o](mlir::OpPassManager& pm) {
                     pm.addPass(createSchedulePipeline(
                         SchedulePipelineOptions{o.pipelineSchedule, "train_step", o.pipelineSite}));
                   }});
    }
    // ZeRO-1/2 over the fsdp axis: parameters stay replicated, the optimizer state (and at
    // stage 2 each gradient, reduce-scattered here, before any accumulation) is split.
    const std::string blockAxis = !o.fullyShardAxis.empty() && o.zeroStage < 3 ? o.fullyShardAxis : "";
    if (!blockAxis.empty() && o.zeroStage == 2)
      s.push_back({"reduce-scatter-gradients", [blockAxis](mlir::OpPassManager& pm) {
                     pm.addPass(createReduceScatterGradients(ReduceScatterGradientsOptions{blockAxis, "train_step"}));
                   }});
    if (o.microsteps > 1)
      s.push_back({"gradient-accumulation", [o](mlir::OpPassManager& pm) {
                     pm.addPass(createGradientAccumulation(
                         GradientAccumulationOptions{o.microsteps, "train_step", o.fsdpReduceScatter}));
                   }});
    if (dataParallel)
      s.push_back({"gradient-all-reduce", [o, blockAxis](mlir::OpPassManager& pm) {
                     pm.addPass(createGradientAllReduce(GradientAllReduceOptions{
                         o.batchAxis, o.dp, "train_step", o.zeroStage == 2 ? blockAxis : ""}));
                   }});
    if (o.optimizer != "none")
      s.push_back({"optimizer", [o, blockAxis](mlir::OpPassManager& pm) {
                     pm.addPass(createOptimizer(OptimizerOptions{o.optimizer, "train_step", blockAxis}));
                   }});
    s.push_back({"cleanup", cleanup});
    if (!o.fullyShardAxis.empty() && o.zeroStage == 3 && o.reshardAfterForward)
      s.push_back({"reshard-after-forward",
                   [](mlir::OpPassManager& pm) { pm.addPass(createReshardAfterForward()); }});
    if (!o.fullyShardAxis.empty() && o.zeroStage == 3 && !o.fsdpUnits.empty() && o.fsdpPrefetch > 0)
      s.push_back({"fsdp-prefetch", [o](mlir::OpPassManager& pm) {
                     pm.addPass(createFsdpPrefetch(FsdpPrefetchOptions{o.fsdpPrefetch}));
                   }});
    if (dataParallel) {
      s.push_back({"bucket-gradients", [o](mlir::OpPassManager& pm) {
                     pm.addNestedPass<mlir::func::FuncOp>(
                         createBucketGradients(BucketGradientsOptions{o.bucketMb}));
                   }});
      s.push_back({"overlap-collectives", [o](mlir::OpPassManager& pm) {
                     pm.addNestedPass<mlir::func::FuncOp>(
                         createOverlapCollectives(OverlapCollectivesOptions{o.overlap}));
                   }});
    }
    s.push_back({"fuse-classifier", [](mlir::OpPassManager& pm) {
                   pm.addNestedPass<mlir::func::FuncOp>(createFuseClassifier());
                 }});
  }
  if (o.fuseGemmEpilogues)
    s.push_back({"fuse-gemm-epilogues", [](mlir::OpPassManager& pm) {
                   pm.addNestedPass<mlir::func::FuncOp>(createFuseGemmEpilogues());
                 }});
  s.push_back({"fuse", fuse});
  // Remat last: it clones whole fused kernels, so recomputed values come from the same
  // kernels as the originals (bitwise), and lands after the placed collectives.
  if (o.train && !o.checkpointModules.empty())
    s.push_back({"activation-checkpointing", [o](mlir::OpPassManager& pm) {
                   ActivationCheckpointingOptions a;
                   a.modules.assign(o.checkpointModules.begin(), o.checkpointModules.end());
                   a.mode = o.checkpointMode;
                   a.planSite = o.checkpointSite;
                   pm.addPass(createActivationCheckpointing(a));
                 }});
  return s;
}

/// The textual options of `tessel-pipeline`, one per PipelineOptions field (dumpIrDir aside:
/// tessel-opt prints the result instead; the mesh is the module's own grid and
/// tensorParallelSite unknown). Defaults come from PipelineOptions itself.
struct PipelineCLOptions : mlir::PassPipelineOptions<PipelineCLOptions> {
  const PipelineOptions defaults;
  Option<bool> train{*this, "train", llvm::cl::desc("build @train_step (autodiff + optimizer)"),
                     llvm::cl::init(defaults.train)};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("adamw, sgd or none"),
                                llvm::cl::init(defaults.optimizer)};
  Option<std::string> precision{*this, "precision", llvm::cl::desc("f32 or bf16"),
                                llvm::cl::init(defaults.precision)};
  Option<std::string> forward{*this, "forward",
                              llvm::cl::desc("the function autodiff differentiates"),
                              llvm::cl::init(defaults.forwardName)};
  Option<int64_t> dp{*this, "dp", llvm::cl::desc("data-parallel ranks"),
                     llvm::cl::init(defaults.dp)};
  Option<int64_t> microsteps{*this, "microsteps",
                             llvm::cl::desc("gradient-accumulation microsteps per step"),
                             llvm::cl::init(defaults.microsteps)};
  Option<double> bucketMb{*this, "bucket-mb", llvm::cl::desc("gradient bucket capacity in MiB"),
                          llvm::cl::init(defaults.bucketMb)};
  Option<bool> overlap{*this, "overlap",
                       llvm::cl::desc("start each bucket's all-reduce during the backward pass"),
                       llvm::cl::init(defaults.overlap)};
  Option<std::string> batchAxis{*this, "batch-axis",
                                llvm::cl::desc("the mesh axis (or comma-separated axes) the batch is split over"),
                                llvm::cl::init(defaults.batchAxis)};
  Option<std::string> fullyShard{*this, "fully-shard",
                                 llvm::cl::desc("the mesh axis the plan fully shards over (parameters at "
                                                "zero-stage 3; optimizer state, and at 2 gradients, at 1 and 2)"),
                                 llvm::cl::init(defaults.fullyShardAxis)};
  Option<int64_t> zeroStage{*this, "zero-stage",
                            llvm::cl::desc("with fully-shard: the ZeRO stage, 1 (optimizer state split), 2 (and "
                                           "gradients) or 3 (and parameters)"),
                            llvm::cl::init(defaults.zeroStage)};
  Option<std::string> fsdpReduceScatter{
      *this, "fsdp-reduce-scatter",
      llvm::cl::desc("with microsteps > 1 at ZeRO stage 2 or 3: every-microstep or last-microstep"),
      llvm::cl::init(defaults.fsdpReduceScatter)};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("with fully-shard: gather each parameter again in the backward pass"),
      llvm::cl::init(defaults.reshardAfterForward)};
  Option<std::string> tensorParallel{
      *this, "tensor-parallel",
      llvm::cl::desc("the mesh axis of Megatron tensor parallelism (the module's @mesh must have it)"),
      llvm::cl::init(defaults.tensorParallelAxis)};
  Option<bool> shardedParameters{
      *this, "sharded-params",
      llvm::cl::desc("run the sharding stages for the module's own parameter shardings"),
      llvm::cl::init(defaults.shardedParameters)};
  ListOption<std::string> fsdpUnit{
      *this, "fsdp-unit",
      llvm::cl::desc("with fully-shard: globs over module paths, the units gathered as one (blocks.*)")};
  Option<int64_t> fsdpPrefetch{*this, "fsdp-prefetch",
                               llvm::cl::desc("with fsdp-unit: units whose all-gathers start ahead (0: off)"),
                               llvm::cl::init(defaults.fsdpPrefetch)};
  ListOption<std::string> checkpoint{
      *this, "checkpoint",
      llvm::cl::desc("activation checkpointing: globs over the module paths to recompute (blocks.*)")};
  Option<std::string> checkpointMode{*this, "checkpoint-mode",
                                     llvm::cl::desc("full or selective activation checkpointing"),
                                     llvm::cl::init(defaults.checkpointMode)};
  Option<bool> sequenceParallel{*this, "sequence-parallel",
                                llvm::cl::desc("split the LayerNorm and residual regions along T over the "
                                               "tensor-parallel axis"),
                                llvm::cl::init(defaults.sequenceParallel)};
  Option<std::string> pipelineAxis{*this, "pipeline-axis",
                                   llvm::cl::desc("the mesh axis of pipeline parallelism (\"\": none)"),
                                   llvm::cl::init(defaults.pipelineAxis)};
  Option<int64_t> pipelineStages{*this, "pipeline-stages", llvm::cl::desc("ranks along the pipeline axis"),
                                 llvm::cl::init(defaults.pipelineStages)};
  Option<int64_t> pipelineStage{*this, "pipeline-stage",
                                llvm::cl::desc("the stage this module is compiled for, in [0, pipeline-stages)"),
                                llvm::cl::init(defaults.pipelineStage)};
  Option<std::string> pipelineSchedule{
      *this, "pipeline-schedule", llvm::cl::desc("gpipe, 1f1b, interleaved, zero-bubble or a CSV file of actions"),
      llvm::cl::init(defaults.pipelineSchedule)};
  Option<int64_t> pipelineMicrobatches{
      *this, "pipeline-microbatches",
      llvm::cl::desc("microbatches per @train_step (grad accumulation included)"),
      llvm::cl::init(defaults.pipelineMicrobatches)};
  Option<int64_t> pipelineVirtualStages{*this, "pipeline-virtual-stages",
                                        llvm::cl::desc("chunks of layers per rank"),
                                        llvm::cl::init(defaults.pipelineVirtualStages)};
  ListOption<std::string> pipelineLayerRanges{
      *this, "pipeline-layer-ranges",
      llvm::cl::desc("the chunks' layer ranges first-last, inclusive (0-5,6-11; none: balanced)")};
  Option<bool> fuseGemmEpilogues{*this, "fuse-gemm-epilogues",
                                 llvm::cl::desc("fold bias, GELU, residual and bias gradient into GEMM epilogues"),
                                 llvm::cl::init(defaults.fuseGemmEpilogues)};
  Option<std::string> pipelineSite{*this, "pipeline-site",
                                   llvm::cl::desc("file:line:col of the plan's pipeline() call"),
                                   llvm::cl::init(defaults.pipelineSite)};

  /// The options as PipelineOptions; a malformed layer range sets `error`.
  PipelineOptions toOptions(std::string& error) const {
    PipelineOptions o;
    o.train = train;
    o.fuseGemmEpilogues = fuseGemmEpilogues;
    o.optimizer = optimizer;
    o.precision = precision;
    o.forwardName = forward;
    o.dp = dp;
    o.microsteps = microsteps;
    o.bucketMb = bucketMb;
    o.overlap = overlap;
    o.batchAxis = batchAxis;
    o.fullyShardAxis = fullyShard;
    o.reshardAfterForward = reshardAfterForward;
    o.zeroStage = zeroStage;
    o.fsdpReduceScatter = fsdpReduceScatter;
    o.tensorParallelAxis = tensorParallel;
    o.shardedParameters = shardedParameters;
    o.sequenceParallel = sequenceParallel;
    o.checkpointModules.assign(checkpoint.begin(), checkpoint.end());
    o.checkpointMode = checkpointMode;
    o.fsdpUnits.assign(fsdpUnit.begin(), fsdpUnit.end());
    o.fsdpPrefetch = fsdpPrefetch;
    o.pipelineAxis = pipelineAxis;
    o.pipelineStages = pipelineStages;
    o.pipelineStage = pipelineStage;
    o.pipelineSchedule = pipelineSchedule;
    o.pipelineMicrobatches = pipelineMicrobatches;
    o.pipelineVirtualStages = pipelineVirtualStages;
    o.pipelineSite = pipelineSite;
    for (const std::string& item : pipelineLayerRanges) {
      llvm::StringRef first, last;
      std::tie(first, last) = llvm::StringRef(item).split('-');
      int64_t a = 0, b = 0;
      if (first.getAsInteger(10, a) || last.getAsInteger(10, b)) {
        error = fmt::format("pipeline-layer-ranges: '{}' is not first-last (e.g. 0-5)", item);
        break;
      }
      o.pipelineLayerRanges.emplace_back(a, b);
    }
    return o;
  }
};

/// The mesh part of checkPipelineOptions.
std::string checkMeshOptions(const PipelineOptions& o) {
  constexpr int64_t kMaxRanks = int64_t{1} << 20;  // as the DSL's Mesh (dsl/Plan.h)
  auto sizeOf = [&](const std::string& axis) -> int64_t {
    for (const auto& [name, size] : o.mesh)
      if (name == axis) return size;
    return 0;
  };
  for (size_t i = 0; i < o.mesh.size(); ++i) {
    const auto& [name, size] = o.mesh[i];
    if (name.empty()) return "mesh: an axis has no name";
    if (size < 1 || size > kMaxRanks) return fmt::format("mesh axis {}={}: must be in [1, 2^20]", name, size);
    for (size_t j = 0; j < i; ++j)
      if (o.mesh[j].first == name) return fmt::format("mesh axis '{}' appears twice", name);
  }
  llvm::SmallVector<llvm::StringRef> batchAxes;
  llvm::StringRef(o.batchAxis).split(batchAxes, ',');
  int64_t batchRanks = 1;
  for (llvm::StringRef axis : batchAxes) batchRanks *= sizeOf(axis.str());
  if (!o.mesh.empty() && o.dp > 1 && batchRanks != o.dp)
    return fmt::format("dp={}: the mesh has no axis '{}' of that size", o.dp, o.batchAxis);
  if (!o.fullyShardAxis.empty() && (o.dp == 1 || !llvm::is_contained(batchAxes, o.fullyShardAxis)))
    return fmt::format("fully-shard={}: must be one of the batch axes (batch-axis={}, dp={})", o.fullyShardAxis,
                       o.batchAxis, o.dp);
  // Without `mesh` (tessel-opt) the passes check the axis against the module's grid.
  if (!o.mesh.empty() && !o.tensorParallelAxis.empty() && sizeOf(o.tensorParallelAxis) == 0)
    return fmt::format("tensor-parallel={}: not an axis of the mesh", o.tensorParallelAxis);
  if (o.sequenceParallel && o.tensorParallelAxis.empty())
    return "sequence-parallel: needs tensor parallelism (tensor-parallel=<axis>)";
  return "";
}

/// The pipeline part of checkPipelineOptions (after checkMeshOptions).
std::string checkPipelineParallelOptions(const PipelineOptions& o) {
  if (o.pipelineStages < 1) return fmt::format("pipeline-stages={}: must be at least 1", o.pipelineStages);
  if (o.pipelineAxis.empty()) {
    if (o.pipelineStages > 1)
      return fmt::format("pipeline-stages={}: needs pipeline-axis=<the mesh axis>", o.pipelineStages);
    return "";
  }
  for (const auto& [name, size] : o.mesh)
    if (name == o.pipelineAxis && size != o.pipelineStages)
      return fmt::format("pipeline-stages={}: the mesh axis '{}' has {} ranks", o.pipelineStages, name, size);
  if (!o.mesh.empty() && std::none_of(o.mesh.begin(), o.mesh.end(), [&](const auto& a) {
        return a.first == o.pipelineAxis;
      }))
    return fmt::format("pipeline-axis={}: not an axis of the mesh", o.pipelineAxis);
  llvm::SmallVector<llvm::StringRef> batchAxes;
  llvm::StringRef(o.batchAxis).split(batchAxes, ',');
  if ((o.dp > 1 && llvm::is_contained(batchAxes, o.pipelineAxis)) || o.pipelineAxis == o.tensorParallelAxis ||
      o.pipelineAxis == o.fullyShardAxis)
    return fmt::format("pipeline-axis={}: the axis already has another role (batch, tensor-parallel or "
                       "fully sharded)", o.pipelineAxis);
  if (o.pipelineStage < 0 || o.pipelineStage >= o.pipelineStages)
    return fmt::format("pipeline-stage={}: must be in [0, {}) (pipeline-stages={})", o.pipelineStage,
                       o.pipelineStages, o.pipelineStages);
  if (o.microsteps != 1)
    return fmt::format("microsteps={}: must be 1 with pipeline-axis (gradient accumulation is part of "
                       "pipeline-microbatches)", o.microsteps);
  if (o.pipelineMicrobatches < 1)
    return fmt::format("pipeline-microbatches={}: must be at least 1", o.pipelineMicrobatches);
  constexpr int64_t kMaxParts = int64_t{1} << 31;  // as dp * microsteps in checkPipelineOptions
  if (o.dp > kMaxParts / o.pipelineMicrobatches)
    return fmt::format("dp={} pipeline-microbatches={}: their product must be at most 2^31", o.dp,
                       o.pipelineMicrobatches);
  if (o.pipelineVirtualStages < 1 || o.pipelineVirtualStages > (int64_t{1} << 20))
    return fmt::format("pipeline-virtual-stages={}: must be in [1, 2^20]", o.pipelineVirtualStages);
  if (o.pipelineSchedule.empty()) return "pipeline-schedule=: must name a schedule or a CSV file";
  if (o.pipelineSchedule == "interleaved" && o.pipelineVirtualStages < 2)
    return "pipeline-schedule=interleaved: needs pipeline-virtual-stages >= 2";
  if (o.pipelineLayerRanges.empty()) return "";
  if (static_cast<int64_t>(o.pipelineLayerRanges.size()) != o.pipelineStages * o.pipelineVirtualStages)
    return fmt::format("pipeline-layer-ranges: {} ranges, but {} stages x {} virtual stages need {}",
                       o.pipelineLayerRanges.size(), o.pipelineStages, o.pipelineVirtualStages,
                       o.pipelineStages * o.pipelineVirtualStages);
  int64_t next = 0;
  for (const auto& [first, last] : o.pipelineLayerRanges) {
    if (first != next || last < first)
      return fmt::format("pipeline-layer-ranges: {}-{} must start at layer {} and end at or after it", first, last,
                         next);
    next = last + 1;
  }
  return "";
}

}  // namespace

int64_t batchPieces(const PipelineOptions& o) {
  return o.dp * (o.pipelineAxis.empty() ? o.microsteps : o.pipelineMicrobatches);
}

void buildPipeline(mlir::OpPassManager& pm, const PipelineOptions& options) {
  for (const Stage& s : stages(options))
    if (s.addPasses) s.addPasses(pm);
}

std::string checkPipelineOptions(const PipelineOptions& o) {
  if (o.dp < 1) return fmt::format("dp={}: must be at least 1", o.dp);
  if (o.microsteps < 1) return fmt::format("microsteps={}: must be at least 1", o.microsteps);
  // The batch is split into dp * microsteps parts (tessel-shard-batch); the product must not
  // overflow, and no batch has more than 2^31 rows to split.
  constexpr int64_t kMaxParts = int64_t{1} << 31;
  if (o.dp > kMaxParts / o.microsteps)
    return fmt::format("dp={} microsteps={}: dp * microsteps must be at most 2^31 (the batch is split into "
                       "that many parts)", o.dp, o.microsteps);
  if (!(o.bucketMb > 0)) return fmt::format("bucket-mb={}: must be more than 0", o.bucketMb);
  if (o.optimizer != "adamw" && o.optimizer != "sgd" && o.optimizer != "none")
    return fmt::format("optimizer={}: must be adamw, sgd or none", o.optimizer);
  if (o.precision != "f32" && o.precision != "bf16")
    return fmt::format("precision={}: must be f32 or bf16", o.precision);
  if (o.forwardName.empty()) return "forward=: must name a function";
  if (o.zeroStage < 1 || o.zeroStage > 3)
    return fmt::format("zero-stage={}: ZeRO stage {} does not exist (stages are 1, 2 and 3)", o.zeroStage, o.zeroStage);
  if (o.fsdpReduceScatter != "every-microstep" && o.fsdpReduceScatter != "last-microstep")
    return fmt::format("fsdp-reduce-scatter={}: must be every-microstep or last-microstep", o.fsdpReduceScatter);
  if (o.checkpointMode != "full" && o.checkpointMode != "selective")
    return fmt::format("checkpoint-mode={}: must be full or selective", o.checkpointMode);
  if (o.fsdpPrefetch < 0)
    return fmt::format("fsdp-prefetch={}: must be at least 0 (0: off)", o.fsdpPrefetch);
  std::string mesh = checkMeshOptions(o);
  return mesh.empty() ? checkPipelineParallelOptions(o) : mesh;
}

void registerTesselPipeline() {
  static bool registered = false;
  if (registered) return;
  registered = true;
  mlir::registerPassPipeline(
      "tessel-pipeline",
      "The whole Tessel compile pipeline, stage by stage as --dump-ir writes it (options as "
      "the trainer's: train, optimizer, precision, forward, dp, microsteps, bucket-mb, overlap, "
      "batch-axis, fully-shard, zero-stage, fsdp-reduce-scatter, reshard-after-forward, tensor-parallel, "
      "sharded-params, sequence-parallel, checkpoint, checkpoint-mode, fsdp-unit, fsdp-prefetch, pipeline-axis, "
      "pipeline-stages, pipeline-stage, pipeline-schedule, pipeline-microbatches, pipeline-virtual-stages, "
      "pipeline-layer-ranges, pipeline-site)",
      [](mlir::OpPassManager& pm, llvm::StringRef text,
         llvm::function_ref<mlir::LogicalResult(const llvm::Twine&)> errorHandler) {
        PipelineCLOptions cl;
        if (mlir::failed(cl.parseFromString(text)))
          return errorHandler("tessel-pipeline: cannot parse the options '" + text + "'");
        std::string error;
        PipelineOptions options = cl.toOptions(error);
        if (error.empty()) error = checkPipelineOptions(options);
        if (!error.empty()) return errorHandler("tessel-pipeline: " + error);
        buildPipeline(pm, options);
        return mlir::success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions&)> handler) {
        handler(PipelineCLOptions());
      });
}

std::vector<std::string> pipelineStageNames(const PipelineOptions& options) {
  std::vector<std::string> names;
  for (const Stage& s : stages(options)) names.push_back(s.name);
  return names;
}

bool writeModule(mlir::ModuleOp module, const std::string& path, std::string& error) {
  std::ofstream out(path);
  if (!out) {
    error = fmt::format("cannot write '{}': {}", path, std::strerror(errno));
    return false;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, mlir::OpPrintingFlags().enableDebugInfo(/*enable=*/true,
                                                            /*prettyForm=*/false));
  out << text;
  if (!out.good()) {
    error = fmt::format("failed writing '{}'", path);
    return false;
  }
  return true;
}

mlir::LogicalResult runPipeline(mlir::ModuleOp module, const PipelineOptions& options) {
  std::string invalid = checkPipelineOptions(options);
  if (!invalid.empty()) return module.emitError() << "compiler pipeline: " << invalid;
  if (!options.dumpIrDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.dumpIrDir, ec);
    if (ec)
      return module.emitError() << "cannot create IR dump folder '" << options.dumpIrDir
                                << "': " << ec.message();
  }
  int index = 0;
  for (const Stage& stage : stages(options)) {
    if (stage.addPasses) {
      mlir::PassManager pm(module->getContext());
      stage.addPasses(pm);
      if (mlir::failed(pm.run(module))) return mlir::failure();
    }
    if (!options.dumpIrDir.empty()) {
      std::string path = fmt::format("{}/{:02d}-{}.mlir", options.dumpIrDir, index, stage.name);
      std::string error;
      if (!writeModule(module, path, error)) return module.emitError() << error;
    }
    ++index;
  }
  return mlir::success();
}

}  // namespace tessel
