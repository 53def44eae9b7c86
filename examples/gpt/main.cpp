// tessel-gpt: builds the GPT of model.h, compiles it and runs it on byte-level text.
// Until training arrives, --steps N evaluates the forward loss of the freshly initialised
// model on N validation batches and prints it. A random-init byte model should score
// close to ln(256) = 5.545 nats per byte.
#include "examples/gpt/model.h"

#include "dsl/trainer/Flags.h"
#include "runtime/data/TextDataset.h"

#include <cmath>
#include <fmt/format.h>
#include <random>

int main(int argc, char** argv) {
  CLI::App app{"tessel-gpt: a byte-level GPT on text", "tessel-gpt"};
  tessel::trainer::Flags flags;
  tessel::trainer::addCommonFlags(app, flags, "/usr/share/games/fortunes",
                                  "text: a file, or a folder whose text files are concatenated");
  tessel::trainer::addTransformerFlags(app, flags);

  return tessel::trainer::runMain(app, argc, argv, [&] {
    tessel::TextDataset data(flags.data);
    data.requireSequenceLength(flags.seq);

    gpt::Config cfg{flags.layers, flags.channels, flags.heads, flags.seq, 256};
    gpt::GPT model(cfg);
    gpt::build(model, flags.batch);
    tessel::Program program = model.compile({.dump_ir_dir = flags.dumpIr});
    fmt::print("tessel-gpt: L={} C={} NH={} T={} B={}, {} parameters, data '{}' ({} bytes)\n",
               cfg.layers, cfg.channels, cfg.heads, cfg.seq, flags.batch,
               tessel::trainer::parameterCount(program), data.path(), data.size());

    auto params = tessel::trainer::initParameters(program, flags.seed);
    std::mt19937_64 rng(flags.seed);
    double sum = 0;
    for (int64_t step = 1; step <= flags.steps; ++step) {
      tessel::TokenBatch batch = data.sample(tessel::Split::Val, flags.batch, flags.seq, rng);
      tessel::Shape shape{flags.batch, flags.seq};
      std::vector<tessel::ref::Tensor> inputs{
          tessel::ref::Tensor(shape, std::vector<double>(batch.tokens.begin(), batch.tokens.end())),
          tessel::ref::Tensor(shape, std::vector<double>(batch.targets.begin(), batch.targets.end()))};
      double loss = program.run_reference(params, inputs)[0].data[0];
      sum += loss;
      fmt::print("step {:>4}/{}: forward loss {:.4f}\n", step, flags.steps, loss);
    }
    fmt::print("mean forward loss over {} batches: {:.4f} (ln 256 = {:.4f})\n", flags.steps,
               sum / static_cast<double>(flags.steps), std::log(256.0));
    return 0;
  });
}
