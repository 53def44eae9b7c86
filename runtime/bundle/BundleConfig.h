// The model config of bundle.json checked against the program it describes. MLIR-free.
//
// Promise: bundle.json's numbers are what tessel-run believes (the batch it feeds, the
// sequence length it cuts, the plan it joins), and program.json's shapes are what the
// kernels were compiled for. checkBundleConfig refuses any disagreement before anything
// runs, naming the field, both values and the buffer it was compared with:
// - train_flags.batch against the model's first input of @train_step: its leading
//   dimension is the rows one rank feeds per microstep, batch / (dp x microsteps);
// - for the models Tessel ships, each config field against the parameter or input
//   dimension it fixes (table in BundleConfig.cpp), e.g. gpt's vocab against the rows of
//   wte.weight, layers against the number of blocks.<i> parameter groups; gpt's config.seq
//   and train_flags.seq against the input's second dimension.
// A config field a model needs that is missing or not an integer from 1 to 2^40 is refused
// too (a float such as 1.5, or 2**70). Models without a table (user models) are checked on
// the batch alone.
// What the program itself shows is checked for every model: the program's mesh (if it has
// one) is the plan's, else the plan's axes besides the batch axes have size 1; every
// collective's group is the plan's ranks along its axes (each an axis of the plan); each
// gradient all-reduce names a batch axis when dp > 1, and one over a batch axis alone
// averages (reduce avg); dp > 1 exactly when the program reduces gradients over the batch
// axes (all-reduces, or under a fully sharded plan reduce-scatters over its axis); a fully
// sharded axis of more than one rank is one the program all-gathers or reduce-scatters over
// (every ZeRO stage does); every function runs on one of dp x microsteps batch shards
// (program.json's batch_shards, recorded by the compiler); plan.microsteps > 1 exactly when it has @accumulate_step; and
// the optimizer's state buffers are the recorded optimizer's (adamw: <param>:exp_avg and
// <param>:exp_avg_sq; sgd: <param>:momentum_buffer).
#pragma once

#include "runtime/bundle/Bundle.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace tessel::rt {

/// Whether the JSON value `j` is an integer in [lo, hi]: false for a float (1.5, 2**70), a
/// string, or an unsigned value past INT64_MAX, which reading as int64 would truncate or wrap.
inline bool jsonIntegerIn(const nlohmann::json& j, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) return false;
  if (j.is_number_unsigned()) return j.get<uint64_t>() <= static_cast<uint64_t>(hi) && j.get<int64_t>() >= lo;
  return j.get<int64_t>() >= lo && j.get<int64_t>() <= hi;
}

/// Whether tessel-run knows where `model`'s batches come from: byte text for "gpt" and
/// "llama", Fashion-MNIST for "mlp", the labs' synthetic data for "lab-*". It refuses the
/// bundle of any other model (a model of the user's own); that model's trainer runs it.
bool tesselRunFeeds(const std::string& model);

/// Throws std::runtime_error naming the field unless every config field the model needs that
/// is present is a JSON integer from 1 to 2^40 (only the type and range: readBundle calls it before it
/// verifies the checksum, so that 1.5 or 2**70 is named as such rather than as damage).
void checkConfigIntegers(const BundleInfo& info, const std::string& file);

/// Throws std::runtime_error ("'<file>': config.vocab 300 does not match program.json: ...")
/// on the first disagreement (see the promise); `file` names bundle.json in the message.
void checkBundleConfig(const BundleInfo& info, const Program& program, const std::string& file);

}  // namespace tessel::rt
