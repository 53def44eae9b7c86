// tessel-gpt: trains the byte-level GPT of model.h on a text corpus, then samples from it.
//
// The trainer (dsl/trainer/App.h) owns the flags, the ranks, the device, compiling,
// bundles and the loop; this file says what the model is, where its batches come from and
// what to report. The model is compiled twice: once with a train step (autodiff + AdamW) on
// batch B by the trainer, once forward-only on one sequence for sampling, which runs on the
// CPU and takes the trained parameters by name (from the GPU too).
#include "examples/gpt/model.h"

#include "dsl/trainer/TextModel.h"

#include <fmt/format.h>
#include <memory>

int main(int argc, char** argv) {
  CLI::App app{"tessel-gpt: train a byte-level GPT on text, then sample from it", "tessel-gpt"};
  tessel::trainer::Flags flags;
  flags.layers = 4;
  flags.channels = 128;
  flags.seq = 64;
  flags.batch = 16;
  flags.steps = 300;
  tessel::trainer::TrainOptions train;
  tessel::trainer::TrainerApp trainer(
      app, flags, train,
      {.defaultPath = "/usr/share/games/fortunes", .help = "text: a file, or a folder whose text files are concatenated"});
  tessel::trainer::addTransformerFlags(app, flags);
  int64_t vocab = 256;
  app.add_option("--vocab", vocab, "vocabulary rows V: 256 bytes, padded up to N (rows past 256 are never "
                 "a token; e.g. 50304 for GPT-2 small's shapes)")
      ->capture_default_str()->check(tessel::trainer::integerIn(256, int64_t{1} << 24));
  tessel::trainer::SampleOptions sample;
  tessel::trainer::addSampleFlags(app, sample);

  std::shared_ptr<tessel::TextDataset> data;
  return trainer.run(argc, argv, [&] {
    const gpt::Config cfg{flags.layers, flags.channels, flags.heads, flags.seq, vocab};
    tessel::trainer::ModelRecipe r;
    r.model = "gpt";
    r.config = {{"layers", cfg.layers}, {"channels", cfg.channels}, {"heads", cfg.heads},
                {"seq", cfg.seq}, {"vocab", cfg.vocab}};
    r.seq = cfg.seq;
    r.describe = fmt::format("L={} C={} NH={} T={} B={}{}", cfg.layers, cfg.channels, cfg.heads, cfg.seq,
                             flags.batch, cfg.vocab == 256 ? std::string() : fmt::format(" V={}", cfg.vocab));
    r.compile = [cfg, &flags](const tessel::CompileOptions& o) {
      gpt::GPT model(cfg);
      gpt::build(model, flags.batch);
      return model.compile(o);
    };
    r.data = tessel::trainer::textData(flags, data);
    // Tensor parallelism alone (no dp, sequence parallelism or accumulation): per training
    // step, f32 all-reduces of [B, T, C] four per block (forward after the attention and MLP
    // projections, backward the qkv and fc input gradients), two more for the vocab-parallel
    // embedding's pending sum and the LM head's input gradient, and three of [B, T] for the
    // cross-entropy's max, sum and target logit (a padded vocabulary adds no row); the
    // all-gather carries global-norm clipping's tp per-rank norms.
    r.communication = [cfg, &flags](const tessel::Plan& plan) -> std::optional<tessel::trainer::CommunicationFormula> {
      if (plan.tp() == 1 || plan.dp() != 1 || plan.microsteps() != 1 || plan.sequence_parallel()) return std::nullopt;
      const int64_t btc = flags.batch * cfg.seq * cfg.channels, bt = flags.batch * cfg.seq;
      return tessel::trainer::CommunicationFormula{
          .allReduce = fmt::format("((4 L + 2) B T C + 3 B T) x 4 with L={} B={} T={} C={}", cfg.layers,
                                   flags.batch, cfg.seq, cfg.channels),
          .allGather = fmt::format("tp x 4 with tp={}", plan.tp()),
          .allReduceBytes = ((4 * cfg.layers + 2) * btc + 3 * bt) * 4,
          .allGatherBytes = plan.tp() * 4};
    };
    r.report = [&, cfg](const tessel::trainer::Trained& trained) {
      auto buildSampler = [cfg] {
        gpt::GPT model(cfg);
        gpt::buildSampler(model);
        return model.compile({.train = false});
      };
      tessel::trainer::reportSample(trained, buildSampler, *data, flags, sample);
    };
    return r;
  });
}
