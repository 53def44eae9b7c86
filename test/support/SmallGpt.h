// The small GPT that the SIMT and stand-in GPU tests train (L=2, C=64, NH=4, T=32, B=4) and
// their training schedule, shared so that both compare the same steps.
#pragma once

#include "examples/gpt/model.h"
#include "runtime/exec/ProgramExecutor.h"
#include "runtime/train/Loop.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tessel::test {

inline gpt::Config smallGpt() { return {.layers = 2, .channels = 64, .heads = 4, .seq = 32}; }
inline constexpr int64_t kSmallGptBatch = 4;

/// Per-step loss and gradient norm of `steps` AdamW steps (lr 1e-3, parameters from seed 7)
/// on fixed random batches of bytes, with one validation batch after the last step.
inline std::vector<trainer::StepStats> trainSmallGpt(rt::ProgramExecutor& ex, int64_t steps) {
  const int64_t batch = kSmallGptBatch, seq = smallGpt().seq;
  ex.initParameters(7);
  trainer::TrainOptions o;
  o.steps = steps;
  o.lr = 1e-3;
  o.evalBatches = 1;
  o.tokensPerStep = batch * seq;
  std::mt19937_64 rng(99);
  auto feed = [&](rt::ProgramExecutor& e, const std::string& fn, size_t = 0) {
    std::vector<int32_t> tokens(static_cast<size_t>(batch * seq)), targets(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>(rng() % 256);
      targets[i] = static_cast<int32_t>(rng() % 256);
    }
    e.setInput(fn, 0, tokens.data(), tokens.size() * sizeof(int32_t));
    e.setInput(fn, 1, targets.data(), targets.size() * sizeof(int32_t));
  };
  trainer::ValidationFeeder val = trainer::orderedValidation(
      batch, batch, 0, 1, 1, "rows of random bytes",
      [&](rt::ProgramExecutor& e, const std::string& fn, int64_t, int64_t) { feed(e, fn); });
  return trainer::train(ex, o, feed, val);
}

}  // namespace tessel::test
