// The training loop, MLIR-free: hyper-parameters and their schedule, the optimizer step on an
// rt::ProgramExecutor (CPU or GPU), validation, progress lines and the JSON log.
//
// Promise: everything the loop needs comes from the rt::Program the executor holds. The
// @train_step inputs are Input buffers named "train_step.<input>": the model's inputs first
// (as many as @forward has), then the optimizer's hyper-parameters ("lr", "beta1", "beta2",
// "eps", "weight_decay", "momentum", "step", "max_grad_norm"). So the JIT path (dsl/trainer)
// and the AOT runner (tessel-run) share this loop and print the same lines.
//
// A pipelined program (TrainOptions::pipelineMicrobatches M_eff > 1) runs all M_eff
// microbatches of a step in one @train_step: its inputs are, for m = 0 .. M_eff - 1, the k
// inputs of @forward for microbatch m (inputs [m k, (m + 1) k)), then the hyper-parameters.
// The loop feeds microbatch m at first input m k, runs @train_step once per step (there is no
// @accumulate_step) and validates with @forward on one microbatch at a time.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/exec/Executor.h"  // CollectiveCounters
#include "runtime/exec/ProgramExecutor.h"
#include "runtime/train/FlagChecks.h"  // the checks of every numeric flag
#include "runtime/train/Validation.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tessel::trainer {

/// Optimizer hyper-parameters and the learning-rate schedule. Defaults follow
/// torch.optim.AdamW, except the weight decay (GPT-2's 0.1 in nanoGPT; 0 disables).
struct TrainOptions {
  int64_t steps = 100;
  std::string optimizer = "adamw";   // or "sgd"
  double lr = 1e-3;
  int64_t warmup = 0;                // linear warmup steps from 0 to lr
  std::string schedule = "cosine";  // after warmup: "cosine" decay to minLrRatio*lr, or "constant"
  double minLrRatio = 0.1;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.9;             // sgd
  double gradClip = 1.0;             // global-norm threshold; <= 0 or inf disables
  int64_t evalEvery = 0;             // 0: only at the end
  int64_t evalBatches = 8;           // global batches per validation, the first of the fixed set (0: all)
  std::string logJson;               // one JSON object per step
  int64_t tokensPerStep = 0;         // items per step, for the throughput column
  std::string throughputUnit = "tok/s";  // what the progress line calls those items per second
  /// Gradient accumulation: per step, microsteps - 1 runs of @accumulate_step, then
  /// @train_step, each fed its own microbatch; the loss reported is their mean.
  int64_t microsteps = 1;
  /// Pipeline parallelism: M_eff, the microbatches one @train_step takes (the plan's
  /// microbatches x grad accumulation; see the file comment), with microsteps 1. 0 or 1: the
  /// program is not pipelined (one microbatch per @train_step, inputs as @forward's).
  int64_t pipelineMicrobatches = 0;
  /// Data parallelism: the ranks' communicator (not owned; null for one rank). The loss
  /// and validation loss printed are averaged over the ranks (the global batch mean); only
  /// rank 0 prints progress and writes the JSON log.
  rt::Communicator* comm = nullptr;
  /// The communicator the executor's collective steps use when it is not `comm` (NCCL on
  /// GPUs; not owned). Both are told the step (Communicator::setStep) for their errors.
  rt::Communicator* deviceComm = nullptr;
  /// After every step, all-gather a hash of each rank's parameters and optimizer state and
  /// fail (std::runtime_error naming the step, the buffer, its replica group's axes and the
  /// ranks) unless every buffer is equal across its replica group (runtime/exec/Replicas.h).
  bool checkReplicas = false;
  /// --export-params FILE.safetensors: after the last step every rank takes part in gathering
  /// the parameters and rank 0 writes them in their global shapes (runtime/exec/ExportParams.h).
  std::string exportParams;
  /// --trace FILE: a Chrome trace-event JSON of the steps in --trace-steps, every rank's
  /// events merged on rank 0 (runtime/exec/Trace.h). Empty: no trace.
  std::string traceFile;
  /// --trace-steps A:B (1-based, inclusive); empty: steps 2 to 6, or every step of a run
  /// shorter than 6 steps.
  std::string traceSteps;
  /// --report DIR: after the last step rank 0 writes DIR/index.html (runtime/train/Report.h)
  /// from the records it logs (the same as --log-json's). Empty: no report.
  std::string reportDir;
  /// --log-every N: when stdout is not a terminal, a progress line every N steps (and at every
  /// validation and the last step); on a terminal one bar redraws in place (Progress.h).
  int64_t logEvery = 1;
  /// The executor's collective counters so far, when the caller can read them (the CPU and
  /// GPU executors have them; ProgramExecutor does not): each logged step then records its
  /// payload per kind and exposed wait time (RunLog.h). Empty: not recorded.
  std::function<rt::CollectiveCounters()> counters;
  /// The run's configuration and plan for the log's "run" record of step 1 (RunLog.h: model,
  /// describe, plan, device, config); the loop adds world_size, steps, unit and memory.
  nlohmann::json runInfo = nlohmann::json::object();
  /// Resuming (runtime/train/Checkpointing.h): the first step to run, 1-based (a run resumed
  /// from checkpoint step s starts at s + 1). The learning-rate schedule is a function of the
  /// step and `steps` alone, so it continues where it was (over a different --steps, the
  /// cosine spans the new --steps). A resumed run (firstStep > 1) appends to --log-json, its
  /// first record carrying the "run" object; progress and ETA count the steps of this run.
  int64_t firstStep = 1;
  /// The last step to run (--stop-after: the run ends as if interrupted, without the final
  /// validation); -1: `steps`. No step runs when lastStep < firstStep.
  int64_t lastStep = -1;
  /// Called after each step (after its log record), with the step, on every rank at the same
  /// point: the checkpoint policy. Empty: nothing.
  std::function<void(int64_t step)> afterStep;
};

