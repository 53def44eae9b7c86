// The parallelism plan: HOW a model is laid over the ranks (examples' plans.h); it never
// changes WHAT is computed. Included by dsl/tessel.h; no MLIR.
//
//   tessel::Plan plan = tessel::Plan(tessel::Mesh{{"dp", 2}, {"tp", 2}})
//                           .shard_batch("dp")        // data parallelism over dp
//                           .tensor_parallel("tp")    // Megatron's layout of every block over tp
//                           .shard("blocks.*.mlp.fc.weight", {"tp", {}})  // dim 0 over tp
//                           .bucket_mb(25)            // gradient all-reduce buckets
//                           .grad_accumulation(2)
//                           .overlap(true);
//   tessel::Program p = model.compile({.plan = plan});
//
//   // Pipeline parallelism (PlanPipeline.h): 2 stages, 1F1B over 8 microbatches, dp inside.
//   tessel::Plan(tessel::Mesh{{"pp", 2}, {"dp", 2}}).shard_batch("dp")
//       .pipeline("pp", tessel::Schedule::OneFOneB, /*microbatches=*/8);
//
// The mesh's axes are listed outermost first: the last axis varies fastest along the ranks
// (rank = row-major index of its coordinates). Any order is accepted; the recommended (and
// --plan's documented) layout puts pp outermost and tp innermost, e.g. pp=2,dp=2,tp=2, so
// that the ranks of one tp group are neighbours (the same node), as in Megatron-LM.
//
// Every call records its source line; a plan that cannot run is a tessel::ModelError at the
// plan's line: a mesh whose size is not the job's world size, a global batch the
// data-parallel degree (times the microbatches) does not divide, an unknown axis, an axis no
// part of the plan uses (a pp axis without pipeline()), pipeline settings that cannot run,
// sequence_parallel without tensor_parallel; and, when the model compiles,
// a shard() glob that matches no parameter, a sharding with the wrong number of dimensions
// or one its axes do not divide, two shard() entries that give one parameter different
// shardings (with a note at the other entry), and a tp degree that does not divide the
// attention heads. The trainer's `--plan dp=2,tp=2` builds the same kind of plan from the
// command line (parsePlan), and its errors name the flag and the column of the offending item.
#pragma once

#include "dsl/PlanPipeline.h"  // Schedule, PipelineConfig

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

/// Where a plan call was written: the user's file, line and column (a std::source_location),
/// or for a plan given on the command line, "--plan" and the 1-based column in its text.
struct PlanSite {
  std::string file;
  int line = 0;
  int column = 0;
  static PlanSite of(const std::source_location& loc) {
    return {loc.file_name(), static_cast<int>(loc.line()), static_cast<int>(loc.column())};
  }
};

/// The mesh axes one tensor dimension is split over, outermost first; none means the
/// dimension is replicated. Converts from one axis name or a braced list of names, so that
/// a sharding reads as its dimensions:
///   {"tp", {}}             dim 0 split over tp, dim 1 replicated (a column-parallel weight)
///   {{}, "tp"}             dim 1 split over tp (row-parallel)
///   {{"dp", "tp"}, {}}     dim 0 split over dp, then each dp part over tp
/// ({"dp", "tp"} as a whole sharding is two dimensions, dim 0 over dp and dim 1 over tp.)
struct Axes {
  Axes() = default;
  Axes(const char* axis) : names{axis} {}                             // NOLINT: implicit on purpose
  Axes(std::string axis) : names{std::move(axis)} {}                  // NOLINT
  Axes(std::initializer_list<std::string> axes) : names(axes) {}      // NOLINT
  std::vector<std::string> names;
};

/// One Plan::shard() entry: a glob over parameter names and, per dimension of the matched
/// parameters, the mesh axes that dimension is split over.
struct ShardEntry {
  std::string glob;
  std::vector<std::vector<std::string>> dims;
  PlanSite site;
};

