// The trainer application: what turns a model source into a training binary with every
// standard flag. A model gives a ModelRecipe (its config, how to compile it, where its
// batches come from, what to report afterwards); TrainerApp owns the rest:
//
//   1. the flags: Flags (addCommonFlags), TrainOptions (addTrainFlags) and RunFlags
//      (--threads, --profile, --emit-bundle, --cuda-arch, --cuda-graphs);
//   2. the world: a launcher's world of N ranks runs only a plan for N ranks, else every rank
//      refuses with one line (runtime/train/Ranks.h); the ranks check that they run the same
//      command line, then that they read the same data. --emit-bundle and --explain of a
//      plan for other than one rank only compile, in one plain process, for any plan;
//   3. the device: cpu, cuda or auto (rt::resolveDevice); ranks on GPUs bootstrap NCCL over
//      the MPI world, and one rank that cannot use its GPU makes every rank exit with the
//      reasons;
//   4. compiling (--plan, --grad-accumulation, --bucket-mb, --no-overlap, --precision,
//      --dump-ir, the pipeline's --pp-schedule, --microbatches, --pp-virtual-stages and
//      --pp-stages; each rank compiles its own pipeline stage), --explain (under a pipeline
//      also the predicted schedule per rank, ExplainPipeline.h; --trace then gets the
//      prediction as its own track), and --emit-bundle
//      (a bundle that records the plan, for `mpirun -np N tessel-run DIR`; refused for a
//      pipeline plan);
//   5. the CPU executor (generated C++ kernels) or the GPU executor (NVRTC cubin), the loop
//      (runtime/train/Loop.h) with --log-json, checkpoints and --resume
//      (runtime/train/Checkpointing.h; the feeders start at the resumed step), and rank 0's
//      communication, profile and memory report; then the model's own report (sampling,
//      accuracy) on rank 0.
//
// A model's main is its flags plus a few lines (examples/mlp/main.cpp):
//   tessel::trainer::TrainerApp trainer(app, flags, train, {.defaultPath = ..., .help = ...});
//   return trainer.run(argc, argv, [&] { return recipe; });
#pragma once

#include "dsl/tessel.h"
#include "dsl/trainer/ExplainPipeline.h"
#include "dsl/trainer/Flags.h"
#include "runtime/comm/World.h"
#include "runtime/train/Checkpointing.h"
#include "runtime/train/Loop.h"
#include "runtime/train/RankData.h"  // what a recipe's data function returns
#include "runtime/train/Ranks.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace tessel::rt {
class ProgramExecutor;
}

