// What the export tools of the PyTorch comparisons share (test/tools/*_export.cpp): one
// forward pass on the f64 reference interpreter, or a few native AdamW steps, of a compiled
// byte-level language model (inputs "tokens" and "targets" [B, T] i32, the mean
// cross-entropy as its loss), written into one safetensors file that an independent
// implementation can replay. Each tool adds its model's config to the file's metadata.
#pragma once

#include "dsl/tessel.h"
#include "runtime/data/TextDataset.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/train/Loop.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace tessel::test {

/// The flags of a training export besides the model's: the hyper-parameters of the constant
/// learning rate run, the CPU threads and the kernel cache.
struct TrainExportFlags {
  trainer::TrainOptions train;  // lr, weight decay, clipping; schedule "constant", no warmup
  int threads = 0;
  std::string cacheDir;
};

/// Registers --lr, --weight-decay (default 0.1), --grad-clip, --threads and --cache-dir on
/// `app`, writing into `flags`.
void addTrainExportFlags(CLI::App& app, TrainExportFlags& flags);

/// One forward pass of `program` (compiled with the logits as an output after the loss) on
/// the f64 reference interpreter, on one validation batch [batch, seq] drawn from `data` with
/// std::mt19937_64(seed), from parameters initialised by initParameters(program, seed).
/// The file holds every parameter under its name (F32, exact: initParameters rounds to f32),
/// "tokens" and "targets" (I32), each output of the program under its name (F64: "loss",
/// "logits"), and the metadata "batch", "seed" and "data". Throws std::logic_error if an
/// output's name clashes with a parameter's.
SafeTensorsFile forwardExport(const Program& program, const TextDataset& data, int64_t batch, int64_t seq,
                              uint64_t seed);

/// `steps` native AdamW steps of `program` (compiled with the optimizer "adamw") on train
/// batches [batch, seq] drawn from `data` with std::mt19937_64(seed). The file holds
/// "init/<param>" and "final/<param>" (F32: the executor's parameter buffers before the first
/// and after the last step), "tokens" and "targets" [steps, batch, seq] (I32: what each step
/// trained on), "loss" and "grad_norm" [steps] (F64: what @train_step returned, the loss
/// before the step and the global gradient norm before clipping), and the metadata "batch",
/// "seed", "steps", "data" and the hyper-parameters as @train_step received them (f32
/// scalars, printed with 17 digits): "optimizer" adamw, "schedule" constant, "warmup" 0, "lr",
/// "beta1", "beta2", "eps", "weight_decay", "max_grad_norm" ("inf": no clipping).
SafeTensorsFile trainExport(const Program& program, const TextDataset& data, int64_t batch, int64_t seq,
                            uint64_t seed, int64_t steps, const TrainExportFlags& flags);

}  // namespace tessel::test