/// What activation checkpointing recomputes in the backward pass (Plan::checkpoint).
enum class CheckpointMode {
  /// The module's whole forward: its input is kept (its output is the next one's input), and
  /// so is what a kernel shared with the module before it computes (a block's first layer
  /// norm, fused with the residual add that ends the previous block) and every collective's
  /// result (recomputation never communicates).
  Full,
  /// Megatron-LM's selective recomputation: the core attention only (the T x T scores q k^T,
  /// their scale and causal softmax, and its product with v); the linear layers' outputs
  /// are kept.
  Selective,
};

/// One Plan::checkpoint() entry: a glob over module paths, the mode and where it was called.
struct CheckpointEntry {
  std::string glob;
  CheckpointMode mode = CheckpointMode::Full;
  PlanSite site;
};

/// "full" or "selective" (the spelling of --activation-checkpointing and the pass option).
const char* checkpointModeName(CheckpointMode mode);

/// The sharding a plan gives one parameter (Plan::resolve_shardings): per dimension the
/// indices of the mesh axes it is split over (outermost first), and the shard() entry
/// (index into Plan::shards()) it comes from.
struct ParameterSharding {
  std::string name;
  std::vector<std::vector<int>> axes;
  size_t entry = 0;
};

/// Whether parameter `name` matches `glob` (Plan::shard). Globs are fnmatch-like on the
/// whole dotted name: `*` matches any run of characters, dots included (so
/// "blocks.*.weight" matches "blocks.0.attn.qkv.weight"), `?` any one character, and every
/// other character itself. Unlike fnmatch there are no character classes and no escapes:
/// '[' and '\' match themselves.
bool glob_matches(const std::string& glob, const std::string& name);

/// The most ranks a mesh may have (and so each of its axes): 2^20, far above any job, and
/// small enough that products of sizes and batch splits cannot overflow int64.
inline constexpr int64_t kMaxMeshRanks = int64_t{1} << 20;

/// The logical array of ranks with named axes, e.g. Mesh{{"dp", 2}, {"tp", 2}}; its size is
/// the product of the axis sizes. Throws ModelError at its line for an empty or duplicate
/// axis name, a size outside [1, 2^20] or a product of sizes above 2^20 (kMaxMeshRanks).
class Mesh {
 public:
  Mesh(std::initializer_list<std::pair<std::string, int64_t>> axes,
       std::source_location loc = std::source_location::current());
  Mesh(std::vector<std::pair<std::string, int64_t>> axes, PlanSite site);
  const std::vector<std::pair<std::string, int64_t>>& axes() const { return axes_; }
  /// The size of `axis`, or 0 if the mesh has no such axis.
  int64_t size(const std::string& axis) const;
  /// Total ranks: the product of the axis sizes.
  int64_t size() const;
  const PlanSite& site() const { return site_; }

 private:
  std::vector<std::pair<std::string, int64_t>> axes_;
  PlanSite site_;
};

/// With gradient accumulation under fully_shard at ZeRO stage 2 or 3: when gradients are
/// reduce-scattered.
enum class FsdpReduceScatter {
  /// Every microstep reduce-scatters its gradient and accumulates the block (FSDP2's
  /// default): a rank holds 1 / N of each gradient between microsteps, for memory.
  EveryMicrostep,
  /// Each rank accumulates its whole local gradient over the microsteps and reduce-scatters
  /// it once per step: k times fewer reduce-scatters, a whole gradient's memory per rank.
  LastMicrostep,
};

/// "every-microstep" or "last-microstep" (the --fsdp-reduce-scatter spelling).
const char* fsdpReduceScatterName(FsdpReduceScatter mode);

/// Globs over module paths (FullyShardConfig::unit): one glob converts implicitly, several
/// are a braced list, e.g. .unit = "blocks.*" or .unit = {"blocks.*", "wte"}.
struct UnitGlobs {
  UnitGlobs() = default;
  UnitGlobs(const char* glob) : globs{glob} {}                            // NOLINT: implicit on purpose
  UnitGlobs(std::string glob) : globs{std::move(glob)} {}                 // NOLINT
  UnitGlobs(std::initializer_list<std::string> list) : globs(list) {}     // NOLINT
  std::vector<std::string> globs;
};