namespace tessel::trainer {

/// The --data flag and --steps of one model: its default data, its help text, and the
/// smallest --steps (0 where the model gives 0 a meaning, e.g. one epoch).
struct DataFlag {
  std::string defaultPath;
  std::string help;
  int64_t minSteps = 1;
  std::string stepsHelp = "number of training steps";
};

/// The flags TrainerApp adds besides Flags and TrainOptions.
struct RunFlags {
  int threads = 0;              // --threads: CPU threads (0: all cores)
  bool profile = false;         // --profile: time every step of @train_step
  bool gemmEpilogues = true;    // --no-gemm-epilogues: keep bias, GELU, residual out of the GEMMs
  std::string emitBundle;       // --emit-bundle DIR: only compile, into a bundle
  std::string cudaArch = "sm_90";  // --cuda-arch: the cubin's architecture
  bool graphs = false;          // --cuda-graphs: replay a captured training step
};

/// Which rows of the data this rank trains on: its rank of `world` data-parallel ranks and
/// the microbatches per step (the plan's microsteps, or under a pipeline its M_eff
/// microbatches of one @train_step), for a global batch of `batch` rows
/// (runtime/train/TextBatches.h microbatchRows), from `seed`. The ranks of one pipeline
/// (their pp coordinates differ) feed the same rows.
struct DataShard {
  int rank = 0, world = 1;
  int64_t batch = 1, microsteps = 1;
  uint64_t seed = 1337;
  /// Global batches already trained (a resumed run: the checkpoint's step): the feeders start
  /// at global batch firstStep (TextBatchOptions::firstStep).
  int64_t firstStep = 0;
};

/// What rank 0's report after training sees.
struct Trained {
  rt::ProgramExecutor& executor;  // the trained state (CPU or GPU)
  const Program& program;         // the compiled training program
  NativeOptions native;           // how to compile more programs alike (e.g. a sampler)
  int world = 1;
  /// Every parameter in its global shape (gathered from all ranks) when the trained program
  /// shards parameters (tensor parallelism), else null: its executor then holds only this
  /// rank's shards, and a report runs unsharded programs from these instead.
  const SafeTensorsFile* parameters = nullptr;
};

/// What a model gives the trainer. Made after the flags are parsed.
/// A closed form of the collective payload per rank per training step under a plan: the
/// formula as text and its value in bytes, for the all-reduces and the all-gathers.
struct CommunicationFormula {
  std::string allReduce, allGather;            // e.g. "((4 L + 2) B T C + 3 B T) x 4"
  int64_t allReduceBytes = 0, allGatherBytes = 0;
};

struct ModelRecipe {
  std::string model;       // bundle.json's "model", e.g. "gpt"
  nlohmann::json config;   // bundle.json's "config" (checked against the program by tessel-run)
  int64_t seq = 0;         // bundle.json's train_flags.seq (0 where the inputs have no sequence)
  std::string describe;    // e.g. "L=4 C=128 NH=4 T=64 B=16", in the header and the bundle message
  /// Builds the model on the global batch and compiles it with `options`.
  std::function<Program(const CompileOptions& options)> compile;
  /// Loads the data and makes this rank's feeders; may adjust `train` (e.g. --steps 0 means
  /// one epoch, or fewer validation batches for a small test set).
  std::function<RankData(const DataShard& shard, TrainOptions& train)> data;
  /// Optional: what rank 0 reports after training (sampling, accuracy).
  std::function<void(const Trained& trained)> report;
  /// Optional: the closed form of the collective payload under `plan`, which --explain prints
  /// beside the bytes counted from the compiled program (with their ratio); nullopt for a
  /// plan the recipe has no closed form for.
  std::function<std::optional<CommunicationFormula>(const Plan& plan)> communication;
};

/// The trainer application; see the file comment.
class TrainerApp {
 public:
  /// Registers every standard flag on `app`, writing into `flags` and `train` (their values
  /// before this call are the defaults shown by --help).
  TrainerApp(CLI::App& app, Flags& flags, TrainOptions& train, const DataFlag& data);

  /// Parses argv, then runs steps 2 to 5 of the file comment with the recipe `makeRecipe`
  /// returns. Returns the process exit code; every error a user can cause is one line on
  /// stderr and exit code 1 (runMain).
  int run(int argc, char** argv, const std::function<ModelRecipe()>& makeRecipe);


 private:
  /// Step 2 of the file comment: joins the world (world_) unless `compileOnly`, or refuses.
  void join(int argc, char** argv, const Plan& plan, bool compileOnly);
  int train(int argc, char** argv, const ModelRecipe& recipe);

  CLI::App& app_;
  Flags& flags_;
  TrainOptions& train_;
  RunFlags run_;
  CheckpointFlags checkpoints_;  // --checkpoint-dir, --resume, ... (runtime/train/Checkpointing.h)
  PipelineCostFlags ppCost_;  // the pipeline cost model's constants (--pp-gemm-gflops, ...)
  /// The launcher's world. It outlives runMain's error handlers, so every rank reports its
  /// error before the world's orderly shutdown (MPI_Finalize waits for every rank, and then
  /// the first rank to exit ends the job), and a failed collective ends the job there
  /// (rt::abortJob) without that shutdown, which would wait for failed peers.
  std::optional<rt::World> world_;
};

}  // namespace tessel::trainer
