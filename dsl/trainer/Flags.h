// The trainer front end shared by the example binaries: standard flags (CLI11), data,
// parameter initialisation, and the IR dump. Example mains stay a few lines long.
#pragma once

#include "dsl/tessel.h"
#include "runtime/train/Loop.h"  // TrainOptions, addTrainFlags and the flag checks
#include "runtime/train/Ranks.h"  // checkSameCommandLine, requireWorldSize, runGuarded
#include "runtime/train/TextBatches.h"  // microbatchRows, the text feeders

#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace tessel::trainer {

/// The standard flags. Model-size flags are registered only by the examples that use them.
struct Flags {
  std::string data;        // --data FILE (or folder: every text file in it, concatenated)
  std::string dumpIr;      // --dump-ir DIR: one NN-<stage>.mlir per pipeline stage
  uint64_t seed = 1337;    // --seed: parameter init and batch sampling
  int64_t steps = 1;       // --steps N: training steps (or batches to evaluate)
  int64_t batch = 8;       // --batch B (global batch)
  int64_t layers = 2;      // --layers L
  int64_t channels = 64;   // --channels C
  int64_t heads = 4;       // --heads NH
  int64_t seq = 64;        // --seq T
  std::string device = "auto";  // --device cpu|cuda|auto
  std::string precision = "f32";  // --precision f32|bf16 (CompileOptions::precision)
  std::string attention = "auto";  // --attention auto|fused|decomposed (CompileOptions::decompose_attention)
  std::string plan = "dp=1";    // --plan: the parallelism plan (dsl/Plan.h parsePlan)
  bool sequenceParallel = false;  // --sequence-parallel: the plan's sequence_parallel
  int64_t microsteps = 1;       // --grad-accumulation k: microsteps per optimizer step
  int64_t zeroStage = 0;        // --zero-stage 1|2|3: the fsdp axis's ZeRO stage (0: not given, 3)
  bool reshardAfterForward = true;  // --no-reshard-after-forward: keep gathered parameters for backward
  std::string fsdpReduceScatter;  // --fsdp-reduce-scatter every-microstep|last-microstep ("": not given)
  std::string fsdpUnit;         // --fsdp-unit GLOB[,GLOB...]: FSDP units ("": the default, see planFromFlags)
  int64_t fsdpMinUnitParams = kNotGiven;  // --fsdp-min-unit-params N: size-based FSDP units
  int64_t fsdpPrefetch = 1;     // --fsdp-prefetch N: units whose all-gathers start ahead (0: off)
  std::string ppSchedule;       // --pp-schedule gpipe|1f1b|interleaved|zero-bubble|FILE.csv ("": not given, 1f1b)
  int64_t microbatches = kNotGiven;  // --microbatches M per microstep (not given: the pp size)
  int64_t ppVirtualStages = 1;  // --pp-virtual-stages V: chunks of layers per rank
  std::string ppStages;         // --pp-stages 0-5,6-11: the chunks' layer ranges ("": balanced)
  bool transformer = false;     // set by addTransformerFlags: the model's blocks are "blocks.<i>"
  double bucketMb = 25.0;       // --bucket-mb: gradient all-reduce bucket capacity
  std::string activationCheckpointing;  // --activation-checkpointing full|selective ("": off)
  bool overlap = true;          // --no-overlap turns it off
  bool explain = false;         // --explain: print the plan's buckets and collectives
  std::string deviceMemory;     // --device-memory SIZE: refuse a plan whose ranks need more ("": no limit)
  bool memoryJson = false;      // --memory-json: only compile, print the memory per rank as JSON
  bool checkSchedule = false;   // --check-schedule: compare the ranks' collective schedules
  bool checkReplicas = false;   // --check-replicas: compare the ranks' parameters every step
  double commTimeout = 300.0;   // --comm-timeout: seconds before a collective fails

  /// The value of a size flag that was not given.
  static constexpr int64_t kNotGiven = INT64_MIN;

  /// --precision as the DSL's compile option.
  DType precisionType() const { return precision == "bf16" ? DType::BF16 : DType::F32; }
};

/// The Plan of --plan, --zero-stage (needs an fsdp axis, else an error at "--zero-stage:1:1"),
/// --no-reshard-after-forward and --fsdp-reduce-scatter (each needs an fsdp axis),
/// --fsdp-unit, --fsdp-min-unit-params and --fsdp-prefetch (need an fsdp axis; the units of
/// fully_shard, errors at the flag, e.g. "--fsdp-unit:1:1"; without either unit flag a
/// transformer's fsdp plan has one unit per block, "blocks.*", and other models one per
/// parameter), --sequence-parallel, --grad-accumulation, --bucket-mb, --no-overlap
/// and --activation-checkpointing (checkpoint("blocks.*", mode): every transformer block,
/// errors at "--activation-checkpointing:1:1"), and the pipeline of a pp axis: --pp-schedule
/// (a built-in schedule, else a CSV file), --microbatches (default: the pp size),
/// --pp-virtual-stages and --pp-stages (parseLayerRanges; errors at the flag and column,
/// e.g. "--pp-stages:1:5"); each needs a pp axis in --plan (else an error at the flag). With
/// --grad-accumulation K an optimizer step runs K x M microbatches.
/// Throws ModelError ("--plan:1:col: error: ...") for a malformed plan;
/// --sequence-parallel without a tp axis is refused ("--sequence-parallel:1:1: error: ...")
/// by Plan::check_world_size.
Plan planFromFlags(const Flags& flags);

/// Registers --data, --dump-ir, --seed, --steps, --device, --precision, --batch and the plan's
/// flags (--plan, ..., --explain, --device-memory, --memory-json) on `app`, with `defaultData`
/// as the default of --data, `dataHelp` as its description, and `minSteps` the smallest
/// --steps value (0 where the example gives 0 a meaning).
void addCommonFlags(CLI::App& app, Flags& flags, const std::string& defaultData,
                    const std::string& dataHelp, int64_t minSteps = 1,
                    const std::string& stepsHelp = "number of training steps");


/// Resolves --device (runtime/cuda/Driver.h): "cpu", "cuda" (only when `cudaReady`: the
/// example can train on the GPU executor), or an error naming why CUDA cannot be used.
/// Prints which device runs when "auto" had a choice to make.
std::string resolveDeviceFlag(const Flags& flags, const std::string& program, bool cudaReady = false);

/// Registers --layers, --channels, --heads and --seq.
void addTransformerFlags(CLI::App& app, Flags& flags);

/// Initialises every parameter of `program` with the runtime's deterministic initialiser
/// (runtime/Init.h) from `seed`. Values are rounded to f32 (the parameters' dtype) and held
/// as f64 for the reference interpreter.
std::map<std::string, ref::Tensor> initParameters(const Program& program, uint64_t seed);

/// Total element count of the program's parameters.
int64_t parameterCount(const Program& program);

/// Runs `body`, turning every error a user can cause (ModelError, data and I/O errors,
/// interpreter errors, CLI errors) into a message on stderr and exit code 1 (CLI11's own
/// codes for --help and flag errors). Returns the process exit code. A CommError ends the
/// process through rt::abortJob, without destructors: keep the rt::World outside `body`.
int runMain(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

}  // namespace tessel::trainer