/// Plan::fully_shard's options (FSDP / ZeRO over one mesh axis). Fields in this order, so
/// that designated initializers list them so: stage, unit, min_unit_params,
/// reshard_after_forward, prefetch, reduce_scatter.
struct FullyShardConfig {
  /// The ZeRO stage, per parameter along dimension 0 over the axis (names and
  /// --export-params unchanged):
  /// - 3 (the default) stores parameters, gradients and optimizer state sharded; each
  ///   parameter is all-gathered before its use and its gradient reduce-scattered;
  /// - 2 keeps parameters replicated; each gradient is reduce-scattered into the rank's
  ///   block, the rank updates its block of the parameter with its block of the optimizer
  ///   state, and the updated blocks are all-gathered;
  /// - 1 as 2, but gradients are all-reduced whole (as in plain data parallelism) and each
  ///   rank slices its block of the gradient.
  /// Other values are a ModelError at the fully_shard call.
  int stage = 3;
  /// The FSDP units, the all-gather granularity: globs over module paths (glob_matches),
  /// each standing for the outermost modules it matches ("blocks.*": every block; a
  /// parameter in nested units belongs to the innermost, compiler/FsdpUnits.h). A unit's
  /// parameters are all-gathered together right before its first use in the forward pass
  /// and freed together after its last; again before its first use in the backward pass.
  /// Parameters in no unit (the embeddings, the final norm) form the root unit, gathered
  /// once per step and kept until the backward pass is done with them (FSDP2 does not
  /// reshard its root after forward). A parameter (a tied one too) is in exactly one unit.
  /// Empty, without min_unit_params: every parameter is its own unit, gathered right
  /// before its own use (and again before its own backward use when that reads it).
  UnitGlobs unit;
  /// Size-based units instead of globs (the size-based auto-wrap policy): visiting modules
  /// innermost first, each module whose parameters not already in a unit inside it number
  /// at least this many elements becomes a unit. Must be >= 1; not with `unit`.
  std::optional<int64_t> min_unit_params;
  /// Free each gathered parameter after the forward pass and gather it again in the
  /// backward pass (FSDP2's default, for memory); false keeps the forward pass's copy until
  /// the backward pass has read it (one all-gather per parameter per step instead of two).
  bool reshard_after_forward = true;
  /// With units: the next `prefetch` units' all-gathers start while a unit computes, in
  /// the forward and the backward pass, and are waited for right before the unit's use;
  /// at most prefetch + 1 units' gathers are in flight (FSDP2's implicit prefetch with
  /// limit_all_gathers). 0: each gather is synchronous at its unit's first use. >= 0.
  int prefetch = 1;
  /// With grad_accumulation at stage 2 or 3: reduce-scatter every microstep (the default) or
  /// once after the last (FsdpReduceScatter). Both compute the same step.
  FsdpReduceScatter reduce_scatter = FsdpReduceScatter::EveryMicrostep;
};

/// Where each part of a pipeline plan was given (Plan::pipeline): in the DSL every field is
/// the pipeline() call; from the command line, the flag of each setting ("--pp-schedule",
/// "--microbatches", "--pp-virtual-stages") and, for the layer ranges, "--pp-stages" with the
/// column of each range. `call` is where the pipeline axis comes from (the pp item of
/// --plan). A missing entry of `stages` falls back to `call`.
struct PipelineSites {
  PlanSite call, schedule, microbatches, virtualStages;
  std::vector<PlanSite> stages;
  /// Every setting at one site (a pipeline() call).
  static PipelineSites at(const PlanSite& site) { return {site, site, site, site, {}}; }
};

