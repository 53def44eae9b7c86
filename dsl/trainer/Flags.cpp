// The trainer front end; see Flags.h.
#include "dsl/trainer/Flags.h"

#include "runtime/Init.h"
#include "runtime/comm/Communicator.h"  // kMaxTimeoutSeconds
#include "runtime/cuda/Driver.h"
#include "runtime/train/LastValueWins.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace tessel::trainer {

namespace {
/// A size flag: an integer in [min, max] (runtime/train/FlagChecks.h), so no value wraps or
/// saturates silently.
CLI::Option* sizeFlag(CLI::App& app, const char* name, int64_t& value, const std::string& help,
                      int64_t max, int64_t min = 1) {
  return app.add_option(name, value, help)->capture_default_str()->check(integerIn(min, max));
}
}  // namespace


void addCommonFlags(CLI::App& app, Flags& f, const std::string& defaultData,
                    const std::string& dataHelp, int64_t minSteps, const std::string& stepsHelp) {
  f.data = defaultData;
  app.add_option("--data", f.data, dataHelp)->capture_default_str()->check(nonEmpty("file or folder"));
  app.add_option("--dump-ir", f.dumpIr, "write the IR after every pipeline stage into this folder")
      ->type_name("DIR")->check(nonEmpty("folder"));
  app.add_option("--seed", f.seed, "seed of parameter init and batch sampling")
      ->capture_default_str()->check(integerIn(0, int64_t{1} << 62));
  sizeFlag(app, "--steps", f.steps, stepsHelp, int64_t{1} << 40, minSteps);
  app.add_option("--device", f.device, "where to run: cpu, cuda, or auto (a GPU when usable)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--attention", f.attention,
                 "how causal attention runs: fused (one kernel per batch row and head, nothing T x T "
                 "kept), decomposed (matmuls and a softmax: the T x T probabilities are kept for the "
                 "backward), or auto: fused on the CPU, decomposed for CUDA (its fused kernel is checked "
                 "on the SIMT harness but not yet timed on a GPU)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "fused", "decomposed"}));
  app.add_option("--precision", f.precision,
                 "f32, or bf16: mixed precision with bf16 activations and f32 master weights, "
                 "optimizer state and loss")
      ->capture_default_str()->check(CLI::IsMember({"f32", "bf16"}));
  sizeFlag(app, "--batch", f.batch, "global batch size B", int64_t{1} << 24);
  app.add_option("--plan", f.plan, "parallelism plan: the mesh's axes, outermost first, e.g. dp=2,tp=2 (dp: data "
                                   "parallelism, tp: Megatron tensor parallelism, fsdp: fully sharded data "
                                   "parallelism, ZeRO-3, any degree: an uneven first dimension is padded; "
                                   "dp=2,fsdp=2 is HSDP; fsdp=2,tp=2 stores each tp block split again over "
                                   "fsdp, tp major, fsdp minor; pp: pipeline parallelism, each rank runs one "
                                   "stage of the layers, see --pp-schedule). The recommended order puts pp "
                                   "outermost and tp innermost, so tp ranks are neighbours, e.g. pp=2,dp=2,tp=2")
      ->capture_default_str();
  app.add_option("--zero-stage", f.zeroStage,
                 "ZeRO stage of the plan's fsdp axis, per parameter along dimension 0: 3 (default) shards "
                 "parameters, gradients and optimizer state; 2 keeps parameters replicated and shards gradients "
                 "(reduce-scattered) and optimizer state, each rank updating its block and all-gathering the "
                 "parameter; 1 shards only the optimizer state (gradients all-reduced)")
      ->check(integerIn(1, 3));
  app.add_option("--fsdp-reduce-scatter", f.fsdpReduceScatter,
                 "with --grad-accumulation at ZeRO stage 2 or 3: every-microstep (default, FSDP2's: reduce-scatter "
                 "each microstep's gradient and accumulate the block, for memory) or last-microstep (accumulate the "
                 "whole local gradient and reduce-scatter once per step)")
      ->check(CLI::IsMember({"every-microstep", "last-microstep"}));
  app.add_flag("--reshard-after-forward,!--no-reshard-after-forward", f.reshardAfterForward,
               "with an fsdp axis: gather each parameter again in the backward pass (default on); off keeps the "
               "forward pass's gathered copy until backward (less communication, more memory)");
  app.add_option("--fsdp-unit", f.fsdpUnit,
                 "with an fsdp axis: the FSDP units, comma-separated globs over module paths (each unit's "
                 "parameters are all-gathered together; the rest form the root unit, gathered once per step); "
                 "default blocks.* for transformers")
      ->type_name("GLOB[,GLOB...]");
  app.add_option("--fsdp-min-unit-params", f.fsdpMinUnitParams,
                 "with an fsdp axis: size-based FSDP units instead of --fsdp-unit: each smallest module holding "
                 "at least N parameter elements not already in a unit")
      ->type_name("N");
  app.add_option("--fsdp-prefetch", f.fsdpPrefetch,
                 "with an fsdp axis: start the all-gathers of the next N units while a unit computes, in forward "
                 "and backward (at most N + 1 units' gathers in flight; 0: off)")
      ->capture_default_str()->check(integerIn(0, int64_t{1} << 20));
  app.add_option("--pp-schedule", f.ppSchedule,
                 "with a pp axis: the pipeline schedule, gpipe, 1f1b (default; the standard one: stage s warms up with "
                 "p - s - 1 forwards and holds at most p - s microbatches), interleaved (Megatron-LM's, needs "
                 "--pp-virtual-stages >= 2), zero-bubble (ZB-H1), or a CSV file of actions per rank (PyTorch's "
                 "pipelining vocabulary: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B)")
      ->type_name("SCHEDULE|FILE.csv")->check(nonEmpty("schedule or file"));
  app.add_option("--microbatches", f.microbatches,
                 "with a pp axis: microbatches M one training step pipelines (with --grad-accumulation K: K x M per "
                 "optimizer step, all in one step), each B / (dp x M x K) rows (default: the pp size)")
      ->check(integerIn(1, int64_t{1} << 20));
  sizeFlag(app, "--pp-virtual-stages", f.ppVirtualStages,
           "with a pp axis: chunks of layers per rank (the interleaved schedule's virtual stages)", 4096);
  app.add_option("--pp-stages", f.ppStages,
                 "with a pp axis: the layer ranges of the stages, inclusive and in order, one per stage (pp x "
                 "virtual stages of them), e.g. 0-5,6-11 (default: balanced by the cost model)")
      ->type_name("FIRST-LAST[,...]")->check(nonEmpty("layer ranges"));
  app.add_flag("--sequence-parallel", f.sequenceParallel,
               "sequence parallelism: split the LayerNorm and residual regions along T over tp (needs a tp axis)");
  sizeFlag(app, "--grad-accumulation", f.microsteps, "microsteps per optimizer step (gradient accumulation)",
           int64_t{1} << 20);
  app.add_option("--bucket-mb", f.bucketMb, "gradient all-reduce bucket capacity in MiB")
      ->capture_default_str()->check(positiveNumber());
  app.add_flag("--overlap,!--no-overlap", f.overlap,
               "start each bucket's all-reduce during the backward pass (default on)");
  app.add_option("--activation-checkpointing", f.activationCheckpointing,
                 "recompute activations in the backward pass instead of keeping them: full (each transformer "
                 "block's forward, keeping its input) or selective (core attention only: the T x T scores, "
                 "softmax and product with V)")
      ->check(CLI::IsMember({"full", "selective"}));
  app.add_flag("--explain", f.explain,
               "print the plan: buckets (parameters, bytes), where each collective starts and waits, and the "
               "bytes each rank sends per step");
  app.add_option("--device-memory", f.deviceMemory,
                 "memory of one device, e.g. 80GiB or 500MB (B, KB, MB, GB, TB: powers of 10^3; KiB, MiB, GiB, "
                 "TiB: of 2^10): refuse, before any rank allocates, a plan whose compiled program needs more on "
                 "some rank (every byte the executor allocates: runtime/exec/MemoryBreakdown.h)")
      ->check(memorySize());
  app.add_flag("--memory-json", f.memoryJson,
               "only compile, in one plain process, for any --plan: print the compiled program's memory per rank "
               "(parameters, gradients, optimizer state, inputs, arena and its contents at its peak) as one JSON "
               "object, allocating no parameter; what `tessel memory --model` runs");
  addCommFlags(app, f.checkSchedule, f.checkReplicas, f.commTimeout);
}

/// The FSDP unit flags into `plan`'s fully_shard (see planFromFlags).
static void fsdpUnitsFromFlags(const Flags& f, Plan& plan) {
  const bool minGiven = f.fsdpMinUnitParams != Flags::kNotGiven;
  const bool given = !f.fsdpUnit.empty() || minGiven || f.fsdpPrefetch != 1;
  if (!given && (!f.transformer || plan.fully_shard_axis().empty() || plan.zero_stage() != 3)) return;
  PlanSite site = !f.fsdpUnit.empty() ? PlanSite{"--fsdp-unit", 1, 1}
                  : minGiven          ? PlanSite{"--fsdp-min-unit-params", 1, 1}
                  : f.fsdpPrefetch != 1 ? PlanSite{"--fsdp-prefetch", 1, 1}
                                        : plan.fully_shard_site();
  if (plan.fully_shard_axis().empty())
    throw ModelError(Diagnostic{site.file, site.line, site.column, "",
                                fmt::format("{} needs an fsdp axis in --plan (e.g. --plan fsdp=4)", site.file)});
  FullyShardConfig config{.stage = plan.zero_stage(),
                          .reshard_after_forward = plan.reshard_after_forward(),
                          .prefetch = static_cast<int>(f.fsdpPrefetch),  // in [0, 2^20]: the flag's check
                          .reduce_scatter = plan.fsdp_reduce_scatter()};
  if (minGiven) config.min_unit_params = f.fsdpMinUnitParams;
  for (size_t at = 0; at < f.fsdpUnit.size();) {
    size_t comma = std::min(f.fsdpUnit.find(',', at), f.fsdpUnit.size());
    config.unit.globs.push_back(f.fsdpUnit.substr(at, comma - at));
    at = comma + 1;
    if (comma + 1 == f.fsdpUnit.size()) config.unit.globs.push_back("");  // a trailing comma: an empty glob
  }
  if (config.unit.globs.empty() && !minGiven && f.transformer) config.unit = "blocks.*";
  plan.fully_shard(plan.fully_shard_axis(), config, site);
}

/// The pipeline flags into `plan`'s pipeline (see planFromFlags).
static void pipelineFromFlags(const Flags& f, Plan& plan) {
  const bool microbatchesGiven = f.microbatches != Flags::kNotGiven;
  if (plan.pipeline_axis().empty()) {
    const char* flag = !f.ppSchedule.empty()     ? "--pp-schedule"
                       : microbatchesGiven       ? "--microbatches"
                       : f.ppVirtualStages != 1  ? "--pp-virtual-stages"
                       : !f.ppStages.empty()     ? "--pp-stages"
                                                 : nullptr;
    if (flag)
      throw ModelError(Diagnostic{flag, 1, 1, "", fmt::format("{} needs a pp axis in --plan (e.g. --plan pp=2)",
                                                              flag)});
    return;
  }
  PipelineSites sites{plan.pipeline_site(), {"--pp-schedule", 1, 1}, {"--microbatches", 1, 1},
                      {"--pp-virtual-stages", 1, 1}, {}};
  PipelineConfig config{.virtual_stages = f.ppVirtualStages};
  if (!f.ppStages.empty()) config.stages = parseLayerRanges(f.ppStages, "--pp-stages", &sites.stages);
  Schedule schedule = Schedule::OneFOneB;
  if (auto named = scheduleNamed(f.ppSchedule))
    schedule = *named;
  else if (!f.ppSchedule.empty())
    config.schedule_file = f.ppSchedule;
  plan.pipeline(plan.pipeline_axis(), schedule, microbatchesGiven ? f.microbatches : plan.pp(), config, sites);
}

Plan planFromFlags(const Flags& f) {
  Plan plan = parsePlan(f.plan, f.microsteps);
  pipelineFromFlags(f, plan);
  plan.bucket_mb(f.bucketMb).overlap(f.overlap);
  if (f.zeroStage != 0 || !f.reshardAfterForward || !f.fsdpReduceScatter.empty()) {
    PlanSite site{f.zeroStage != 0          ? "--zero-stage"
                  : !f.reshardAfterForward ? "--no-reshard-after-forward"
                                           : "--fsdp-reduce-scatter",
                  1, 1};
    auto fail = [&](const std::string& message) {
      throw ModelError(Diagnostic{site.file, site.line, site.column, "", message});
    };
    if (plan.fully_shard_axis().empty())
      fail(fmt::format("{} needs an fsdp axis in --plan (e.g. --plan fsdp=4)", site.file));
    plan.fully_shard(plan.fully_shard_axis(),
                     {.stage = f.zeroStage != 0 ? static_cast<int>(f.zeroStage) : plan.zero_stage(),
                      .reshard_after_forward = f.reshardAfterForward,
                      .reduce_scatter = f.fsdpReduceScatter == "last-microstep" ? FsdpReduceScatter::LastMicrostep
                                                                                : FsdpReduceScatter::EveryMicrostep},
                     site);
  }
  fsdpUnitsFromFlags(f, plan);
  if (f.sequenceParallel) plan.sequence_parallel(true, PlanSite{"--sequence-parallel", 1, 1});
  if (!f.activationCheckpointing.empty())
    plan.checkpoint("blocks.*", f.activationCheckpointing == "full" ? CheckpointMode::Full : CheckpointMode::Selective,
                    PlanSite{"--activation-checkpointing", 1, 1});
  return plan;
}

void addTransformerFlags(CLI::App& app, Flags& f) {
  f.transformer = true;
  sizeFlag(app, "--layers", f.layers, "transformer blocks L", 4096);
  sizeFlag(app, "--channels", f.channels, "channels C", int64_t{1} << 16);
  sizeFlag(app, "--heads", f.heads, "attention heads NH (C must be divisible by NH)", 4096);
  sizeFlag(app, "--seq", f.seq, "sequence length T", int64_t{1} << 20);
}

std::map<std::string, ref::Tensor> initParameters(const Program& program, uint64_t seed) {
  std::map<std::string, ref::Tensor> params;
  for (const ParameterSpec& p : program.parameters()) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    InitKind kind = p.init == Init::Normal  ? InitKind::Normal
                    : p.init == Init::Zeros ? InitKind::Zeros
                                            : InitKind::Ones;
    std::vector<float> values = initParameter(n, kind, p.std, seed, p.name);
    params.emplace(p.name, ref::Tensor(p.shape, std::vector<double>(values.begin(), values.end())));
  }
  return params;
}

std::string resolveDeviceFlag(const Flags& flags, const std::string& program, bool cudaReady) {
  std::string device = rt::resolveDevice(flags.device, cudaReady);
  const rt::CudaDriverStatus& s = rt::probeCudaDriver();
  if (flags.device == "auto" && s.loaded && s.devices > 0)
    fmt::print("{}: {} GPU(s) found; running on the {}\n", program, s.devices,
               device == "cuda" ? "GPU" : "CPU (this example has no GPU path)");
  return device;
}

int64_t parameterCount(const Program& program) {
  int64_t total = 0;
  for (const ParameterSpec& p : program.parameters()) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    total += n;
  }
  return total;
}

int runMain(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  lastValueWins(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return runGuarded(app.get_name(), [&] {
    try {
      return body();
    } catch (const ModelError& e) {  // already "file:line:col: error: ..."
      reportError(e.what());
      return 1;
    }
  });
}

}  // namespace tessel::trainer
