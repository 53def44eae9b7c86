// Checkpoints and resuming for the training loop, shared by the JIT trainers (dsl/trainer:
// tessel-gpt, tessel-mlp) and tessel-run: the flags, the trainer state written into the index,
// resuming (the step first, then the state), and the save policy. MLIR-free; the saving and
// loading themselves are runtime/ckpt/Checkpoint.h's. docs/checkpoints.md is the user's guide.
//
// The order a trainer follows (every rank alike):
//   1. addCheckpointFlags, then checkCheckpointFlags once --steps is known;
//   2. findResumePoint before the feeders are made: every rank reads the index of the
//      checkpoint --resume names, refuses one saved by an incompatible run (trainer state:
//      complete, and model, config, global batch, seed and optimizer must match; plan, mesh,
//      world size and --steps may differ) and learns the step, which the feeders start after
//      (the sampler position is the step, so the data order equals the uninterrupted run's on
//      any dp degree); once the feeders are made, checkResumeData refuses other data;
//   3. once the executor holds its initialised parameters: a CheckpointSession (collective:
//      loads the checkpoint into the executor, makes the Checkpointer) and attach(), which sets
//      the loop's first step, its --stop-after step and the save after each step;
//   4. the loop (runtime/train/Loop.h), then finish(): waits for the save in flight.
//
// The save policy: a checkpoint after every step that is a multiple of --checkpoint-every,
// and one after the last step of the run (--steps) whenever --checkpoint-dir is given.
// --stop-after N ends the run after step N as if it were interrupted: the learning-rate
// schedule still spans --steps, and a checkpoint is written at N only when N is on the
// --checkpoint-every cadence (or N equals --steps). N may equal the resumed step: then no step
// runs and the loaded state is saved (on the cadence) and exported (--export-params) as it is.
#pragma once

#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/Index.h"
#include "runtime/comm/Communicator.h"
#include "runtime/exec/ProgramExecutor.h"
#include "runtime/train/Loop.h"
#include "runtime/train/Ranks.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::trainer {

/// The checkpoint flags (addCheckpointFlags). Defaults: no checkpoints, no resume.
struct CheckpointFlags {
  std::string dir;            // --checkpoint-dir: the checkpoint root ("": no checkpoints)
  int64_t every = 0;          // --checkpoint-every N (>= 1; 0: only at the end)
  bool async = false;         // --async-checkpoint
  int64_t keep = 0;           // --keep-checkpoints K (0: all)
  int64_t stopAfter = -1;     // --stop-after N (-1: not given; the run ends after --steps)
  std::string resume;         // --resume: a checkpoint folder or a root ("": start afresh)
  bool allowPartial = false;  // --allow-partial
  /// Not a flag of its own: how long rank 0 waits for the other ranks' markers before a
  /// commit fails (Checkpoint.h SaveOptions::timeoutSeconds); the trainers set it to
  /// --comm-timeout, the time any other wait for a peer may take.
  double commitTimeoutSeconds = 300;
};

/// Registers --checkpoint-dir, --checkpoint-every, --async-checkpoint, --keep-checkpoints,
/// --stop-after, --resume and --allow-partial (numbers range-checked with FlagChecks.h).
void addCheckpointFlags(CLI::App& app, CheckpointFlags& flags);

/// Refuses combinations that cannot mean what the user asked, with one line naming the flags:
/// --checkpoint-every, --async-checkpoint or --keep-checkpoints without --checkpoint-dir,
/// --allow-partial without --resume; and when `steps` is known (> 0): --stop-after beyond
/// `steps`, a resumed step (`resumedStep`, findResumePoint) beyond `steps` or after --stop-after.
/// Throws std::runtime_error.
void checkCheckpointFlags(const CheckpointFlags& flags, int64_t steps, int64_t resumedStep = 0);

/// What identifies a training run in the trainer state (the index's "trainer" object).
struct RunIdentity {
  std::string model;            // e.g. "gpt" (bundle.json's "model")
  nlohmann::json config;        // the model's configuration (bundle.json's "config")
  int64_t globalBatch = 0;      // rows per optimizer step, over all ranks
  uint64_t seed = 0;            // --seed: parameter init and the sampler
  std::string optimizer;        // "adamw" or "sgd"
  std::string precision;        // "f32" or "bf16"
  std::string plan;             // e.g. "dp=2,tp=2" (informative: may differ on resume)
  std::vector<std::pair<std::string, int64_t>> mesh;  // the plan's axes in order ({} for one rank)
  int worldSize = 1;
  /// The training data (RankData::fingerprint and ::where), known once the feeders are made:
  /// recorded so that a resumed run continues on the same data (checkResumeData).
  DataFingerprint data;
  std::string dataWhere;        // e.g. "'input.txt'" (the data as given)
};

/// The trainer state of checkpoint `step` of a run (docs/checkpoints.md): {"step", "steps",
/// "seed", "sampler": {"global_batches_consumed", "global_batch"}, "lr_schedule": {"lr",
/// "warmup", "schedule", "min_lr_ratio", "steps"}, "rng", "plan", "mesh", "world_size", "model",
/// "config", "optimizer", "precision", "data": {"where", "fingerprint" (FNV-1a, 16 hex digits),
/// "bytes"}}. Implemented in TrainerState.cpp.
nlohmann::json trainerState(const RunIdentity& run, const TrainOptions& options, int64_t step);

/// Whether checkpoint `index` holds weights only (`tessel ckpt import`): "optimizer_state"
/// false and a trainer state of no more than "step" and "imported_from". Such a checkpoint
/// seeds a run and is not compared with it; any other trainer state must be complete.
bool isWeightsOnly(const ckpt::Index& index);