/// The layer ranges of --pp-stages: comma-separated `first-last` items, inclusive and
/// 0-based, e.g. "0-5,6-11"; also returns, in `sites` when given, each range's site ("flag",
/// line 1, the column where it starts). Throws ModelError ("<flag>:1:<column>: error: ...") for
/// an empty text or item, an item that is not two non-negative integers (at most 2^20)
/// joined by '-', first > last, and a range that does not start where the previous one ends
/// (overlapping, out of order or leaving a gap), or, for the first, at layer 0.
std::vector<std::pair<int64_t, int64_t>> parseLayerRanges(const std::string& text, const std::string& flag,
                                                          std::vector<PlanSite>* sites = nullptr);

/// A parallelism plan on a mesh. The default plan is one rank: the single-device program.
class Plan;
Plan parsePlan(const std::string& text, int64_t microsteps);

class Plan {
 public:
  Plan();
  explicit Plan(Mesh mesh, std::source_location loc = std::source_location::current());

  /// Data parallelism: split the global batch (the inputs' leading dimension) over `axis`;
  /// each rank holds a replica of every parameter, and gradients are averaged over the axis.
  /// Throws ModelError here if the mesh has no such axis.
  Plan& shard_batch(const std::string& axis,
                    std::source_location loc = std::source_location::current());
  /// Shards every parameter whose name matches `glob` (glob_matches): dimension d of the
  /// parameter is split over the mesh axes dims[d] (empty: replicated), e.g.
  /// shard("blocks.*.attn.qkv.weight", {"tp", {}}). Throws ModelError here for an empty glob,
  /// an axis the mesh does not have, or one axis used on two dimensions (a tensor is split
  /// over each axis at most once). What needs the parameters (a glob matching nothing, the
  /// rank, divisibility, conflicting entries) is checked when the model compiles
  /// (resolve_shardings).
  Plan& shard(const std::string& glob, std::vector<Axes> dims,
              std::source_location loc = std::source_location::current());
  /// Tensor parallelism: the compiler (tessel-tensor-parallel) applies Megatron-LM's layout
  /// over `axis` to every transformer block (column-parallel qkv and fc, row-parallel
  /// projections, heads split over the axis, a vocab-parallel embedding and cross-entropy).
  /// Throws ModelError here if the mesh has no such axis, or if tensor_parallel was already
  /// called with another axis (with a note at that call). The heads are checked against
  /// the axis when the model compiles.
  Plan& tensor_parallel(const std::string& axis,
                        std::source_location loc = std::source_location::current());
  /// Sequence parallelism (Megatron-LM's, over the tensor-parallel axis): the LayerNorm and
  /// residual regions are split along T. Needs tensor_parallel; without it the plan is a
  /// ModelError at this line (checked by check_world_size and when the model compiles, so
  /// the calls may come in any order).
  Plan& sequence_parallel(bool on, std::source_location loc = std::source_location::current());
  /// The same for a plan from the command line: `site` names the flag.
  Plan& sequence_parallel(bool on, PlanSite site);
  /// Activation checkpointing (remat, tessel-activation-checkpointing): the modules whose
  /// path matches `glob` (glob_matches, on module paths such as "blocks.3") free their
  /// activations after the forward pass and recompute them in the backward pass (`mode`).
  /// A glob matching nested modules ("blocks.*" also matches "blocks.3.ln1") checkpoints
  /// the outermost. Training is bitwise unchanged. Throws ModelError here for an empty glob
  /// or a mode other than an earlier entry's (one mode per plan, with a note there); when
  /// the model compiles (resolve_checkpoints), for a glob that matches no module or that
  /// names a parameter rather than a module. Recomputation never communicates: under
  /// tensor parallelism the all-reduced outputs of a block are kept.
  Plan& checkpoint(const std::string& glob, CheckpointMode mode = CheckpointMode::Full,
                   std::source_location loc = std::source_location::current());
  /// The same for a plan from the command line: `site` names the flag.
  Plan& checkpoint(const std::string& glob, CheckpointMode mode, PlanSite site);
  /// Fully sharded data parallelism (FSDP2-style ZeRO-3) over `axis`: the axis splits the
  /// global batch, as shard_batch does (together with a shard_batch axis: HSDP, replicated
  /// over that axis and sharded over this one), and every parameter of rank >= 1 is stored
  /// split on dimension 0 over it, per parameter (names, checkpoints and --export-params
  /// stay per parameter; stages 1 and 2 split only the optimizer state, and gradients, over
  /// it: FullyShardConfig). Throws ModelError here if the mesh has no such axis, if fully_shard
  /// was already called with another axis (with a note there), or for a stage other than 1,
  /// 2 or 3 ("ZeRO stage 4 does not exist"); at this line when the world or
  /// the model is checked, for `axis` also being the shard_batch or tensor_parallel axis.
  /// With tensor_parallel or shard(), a dimension 0 already split is stored split over both
  /// axes (tp major, fsdp minor). A first dimension the axis does not divide is padded at
  /// stage 3 (its shards hold ceil(rows / N) rows) and an error when the model compiles at
  /// stages 1 and 2, and under tensor parallelism, at the parameter's line.
  /// Units (FullyShardConfig): an empty glob, both `unit` and `min_unit_params`,
  /// min_unit_params < 1, a negative prefetch and units or prefetch at a stage other than 3
  /// are errors here; a unit glob that matches
  /// no module holding parameters (or names a parameter), and a min_unit_params that no
  /// module reaches, when the model compiles (resolve_fsdp_units), at this line.
  Plan& fully_shard(const std::string& axis, FullyShardConfig options = {},
                    std::source_location loc = std::source_location::current());
  /// The same for a plan from the command line: `site` names the flag.
  Plan& fully_shard(const std::string& axis, FullyShardConfig options, PlanSite site);
  /// Gradient all-reduce bucket capacity in MiB (default 25, as torch DDP's bucket_cap_mb);
  /// must be > 0 and finite.
  Plan& bucket_mb(double mb, std::source_location loc = std::source_location::current());
  /// Gradient accumulation: `microsteps` forward/backward passes of B / (dp * microsteps)
  /// rows per optimizer step, synchronising gradients only on the last (>= 1; default 1).
  Plan& grad_accumulation(int64_t microsteps,
                          std::source_location loc = std::source_location::current());
  /// Start each bucket's all-reduce during the backward pass (default true); false places
  /// all communication after it (exposed), for comparison.
  Plan& overlap(bool on, std::source_location loc = std::source_location::current());
  /// Pipeline parallelism over `axis`: the model's layers are cut into pp x v stages
  /// (chunks, PipelineConfig), each rank runs its own stages' part of the step, activations
  /// go forward and their gradients back by send/recv, and the global batch is split into
  /// `microbatches` (M >= 1) microbatches per grad_accumulation microstep that `schedule`
  /// (or config.schedule_file) orders. With grad_accumulation(K), one optimizer step runs
  /// K x M microbatches (all in one @train_step). The step computes what the single-device
  /// step does. Calling it again replaces the earlier settings. Throws ModelError here
  /// (PipelineSites for the command line) when the mesh has no such axis, for M < 1,
  /// virtual_stages < 1, Schedule::Interleaved with virtual_stages 1 (it needs >= 2), another
  /// built-in schedule with virtual_stages > 1, layer ranges that are not contiguous from
  /// layer 0 (parseLayerRanges' rules) or whose count is not pp x virtual_stages, and a
  /// schedule_file that cannot be read. The axis must be no other role's (shard_batch,
  /// tensor_parallel, fully_shard): checked with the world (check_world_size). The global
  /// batch is checked by check_batch; more stages than layers when the model compiles.
  Plan& pipeline(const std::string& axis, Schedule schedule, int64_t microbatches, PipelineConfig config = {},
                 std::source_location loc = std::source_location::current());
  /// The same with every error at `site` (a plan built from text).
  Plan& pipeline(const std::string& axis, Schedule schedule, int64_t microbatches, PipelineConfig config,
                 PlanSite site);
  /// The same for the trainer's flags: each error at the site of the setting that causes it.
  Plan& pipeline(const std::string& axis, Schedule schedule, int64_t microbatches, PipelineConfig config,
                 PipelineSites sites);

