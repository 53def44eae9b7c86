// The training loop shared by the example binaries, on a NativeProgram: a thin wrapper over the
// MLIR-free loop of runtime/train/Loop.h (which also declares TrainOptions, StepStats,
// learningRate and addTrainFlags).
//
// The model-specific parts (which batch to feed) come in as callbacks, so tessel-gpt and
// tessel-mlp share everything else.
#pragma once

#include "dsl/tessel.h"
#include "runtime/train/Loop.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessel::trainer {

/// Runs the loop on `native` (compiled with a @train_step): per step, `train` feeds a batch,
/// the hyper-parameters are set, train_step runs; every evalEvery steps and at the end,
/// the first evalBatches global batches of the fixed set `val` run through @forward and the
/// mean loss is the validation loss (runtime/train/Validation.h). Prints a progress line
/// per step and writes the JSON log. Returns the per-step stats.
std::vector<StepStats> train(NativeProgram& native, const Program& program, const TrainOptions& o,
                             const BatchFeeder& trainBatch, const ValidationFeeder& valBatch);

}  // namespace tessel::trainer

namespace tessel::trainer {

/// Prints the `top` most expensive steps of `function` (profiled executors only): seconds per
/// run, share of the total, kind (kernel symbol, gemm with its dimensions, copy) and the op
/// location, so a user sees where a step's time goes.
/// Then the summary by kind (printKindSummary).
void printProfile(NativeProgram& native, const std::string& function, int64_t runs, int top = 15);

/// Prints `f`'s time by step kind (runtime/exec/StepKind.h: gemm, row, elementwise, layout,
/// optimizer, attention, collective halves, send_recv, other), one line per kind present:
/// "  kind <name> <ms per run> ms <share>% <steps> steps", the GEMM line with the GFLOP/s its
/// steps achieved (2 m n k batch per GEMM over their time). `seconds`: the executor's
/// per-step totals over `runs` runs; the shares sum to 100% (up to rounding).
void printKindSummary(const rt::Function& f, const std::vector<double>& seconds, int64_t runs);

}  // namespace tessel::trainer