/// The first field of trainer state `saved` (of a checkpoint of step `step`) that trainerState
/// writes but `saved` lacks or holds with the wrong type or range, as one clause naming it,
/// e.g. "lacks "sampler.global_batch"" or "has "world_size" 0, not an integer >= 1";
/// "" for a complete state. Checks the fields' relations too: "step" equals `step` and the
/// sampler position, "steps" >= "step", the mesh's axis sizes multiply to "world_size", "plan"
/// begins with the mesh's axes, the rng seeds equal "seed".
std::string trainerStateProblem(const nlohmann::json& saved, int64_t step);

/// Throws std::runtime_error naming the checkpoint folder, the field and both values unless the
/// saved trainer state `saved` (of checkpoint step `step`) belongs to a run this one may
/// continue. Unless `weightsOnly` (isWeightsOnly: nothing recorded to compare), the state must
/// be complete (trainerStateProblem: "--resume 'DIR': the checkpoint's trainer state lacks
/// "seed" ..."), with or without `allowPartial`. Then the same model, config (the differing
/// keys are named, e.g. "config.layers 2, this run has 3"), global batch, seed and optimizer.
/// Plan, mesh, world size, precision and --steps may differ. With `allowPartial`
/// (--allow-partial: loading a checkpoint into another model on purpose, e.g. a deeper one) a
/// difference of model, config, batch, seed or optimizer is appended to `notes` instead of
/// thrown. The data is compared later, by checkResumeData.
void checkTrainerState(const nlohmann::json& saved, int64_t step, bool weightsOnly, const RunIdentity& run,
                       const std::string& dir, bool allowPartial = false, std::vector<std::string>* notes = nullptr);

/// Where a run resumes: the checkpoint folder and its step (0 and "" without --resume).
struct ResumePoint {
  std::string dir;                 // the checkpoint folder (resolveCheckpoint of --resume)
  int64_t step = 0;                // optimizer steps it holds: the run continues at step + 1
  nlohmann::json trainer;          // its trainer state
  bool weightsOnly = false;        // isWeightsOnly: an import, not compared with this run
  std::vector<std::string> notes;  // e.g. a newer partial save of the root that was skipped
};

/// Step 2 of the file comment, on every rank (no collective): resolves --resume, reads its
/// index and checks the trainer state (checkTrainerState). Throws std::runtime_error beginning
/// "--resume 'DIR': " for a folder without a checkpoint or an incompatible one. The steps are
/// checked by checkCheckpointFlags once --steps is final.
ResumePoint findResumePoint(const CheckpointFlags& flags, const RunIdentity& run);

/// Once the feeders are made and `run.data` is known (after findResumePoint, before the
/// CheckpointSession): throws std::runtime_error "--resume 'DIR': the checkpoint was saved with
/// data 'a.txt' (N bytes, fingerprint H), this run has 'b.txt' (...)" unless the checkpoint of
/// `resume` was trained on data with the same fingerprint (the same bytes, wherever they lie);
/// with `allowPartial` the difference is appended to resume.notes instead. Nothing for a run
/// that does not resume or a weights-only checkpoint.
void checkResumeData(ResumePoint& resume, const RunIdentity& run, bool allowPartial);

/// Steps 3 and 4 of the file comment for one executor.
class CheckpointSession {
 public:
  /// Collective over `world` (null: one rank), after the executor's parameters are
  /// initialised: loads `resume` into `ex` (when it names a checkpoint; rank 0 prints the
  /// "resumed from ..." line and the load's notes), then makes the Checkpointer when
  /// --checkpoint-dir is given. `options` is the loop's (the schedule's fields go into the
  /// trainer state). Throws ckpt::CheckpointError from the load or the Checkpointer.
  CheckpointSession(rt::ProgramExecutor& ex, rt::Communicator* world, const CheckpointFlags& flags,
                    RunIdentity run, ResumePoint resume, const TrainOptions& options);
  ~CheckpointSession();
  CheckpointSession(const CheckpointSession&) = delete;
  CheckpointSession& operator=(const CheckpointSession&) = delete;

  /// Sets the loop's firstStep (the resumed step + 1), lastStep (--stop-after, else --steps)
  /// and afterStep (the save policy; it returns a line per save that became durable, for
  /// rank 0 to print). When
  /// no step is left to run (--stop-after equal to the resumed step) it saves the loaded state
  /// right away if the policy asks for a checkpoint at that step (not into the folder it was
  /// loaded from). `options` must outlive the session's use of the hook.
  void attach(TrainOptions& options);

  /// After the loop: waits for the save in flight and prints (rank 0) the saves that became
  /// durable; a run that --stop-after ended before --steps then says so and names the
  /// checkpoint to resume from ("stopped after step 12 of 30 (--stop-after): resume from
  /// step 10 with --resume 'DIR'", or that there is none). Throws ckpt::CheckpointError for a
  /// save that failed.
  void finish();

 private:
  /// The save policy after `step`; returns the lines of saves that became durable (rank 0).
  std::vector<std::string> afterStep(int64_t step);
  std::vector<std::string> save(int64_t step);

  int64_t lastSaved_ = -1;  // the step this run saved last (-1: none)

  rt::ProgramExecutor& ex_;
  rt::Communicator* world_;
  CheckpointFlags flags_;
  RunIdentity run_;
  ResumePoint resume_;
  const TrainOptions* options_;
  std::unique_ptr<ckpt::Checkpointer> checkpointer_;
  bool rank0_ = true;
};

}  // namespace tessel::trainer