/// The steps --trace-steps `flag` selects in a run of `steps` steps (see TrainOptions::
/// traceSteps). Throws std::runtime_error when the window ends after the run does
/// ("--trace-steps 2:10: the run has 5 steps").
std::pair<int64_t, int64_t> traceWindow(const std::string& flag, int64_t steps);

/// The last step the loop runs: lastStep (--stop-after) when set, else steps.
int64_t lastStepOf(const TrainOptions& o);
/// Steps the loop runs: from firstStep to lastStepOf (0 when a resumed run stops where it
/// resumed), for per-step averages of what this process measured.
int64_t stepsRun(const TrainOptions& o);

/// The learning rate at 1-based `step`: linear warmup, then cosine or constant.
double learningRate(const TrainOptions& o, int64_t step);

/// Feeds one microbatch: fills the model inputs of `function` on the executor, input indices
/// firstInput .. firstInput + k - 1 (k: @forward's input count). With microsteps k > 1 it is
/// called k times per step (k - 1 times for "accumulate_step", then for "train_step"), with
/// firstInput 0; with a pipeline of M_eff microbatches, M_eff times for "train_step", with
/// firstInput m k for microbatch m. Calls come in microbatch order.
using BatchFeeder =
    std::function<void(rt::ProgramExecutor& ex, const std::string& function, size_t firstInput)>;

/// What one step reported.
struct StepStats {
  int64_t step = 0;
  double loss = 0, lr = 0, gradNorm = 0, tokensPerSecond = 0, seconds = 0;
  double valLoss = -1;  // < 0 when not evaluated this step
};

/// The hyper-parameter names of @train_step in argument order (the inputs after the model's:
/// after max(1, pipelineMicrobatches) x @forward's inputs; "train_step." prefix removed),
/// read from the executor's program. Throws std::runtime_error if the program has no
/// @train_step or @forward, or fewer @train_step inputs than the model's.
std::vector<std::string> hyperParameterNames(const rt::Program& program, int64_t pipelineMicrobatches = 0);

/// Checks what the loop reads from `program` before anything runs: @train_step and @forward
/// (which validation runs) exist, output 0 of each (the loss) and output 1 of @train_step (the
/// global gradient norm) are distinct scalar f32 buffers the function computes (Temps, not a
/// parameter, optimizer state or input), and with microsteps > 1 @accumulate_step exists with
/// such a loss; with pipelineMicrobatches M_eff > 1, @train_step's first M_eff x k inputs are
/// M_eff copies of @forward's k inputs (dtype and shape, in order; the file comment) and
/// microsteps is 1. Throws std::runtime_error naming the function and output (or input)
/// otherwise.
void checkTrainingProgram(const rt::Program& program, int64_t microsteps, int64_t pipelineMicrobatches = 0);

/// Runs the loop on `ex` (a program with @train_step and @forward): per step from firstStep to
/// lastStep (or steps), `trainBatch`
/// feeds a batch (each microbatch, at its first input: BatchFeeder), the hyper-parameters are
/// set, train_step runs; every evalEvery steps and at the end, the first
/// evaluationBatches(evalBatches, valBatch) global batches of the fixed validation set run
/// through @forward (each as `microsteps`, or pipelineMicrobatches, microbatches) and their mean
/// loss, averaged over the ranks, is the validation loss (Validation.h). Prints which
/// held-out items that is, a progress line per step, and writes the JSON log. Returns the
/// per-step stats. Throws std::logic_error when valBatch was made for other microsteps, and
/// std::runtime_error when checkTrainingProgram refuses the program or a training or
/// validation loss is NaN or infinite (naming the step and the likely causes).
std::vector<StepStats> train(rt::ProgramExecutor& ex, const TrainOptions& o,
                             const BatchFeeder& trainBatch, const ValidationFeeder& valBatch);

/// Registers --lr, --warmup, --schedule, --weight-decay, --grad-clip, --optimizer,
/// --eval-every, --eval-batches, --log-json, --log-every, --report, --export-params, --trace and
/// --trace-steps (--optimizer only with `optimizerFlag`: a
/// compiled bundle has its optimizer built in).
void addTrainFlags(CLI::App& app, TrainOptions& options, bool optimizerFlag = true);

/// Registers the flags of a job of several ranks that the trainers and tessel-run share:
/// --check-schedule, --check-replicas and --comm-timeout (seconds, in (0, kMaxTimeoutSeconds]).
void addCommFlags(CLI::App& app, bool& checkSchedule, bool& checkReplicas, double& commTimeout);

}  // namespace tessel::trainer
