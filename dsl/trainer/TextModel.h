// What the recipes of byte-level language models share (tessel-gpt, tessel-llama): their
// batches of text windows and their report after training, text sampled from the trained
// model.
#pragma once

#include "dsl/trainer/App.h"
#include "dsl/trainer/Sampling.h"
#include "runtime/data/TextDataset.h"

#include <functional>
#include <memory>

namespace tessel::trainer {

/// A recipe's data function for text (ModelRecipe::data): it reads flags.data into `data`
/// (kept for the report's prompt), requires windows of flags.seq + 1 bytes, and feeds this
/// rank's rows of the seeded global batches (textRankData). Throws what TextDataset throws
/// for a missing or too short file.
std::function<RankData(const DataShard&, TrainOptions&)> textData(const Flags& flags,
                                                                  std::shared_ptr<TextDataset>& data);

/// A recipe's report (ModelRecipe::report) for a byte-level language model: unless
/// options.bytes is 0, compiles `buildSampler`'s model (input "tokens" [1, T], output
/// "logits" [1, T, V]) forward-only, gives it the trained parameters (gathered ones under a
/// sharded plan), and prints options.bytes bytes sampled after a validation prompt of `data`,
/// seeded by flags.seed.
void reportSample(const Trained& trained, const std::function<Program()>& buildSampler, const TextDataset& data,
                  const Flags& flags, const SampleOptions& options);

}  // namespace tessel::trainer
