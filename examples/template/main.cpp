// tiny-transformer: trains the byte-level transformer of model.h on a text file.
//
// The trainer (dsl/trainer/App.h) gives this binary every standard flag: --plan (data, tensor,
// fully sharded and pipeline parallelism), --device, --precision, --emit-bundle, --log-json,
// --explain, checkpoints. This file only says what the model is and where its batches come
// from. `tiny-transformer --help` lists the flags; under `mpirun -np N` give a plan for N ranks,
// e.g. --plan dp=2 for two.
#include "model.h"

#include "dsl/trainer/App.h"
#include "runtime/data/TextDataset.h"

#include <fmt/format.h>

#include <memory>

int main(int argc, char** argv) {
  CLI::App app{"tiny-transformer: train a small byte-level transformer on text", "tiny-transformer"};
  tessel::trainer::Flags flags;  // defaults of the standard flags, shown by --help
  flags.layers = 2;
  flags.channels = 64;
  flags.heads = 4;
  flags.seq = 64;
  flags.batch = 16;
  flags.steps = 200;
  tessel::trainer::TrainOptions train;
  tessel::trainer::TrainerApp trainer(app, flags, train,
                                      {.defaultPath = "input.txt",
                                       .help = "text: a file, or a folder whose text files are concatenated"});
  tessel::trainer::addTransformerFlags(app, flags);  // --layers, --channels, --heads, --seq

  std::shared_ptr<tessel::TextDataset> text;
  return trainer.run(argc, argv, [&] {
    const tiny::Config cfg{flags.layers, flags.channels, flags.heads, flags.seq};
    tessel::trainer::ModelRecipe recipe;
    recipe.model = "tiny-transformer";
    recipe.config = {{"layers", cfg.layers}, {"channels", cfg.channels}, {"heads", cfg.heads}, {"seq", cfg.seq}};
    recipe.seq = cfg.seq;
    recipe.describe = fmt::format("L={} C={} NH={} T={} B={}", cfg.layers, cfg.channels, cfg.heads, cfg.seq,
                                  flags.batch);
    // Builds the model on the global batch; the trainer compiles it for the plan.
    recipe.compile = [cfg, &flags](const tessel::CompileOptions& options) {
      tiny::TinyTransformer model(cfg);
      tiny::build(model, flags.batch);
      return model.compile(options);
    };
    // This rank's batches: random windows of T + 1 bytes, each rank its rows of the global batch.
    recipe.data = [&](const tessel::trainer::DataShard& shard, tessel::trainer::TrainOptions&) {
      text = std::make_shared<tessel::TextDataset>(flags.data);
      text->requireSequenceLength(flags.seq);
      return tessel::trainer::textRankData({text.get(), shard.batch, flags.seq, shard.rank, shard.world,
                                            shard.microsteps, shard.seed, shard.firstStep});
    };
    return recipe;
  });
}