  const Mesh& mesh() const { return mesh_; }
  /// Ranks the batch is split over: the product of the batch_axes() sizes (1 without
  /// shard_batch and fully_shard).
  int64_t dp() const;
  /// The shard_batch axis, or without one the fully_shard axis ("" without either).
  const std::string& batch_axis() const { return batchAxis_.empty() ? fullyShardAxis_ : batchAxis_; }
  /// Every axis the global batch is split over, in mesh order (outermost first): the
  /// shard_batch axis and the fully_shard axis.
  std::vector<std::string> batch_axes() const;
  /// The fully_shard axis ("" without it), where it was called, and its options
  /// (FullyShardConfig: the ZeRO stage, reshard_after_forward, reduce_scatter).
  const std::string& fully_shard_axis() const { return fullyShardAxis_; }
  const PlanSite& fully_shard_site() const { return fullyShardSite_; }
  int zero_stage() const { return zeroStage_; }
  bool reshard_after_forward() const { return reshardAfterForward_; }
  FsdpReduceScatter fsdp_reduce_scatter() const { return reduceScatter_; }
  /// The fully_shard units as given: the globs (empty without), the size threshold (0
  /// without) and the prefetch depth.
  const std::vector<std::string>& fsdp_unit_globs() const { return fsdpUnitGlobs_; }
  int64_t fsdp_min_unit_params() const { return fsdpMinUnitParams_; }
  int fsdp_prefetch() const { return fsdpPrefetch_; }
  /// The axis of tensor_parallel ("" without it), where it was called, and its size (1
  /// without it).
  const std::string& tensor_parallel_axis() const { return tensorParallelAxis_; }
  const PlanSite& tensor_parallel_site() const { return tensorParallelSite_; }
  int64_t tp() const;
  bool sequence_parallel() const { return sequenceParallel_; }
  /// Where sequence_parallel was called (for a --sequence-parallel flag, that flag).
  const PlanSite& sequence_parallel_site() const { return sequenceParallelSite_; }
  /// The shard() entries in call order.
  const std::vector<ShardEntry>& shards() const { return shards_; }
  /// The checkpoint() entries in call order (all of one mode).
  const std::vector<CheckpointEntry>& checkpoints() const { return checkpoints_; }
  double bucket_mb() const { return bucketMb_; }
  int64_t microsteps() const { return microsteps_; }
  bool overlap() const { return overlap_; }
  /// The pipeline's stages along its axis: the size of pipeline_axis() (1 without pipeline()).
  int64_t pp() const;
  /// The axis of pipeline() ("" without it).
  const std::string& pipeline_axis() const { return pipelineAxis_; }
  /// The schedule as the pipeline spells it: "gpipe", "1f1b", "interleaved" or "zero-bubble"
  /// (scheduleName), or the path of the CSV file (PipelineConfig::schedule_file).
  std::string pipeline_schedule() const;
  /// M: microbatches per grad_accumulation microstep, as given to pipeline() (1 without it).
  int64_t pipeline_microbatches() const { return pipelineMicrobatches_; }
  /// M_eff = M x microsteps(): the microbatches one optimizer step (one @train_step) runs, each
  /// B / (dp() x M_eff) rows; 0 for a plan that is not pipelined (pp() == 1).
  int64_t pipeline_microbatches_per_step() const;
  /// Chunks per rank, v (1 without pipeline()).
  int64_t pipeline_virtual_stages() const { return pipelineVirtualStages_; }
  /// The chunks' layer ranges, inclusive (empty: balanced by the compiler).
  const std::vector<std::pair<int64_t, int64_t>>& pipeline_layer_ranges() const { return pipelineLayerRanges_; }
  /// Where pipeline() was called (for --plan, the pp item's column).
  const PlanSite& pipeline_site() const { return pipelineSites_.call; }
  /// Whether the compiler needs the plan's mesh as a grid in the IR (and its shardings on
  /// the parameters): the plan is more than data parallelism, i.e. an axis other than the
  /// batch axis has more than one rank, or a shard() entry splits over an axis of more than
  /// one rank. Axes of one rank change nothing: dp=2,tp=1 compiles as dp=2, whose 1-D grid
  /// tessel-gradient-all-reduce makes (so data-parallel programs stay as they were).
  bool needs_grid() const;

