// The byte-level language models' shared recipe parts; see TextModel.h.
#include "dsl/trainer/TextModel.h"

#include "runtime/train/TextBatches.h"

#include <fmt/format.h>
#include <random>

namespace tessel::trainer {

std::function<RankData(const DataShard&, TrainOptions&)> textData(const Flags& flags,
                                                                  std::shared_ptr<TextDataset>& data) {
  return [&flags, &data](const DataShard& s, TrainOptions&) {
    data = std::make_shared<TextDataset>(flags.data);
    data->requireSequenceLength(flags.seq);
    const TextBatchOptions o{data.get(), s.batch, flags.seq, s.rank, s.world, s.microsteps, s.seed, s.firstStep};
    return textRankData(o);
  };
}

void reportSample(const Trained& trained, const std::function<Program()>& buildSampler, const TextDataset& data,
                  const Flags& flags, const SampleOptions& options) {
  if (options.bytes == 0) return;
  Program samplerProgram = buildSampler();
  NativeProgram sampler = samplerProgram.native(trained.native);
  if (trained.parameters)  // a sharded program: its gathered parameters
    sampler.copy_parameters_from(*trained.parameters);
  else
    sampler.copy_parameters_from(trained.executor);
  std::mt19937_64 rng(flags.seed), valRng(flags.seed + 1);
  TokenBatch prompt = data.sample(Split::Val, 1, flags.seq, valRng);
  std::string text = sampleBytes(sampler, prompt.tokens, options, rng);
  fmt::print("---- {} sampled bytes (temperature {}, top-k {}) ----\n{}\n----\n", options.bytes, options.temperature,
             options.topK, text);
}

}  // namespace tessel::trainer
