// The training loop shared by the example binaries: hyper-parameters and their schedule,
// the optimizer step on the native program, validation, progress and JSON logs.
//
// The model-specific parts (which batch to feed) come in as callbacks, so tessel-gpt and
// tessel-mlp share everything else.
#pragma once

#include "dsl/tessel.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
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
  int64_t evalBatches = 8;
  std::string logJson;               // one JSON object per step
  int64_t tokensPerStep = 0;         // items per step, for the throughput column
  std::string throughputUnit = "tok/s";  // what the progress line calls those items per second
};

/// The learning rate at 1-based `step`: linear warmup, then cosine or constant.
double learningRate(const TrainOptions& o, int64_t step);

/// Feeds one batch: fills the model inputs of `function` on the executor (indices 0..k-1).
using BatchFeeder = std::function<void(rt::Executor& ex, const std::string& function)>;

/// What one step reported.
struct StepStats {
  int64_t step = 0;
  double loss = 0, lr = 0, gradNorm = 0, tokensPerSecond = 0, seconds = 0;
  double valLoss = -1;  // < 0 when not evaluated this step
};

/// Runs the loop on `native` (compiled with a @train_step): per step, `train` feeds a batch,
/// the hyper-parameters are set, train_step runs; every evalEvery steps and at the end,
/// `val` feeds evalBatches batches to @forward and the mean loss is the validation loss.
/// Prints a progress line per step and writes the JSON log. Returns the per-step stats.
std::vector<StepStats> train(NativeProgram& native, const Program& program, const TrainOptions& o,
                             const BatchFeeder& trainBatch, const BatchFeeder& valBatch);

/// Mean forward loss over `batches` batches fed by `feed`.
double evaluate(NativeProgram& native, int64_t batches, const BatchFeeder& feed);

/// Registers --lr, --warmup, --schedule, --weight-decay, --grad-clip, --optimizer,
/// --eval-every, --eval-batches and --log-json.
void addTrainFlags(CLI::App& app, TrainOptions& options);

}  // namespace tessel::trainer

namespace tessel::trainer {

/// Prints the `top` most expensive steps of `function` (profiled executors only): seconds per
/// run, share of the total, kind (kernel symbol, gemm with its dimensions, copy) and the op
/// location, so a user sees where a step's time goes.
void printProfile(NativeProgram& native, const std::string& function, int64_t runs, int top = 15);

}  // namespace tessel::trainer