  /// Startup checks against the job: the mesh size must equal `worldSize` (else ModelError
  /// at the mesh's line, naming every axis, pp included); an axis of more than one rank that
  /// no part of the plan uses (shard_batch, fully_shard, tensor_parallel, shard, pipeline)
  /// is refused at the mesh's line (a pp axis without pipeline(): saying to call it);
  /// sequence_parallel without tensor_parallel, tensor_parallel over the batch axis, and a
  /// pipeline axis that is also the batch, tensor-parallel or fully sharded axis, at their
  /// lines.
  void check_world_size(int64_t worldSize) const;
  /// The global batch must be divisible by dp() * microsteps() (ModelError at the line of
  /// shard_batch, or of grad_accumulation when it is the microsteps that do not divide), and
  /// when pipelined by dp() x M x microsteps() (at the pipeline() line; --microbatches).
  void check_batch(int64_t globalBatch) const;
  /// Matches the shard() entries against the model's parameters (name and shape, in
  /// declaration order) and returns the sharding of every matched parameter, in that order.
  /// Throws ModelError at the entry's line for a glob that matches no parameter, a parameter
  /// whose rank is not the entry's number of dimensions, a dimension that its axes' product
  /// does not divide (tensor_parallel pads what it splits; shard() does not), and two entries that give one
  /// parameter different shardings (at the later entry, with a note at the earlier one).
  /// Also runs the checks of check_world_size that do not need the world size.
  std::vector<ParameterSharding> resolve_shardings(
      const std::vector<std::pair<std::string, std::vector<int64_t>>>& parameters) const;
  /// Matches the checkpoint() entries against the model's module paths (every Module's
  /// path(), in construction order) and parameter names. Throws ModelError at the entry's
  /// line for a glob that matches no module: naming the parameter when it matches one
  /// ("names parameter 'blocks.0.mlp.fc.weight', not a module"), else with an example of
  /// the module paths.
  void resolve_checkpoints(const std::vector<std::string>& modules,
                           const std::vector<std::string>& parameters) const;
  /// The FSDP units of the model as module paths (compiler/FsdpUnits.h: each a glob that
  /// matches only itself), from the fully_shard `unit` globs (the outermost modules each
  /// matches, among the modules that hold parameters) or `min_unit_params`; empty when
  /// fully_shard gives neither. `modules`: every Module's path(); `parameters`: (name,
  /// element count), in declaration order. Throws ModelError at the fully_shard line for a
  /// glob that matches no module holding a parameter (naming the parameter when it matches
  /// one: "names parameter 'blocks.0.mlp.fc.weight', not a module") and for a
  /// min_unit_params that no module reaches (giving the model's total).
  std::vector<std::string> resolve_fsdp_units(const std::vector<std::string>& modules,
                                              const std::vector<std::pair<std::string, int64_t>>& parameters) const;
  /// The model's layers for the pipeline: the transformer blocks, the module paths
  /// "blocks.<i>" among `modules` (every Module's path()); returns their count L (0 for a model
  /// without blocks, which is not checked). Throws ModelError at the pipeline() line (for
  /// --plan, its pp item) when pipelined (pp() > 1) with more stages than layers (pp x
  /// virtual stages > L) or layer ranges that do not end at the last layer (L - 1), and at
  /// the checkpoint() line when pipelined with activation checkpointing (not supported yet).
  int64_t resolve_pipeline_layers(const std::vector<std::string>& modules) const;
  /// "dp=4" / "dp=2 microsteps=2 bucket_mb=25 overlap=on" / "dp=2,tp=2 tensor_parallel=tp
  /// sequence_parallel=on shard(blocks.*.mlp.fc.weight,[[tp],[]]) bucket_mb=25 overlap=on"
  /// (for logs and --explain).
  std::string describe() const;

