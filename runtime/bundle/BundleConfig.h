// The model config of bundle.json checked against the program it describes. MLIR-free.
//
// Promise: bundle.json's numbers are what tessel-run believes (the batch it feeds, the
// sequence length it cuts, the plan it joins), and program.json's shapes are what the
// kernels were compiled for. checkBundleConfig refuses any disagreement before anything
// runs, naming the field, both values and the buffer it was compared with:
// - train_flags.batch against the model's first input of @train_step: its leading
//   dimension is the rows one rank feeds per microstep, batch / (dp x microsteps);
// - for every model tessel-run feeds (gpt, llama, mlp and the four labs), each config field
//   against the parameter or input dimension it fixes (tables in BundleConfig.cpp), e.g.
//   gpt's vocab against the rows of wte.weight, llama's hidden against the rows of
//   blocks.0.feed_forward.w1.weight, a lab's features against the input's second dimension
//   and its classes against the rows of head.weight; layers (gpt, llama, lab-fsdp) against the
//   number of blocks.<i> parameter groups; config.seq (gpt, llama) and train_flags.seq against
//   the input's second dimension; heads dividing channels, and for llama an even head size
//   D = channels / heads, kv_heads dividing heads and kv_heads x D the rows of
//   blocks.0.attention.wk.weight (the head count itself is compiled into the kernels).
// A config that is not an object, or a field a model needs that is missing, of another type
// or out of range, is refused too (checkConfigFields: a float such as 1.5, 2**70, "x", a
// rope_theta of -1, a lab's samples past 2^24). Models tessel-run does not feed (user models)
// are checked on the batch alone.
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

#include "runtime/io/JsonValues.h"  // jsonIntegerIn

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace tessel::rt {

/// Whether `model` is one of the labs (examples/labs): "lab-ddp", "lab-unused", "lab-fsdp" or
/// "lab-tp"; another name starting with "lab-" is not.
bool isLabModel(const std::string& model);

/// Whether tessel-run knows where `model`'s batches come from: byte text for "gpt" and
/// "llama", Fashion-MNIST for "mlp", the labs' synthetic data for the four labs. It refuses the
/// bundle of any other model (a model of the user's own); that model's trainer runs it.
bool tesselRunFeeds(const std::string& model);

/// For a model tessel-run feeds, throws std::runtime_error with one line naming bundle.json
/// (`file`) and the field unless the config is a JSON object and every field the model needs
/// that is present has its type and range: the sizes integers from 1 to 2^40, llama's
/// rope_theta and norm_eps finite numbers > 0, and a lab's synthetic data entries all present
/// and in their ranges (tessel::syntheticOptions). Only types and ranges: readBundle calls it
/// before it verifies the checksum, so that 1.5, 2**70 or "x" is named as such rather than as
/// damage.
void checkConfigFields(const BundleInfo& info, const std::string& file);

/// Throws std::runtime_error ("'<file>': config.vocab 300 does not match program.json: ...")
/// on the first disagreement (see the promise); `file` names bundle.json in the message.
void checkBundleConfig(const BundleInfo& info, const Program& program, const std::string& file);

}  // namespace tessel::rt
