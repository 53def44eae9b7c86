// Sampling text from a trained byte-level language model.
#pragma once

#include "dsl/tessel.h"

#include <CLI/CLI.hpp>

#include <random>
#include <string>
#include <vector>

namespace tessel::trainer {

/// How to sample: temperature scales the logits (lower is more conservative), and only the
/// topK most likely bytes are candidates (0: all 256).
struct SampleOptions {
  int64_t bytes = 300;
  double temperature = 0.8;
  int64_t topK = 40;
};

/// Registers --sample-bytes, --temperature and --top-k.
void addSampleFlags(CLI::App& app, SampleOptions& options);

/// Generates `options.bytes` bytes with `sampler`, a forward-only program with input
/// "tokens" [1, T] and output "logits" [1, T, V]. The window starts as `prompt` (T tokens)
/// and slides by one byte per step; each new byte is drawn from the temperature-scaled,
/// top-k-truncated softmax of the last position's logits, with `rng`.
std::string sampleBytes(NativeProgram& sampler, std::vector<int32_t> prompt,
                        const SampleOptions& options, std::mt19937_64& rng);

}  // namespace tessel::trainer
