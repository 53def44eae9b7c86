// The pass-pipeline driver: runs the compiler's stages in order on a module and, when asked,
// writes the IR after every stage into a folder as numbered files ("00-dsl.mlir",
// "01-canonicalize.mlir", ...), with locations, so a user can see what each stage did.
// The same stages are registered as one named pass pipeline, `tessel-pipeline`, so that
// `tessel-opt --tessel-pipeline='dp=2 optimizer=sgd' 00-dsl.mlir` replays what --dump-ir
// shows (registerTesselPipeline).
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlir {
class OpPassManager;
}

namespace tessel {

/// What the driver does besides running the passes.
struct PipelineOptions {
  /// If non-empty, the folder (created if missing) that receives one .mlir file per stage.
  std::string dumpIrDir;
  /// Build @train_step (autodiff + optimizer) next to @forward. Off: forward only.
  bool train = true;
  /// "adamw" or "sgd" (see the tessel-optimizer pass), or "none": @train_step then returns
  /// the loss and the gradients and updates nothing.
  std::string optimizer = "adamw";
  /// "f32", or "bf16": mixed precision (the tessel-mixed-precision pass) with bf16
  /// activations and f32 master weights, optimizer state and loss.
  std::string precision = "f32";
  /// The function autodiff differentiates.
  std::string forwardName = "forward";
  /// Data parallelism (a Plan's shard_batch): ranks of the replica group. With dp > 1 the
  /// pipeline shards the batch, averages the gradients over the ranks (before clipping and
  /// the optimizer), buckets the all-reduces and places them; with dp == 1 and
  /// microsteps == 1 the stages and their output are exactly those of a single-device run.
  int64_t dp = 1;
  /// Gradient accumulation: microsteps per optimizer step (k >= 1); each runs B / (dp * k)
  /// rows, and only the last one (@train_step) synchronises (tessel-gradient-accumulation).
  int64_t microsteps = 1;
  /// Bucket capacity in MiB (tessel-bucket-gradients).
  double bucketMb = 25.0;
  /// Start each bucket's all-reduce during the backward pass (tessel-overlap-collectives).
  bool overlap = true;
  /// The plan's mesh: its axes in order (outermost first), as the module's `shard.grid @mesh`
  /// has them; empty without a plan, or for a data-parallel-only plan (Plan::needs_grid),
  /// whose 1-D grid tessel-gradient-all-reduce makes. The DSL writes the grid
  /// (dsl/PlanIr.cpp). Axis names distinct and non-empty, sizes in [1, 2^20].
  std::vector<std::pair<std::string, int64_t>> mesh;
  /// The mesh axis of the plan's tensor_parallel (Megatron layout, tessel-tensor-parallel),
  /// or "" when the plan has none.
  std::string tensorParallelAxis;
  /// Where the plan calls tensor_parallel, "file:line:col" (its diagnostics point there;
  /// compiler/PlanSite.h planSiteLocation). "--plan:1:<column>" for the trainer's flag.
  std::string tensorParallelSite;
  /// Sequence parallelism (the plan's sequence_parallel; needs tensorParallelAxis).
  bool sequenceParallel = false;
  /// The plan shards parameters itself (shard() entries, as `tessel.shardings` on params).
  bool shardedParameters = false;
  /// Activation checkpointing (the plan's checkpoint() entries): globs over module paths
  /// ("blocks.*") whose forward values the backward pass recomputes instead of keeping
  /// (tessel-activation-checkpointing); empty: every activation is kept.
  std::vector<std::string> checkpointModules;
  /// "full" (recompute the whole module) or "selective" (its core attention only).
  std::string checkpointMode = "full";
  /// Where the plan calls checkpoint, "file:line:col" (its diagnostics point there).
  std::string checkpointSite;
  /// The mesh axis gradients are averaged over when dp > 1: the plan's shard_batch axis,
  /// which tessel-gradient-all-reduce finds by name in `shard.grid @mesh`; comma-separated
  /// axes ("dp,fsdp", in mesh order) when the batch is split over several (dp then is the
  /// product of their sizes).
  std::string batchAxis = "dp";
  /// Rewrite causal_attention and grouped_attention into reshapes, transposes, batched
  /// matmuls and a causal softmax before autodiff (tessel-decompose-attention). False (the
  /// default) keeps each as one op with its own fused kernel and VJP (causal_attention_grad,
  /// grouped_attention_grad). The GPU trainer sets this until the CUDA twins of the fused
  /// kernels (checked only in the SIMT harness so far) are timed on a GPU.
  bool decomposeAttention = false;
  /// Fold each GEMM's bias add, GELU, residual add and bias-gradient sum into the GEMM step's
  /// epilogue (tessel-fuse-gemm-epilogues, runtime/exec/Program.h GemmEpilogue). True (the
  /// default); false keeps them separate kernels, for comparisons that need the unfused
  /// program's exact GELU and bias-gradient roundings.
  bool fuseGemmEpilogues = true;
  /// Fully sharded data parallelism (the plan's fully_shard): the mesh axis every parameter
  /// is stored split over on dimension 0 at ZeRO stage 3 (tessel-fully-shard), or only its
  /// optimizer state (and gradient) at stages 1 and 2 (zeroStage), or "". It must be one of
  /// the batch axes.
  std::string fullyShardAxis;
  /// With fullyShardAxis: gather each parameter again in the backward pass rather than
  /// keep the forward pass's gathered copy (tessel-reshard-after-forward; FSDP2's default).
  bool reshardAfterForward = true;
  /// With fullyShardAxis: the ZeRO stage. 3 stores parameters split (tessel-fully-shard); 1
  /// and 2 keep them replicated and split only the optimizer state (tessel-optimizer's
  /// shard-state-axis) and, at 2, each gradient (tessel-reduce-scatter-gradients). In [1, 3].
  int64_t zeroStage = 3;
  /// With microsteps > 1 at stage 2 or 3: when gradients are reduce-scattered,
  /// "every-microstep" (FSDP2's default: only blocks are accumulated) or "last-microstep"
  /// (the whole local gradient is accumulated and reduce-scattered once per step;
  /// tessel-gradient-accumulation's reduce-scatter).
  std::string fsdpReduceScatter = "every-microstep";
  /// With fullyShardAxis: the FSDP units, globs over module paths (compiler/FsdpUnits.h;
  /// the plan's fully_shard `unit`, or its `min_unit_params` resolved to module paths);
  /// each unit is all-gathered as one group, and the parameters in none form the root
  /// unit (gathered once per step). Empty: each parameter is its own unit.
  std::vector<std::string> fsdpUnits;
  /// Where the plan calls fully_shard, "file:line:col" (unit errors point there).
  std::string fullyShardSite;
  /// With fsdpUnits: the units whose all-gathers start ahead of their use
  /// (tessel-fsdp-prefetch); 0 keeps every gather synchronous at its use. At least 0.
  int64_t fsdpPrefetch = 1;
  /// Pipeline parallelism (the plan's pipeline()): the mesh axis the stages are laid along,
  /// or "" for a program without pipeline parallelism (then the fields below keep their
  /// defaults). Must be none of the batch, tensor-parallel and fully sharded axes.
  std::string pipelineAxis;
  /// The ranks along pipelineAxis (its size, p >= 1; 1 without a pipeline).
  int64_t pipelineStages = 1;
  /// The stage (the rank's coordinate along pipelineAxis) this module is compiled for, in
  /// [0, pipelineStages): every rank compiles only its own stage (CompileOptions::pipeline_stage).
  int64_t pipelineStage = 0;
  /// "gpipe", "1f1b", "interleaved" or "zero-bubble" (runtime/pipeline's parseScheduleKind),
  /// or the path of a CSV file of actions per rank (a user schedule).
  std::string pipelineSchedule = "1f1b";
  /// M_eff: the microbatches one @train_step runs, grad accumulation included (the plan's
  /// microbatches x grad_accumulation), each B / (dp x M_eff) rows. Under a pipeline,
  /// `microsteps` is 1: there is no @accumulate_step, and shard-batch splits the batch into
  /// dp x pipelineMicrobatches pieces (batchPieces). >= 1.
  int64_t pipelineMicrobatches = 1;
  /// Chunks of layers per rank, v >= 1 (interleaved needs >= 2).
  int64_t pipelineVirtualStages = 1;
  /// The chunks' layer ranges, inclusive, one per chunk (p x v of them, contiguous from layer
  /// 0); empty: the compiler balances the layers with its cost model.
  std::vector<std::pair<int64_t, int64_t>> pipelineLayerRanges;
  /// Where the plan calls pipeline(), "file:line:col" ("--plan:1:<column>" for the trainer's
  /// flag): the pipeline passes' diagnostics point there (compiler/PlanSite.h).
  std::string pipelineSite;
};

/// The pieces tessel-shard-batch splits the global batch into, so that @forward runs on one
/// of them: dp x microsteps, or under a pipeline (pipelineAxis non-empty) dp x
/// pipelineMicrobatches (M_eff). 1: the batch is not split.
int64_t batchPieces(const PipelineOptions& options);

/// The names of the stages runPipeline runs with `options`, in order (stage 0 is the input
/// as built).
std::vector<std::string> pipelineStageNames(const PipelineOptions& options);

/// Adds the passes of every stage to `pm` (a pass manager on builtin.module), in the order
/// runPipeline runs them: one pass manager then replays the whole pipeline.
void buildPipeline(mlir::OpPassManager& pm, const PipelineOptions& options);

/// Checks the options a pipeline cannot run with: dp or microsteps below 1, dp * microsteps
/// above 2^31 (an overflow included), bucketMb not positive, an optimizer other than adamw,
/// sgd or none, a precision other than f32 or bf16, an empty forwardName; a mesh with an
/// empty or repeated axis name or a size outside [1, 2^20], or (when given) without
/// batchAxis of size dp (dp > 1) or without tensorParallelAxis; fullyShardAxis that is not
/// one of the batch axes (or with dp = 1); a zeroStage outside [1, 3]; an fsdpReduceScatter
/// other than every-microstep or last-microstep; sequenceParallel without
/// tensorParallelAxis; a checkpointMode other than full or selective; a negative fsdpPrefetch;
/// for a pipeline: pipelineStages < 1 (or > 1 without pipelineAxis), a pipelineAxis that is
/// not an axis of that size of the mesh (when given) or is another role's axis, pipelineStage
/// outside [0, pipelineStages), microsteps other than 1 (accumulation is folded into
/// pipelineMicrobatches), pipelineMicrobatches or pipelineVirtualStages below 1, dp x
/// pipelineMicrobatches above 2^31, an empty pipelineSchedule, interleaved with one virtual
/// stage, layer ranges that are not p x v contiguous ranges from layer 0. Returns "" when they
/// are valid, else a one-line reason naming the option as the pipeline spells it (e.g.
/// "dp=0: must be at least 1").
std::string checkPipelineOptions(const PipelineOptions& options);

/// Registers the pass pipeline `tessel-pipeline` (for tessel-opt) built by buildPipeline,
/// with the options train, optimizer, precision, forward, dp, microsteps, bucket-mb,
/// overlap, batch-axis, fully-shard (the axis), zero-stage, fsdp-reduce-scatter,
/// reshard-after-forward, tensor-parallel (the
/// axis), sharded-params, sequence-parallel, checkpoint (module globs), checkpoint-mode,
/// fsdp-unit (unit globs), fsdp-prefetch, and the pipeline's pipeline-axis, pipeline-stages,
/// pipeline-stage, pipeline-schedule, pipeline-microbatches, pipeline-virtual-stages,
/// pipeline-layer-ranges (first-last items, e.g. pipeline-layer-ranges=0-5,6-11) and
/// pipeline-site, whose defaults are PipelineOptions'. The mesh is the module's
/// `shard.grid @mesh`. Invalid options are a one-line error (checkPipelineOptions). Idempotent.
void registerTesselPipeline();

/// Runs every stage on `module`. Pass failures are reported through the context's
/// diagnostic handler (at the op's location) and return failure(); an unwritable dump
/// folder is also reported as an error diagnostic at the module's location.
mlir::LogicalResult runPipeline(mlir::ModuleOp module, const PipelineOptions& options);

/// Writes `module` with its locations to `path`; returns false and sets `error` on failure.
bool writeModule(mlir::ModuleOp module, const std::string& path, std::string& error);

}  // namespace tessel