 private:
  friend Plan parsePlan(const std::string& text, int64_t microsteps);
  /// The checks that need neither the world nor the parameters (see check_world_size).
  void checkCombination() const;
  /// fully_shard's unit options against the rules of FullyShardConfig (dsl/PlanUnits.cpp).
  static void checkFsdpUnits(const std::string& axis, const FullyShardConfig& options, const PlanSite& site);
  /// " unit=blocks.* prefetch=1" (describe; "" without units).
  std::string describeFsdpUnits() const;
  /// " pipeline pp=2 (1f1b, 8 microbatches)" (describe; "" when not pipelined).
  std::string describePipeline() const;
  /// The pipeline axis must have no other role (checkCombination; dsl/PlanPipeline.cpp).
  void checkPipelineAxes() const;
  Mesh mesh_;
  PlanSite site_, batchSite_, accumulationSite_, tensorParallelSite_, sequenceParallelSite_;
  std::string batchAxis_, tensorParallelAxis_, fullyShardAxis_;
  PlanSite fullyShardSite_;
  int zeroStage_ = 3;
  bool reshardAfterForward_ = true;
  FsdpReduceScatter reduceScatter_ = FsdpReduceScatter::EveryMicrostep;
  std::vector<std::string> fsdpUnitGlobs_;
  int64_t fsdpMinUnitParams_ = 0;
  int fsdpPrefetch_ = 1;
  bool sequenceParallel_ = false;
  std::vector<ShardEntry> shards_;
  std::vector<CheckpointEntry> checkpoints_;
  std::string pipelineAxis_;
  Schedule pipelineSchedule_ = Schedule::OneFOneB;
  std::string pipelineScheduleFile_;
  int64_t pipelineMicrobatches_ = 1;
  int64_t pipelineVirtualStages_ = 1;
  std::vector<std::pair<int64_t, int64_t>> pipelineLayerRanges_;
  PipelineSites pipelineSites_;
  double bucketMb_ = 25.0;
  int64_t microsteps_ = 1;
  bool overlap_ = true;
};

/// The plan of the trainer's --plan flag: comma-separated `axis=size` items, e.g. "dp=4",
/// "tp=2" or "dp=2,tp=2"; the mesh has those axes in the order given (the rank layout,
/// outermost first; the default and recommended order is pp outermost and tp innermost,
/// pp=2,dp=2,tp=2, so that tp groups are neighbouring ranks). A dp axis means
/// shard_batch("dp"), a tp axis tensor_parallel("tp") and an fsdp axis fully_shard("fsdp")
/// (stage 3; dp=2,fsdp=2 is HSDP), each at its item's column. Throws
/// ModelError ("--plan:1:<column>: error: ...") for malformed items, duplicate axes, sizes
/// < 1 and unknown axis names (dp, tp, fsdp, pp are known). A pp axis means
/// pipeline("pp", Schedule::OneFOneB, <its size>) at its item's column (the trainer's
/// --pp-schedule, --microbatches, --pp-virtual-stages and --pp-stages then replace these
/// defaults: dsl/trainer/Flags.h). `microsteps` (>= 1, the --grad-accumulation flag) is the
/// plan's grad_accumulation.
Plan parsePlan(const std::string& text, int64_t microsteps = 1);

}  // namespace tessel
