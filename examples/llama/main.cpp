// tessel-llama: trains the byte-level Llama of model.h on a text corpus, then samples from it.
//
// The trainer (dsl/trainer/App.h) owns the flags, the ranks, the device, compiling,
// bundles and the loop; this file says what the model is, where its batches come from and
// what to report, as examples/gpt/main.cpp does for the GPT. Besides the trainer's flags
// (--layers --channels --heads --seq ...) it takes the Llama's own: --kv-heads, --hidden,
// --rope-theta and --norm-eps (docs/llama.md).
#include "examples/llama/model.h"

#include "dsl/trainer/TextModel.h"

#include <fmt/format.h>
#include <memory>

namespace {

/// The value of a size flag left at 0: "not given, use the default rule".
constexpr int64_t kDefault = 0;

/// The flags' Config, with the defaults of --kv-heads and --hidden resolved. Throws a
/// ModelError at the flag ("--kv-heads:1:1: error: ...") for a value the model cannot take
/// (heads, --rope-theta and --norm-eps as rope and rms_norm check them), before anything is
/// built.
llama::Config configFromFlags(const tessel::trainer::Flags& flags, llama::Config cfg) {
  cfg.layers = flags.layers;
  cfg.channels = flags.channels;
  cfg.heads = flags.heads;
  cfg.seq = flags.seq;
  if (cfg.kv_heads == kDefault) cfg.kv_heads = llama::defaultKvHeads(cfg.heads);
  if (cfg.hidden == kDefault) cfg.hidden = llama::defaultHidden(cfg.channels);
  auto fail = [](const char* flag, const std::string& message) {
    throw tessel::ModelError(tessel::Diagnostic{flag, 1, 1, "", message});
  };
  if (cfg.channels % cfg.heads != 0)
    fail("--heads", fmt::format("--channels {} is not divisible by --heads {}", cfg.channels, cfg.heads));
  if ((cfg.channels / cfg.heads) % 2 != 0)
    fail("--heads", fmt::format("the head size --channels / --heads = {} / {} = {} is odd; rotary embeddings "
                                "pair the two halves of a head, so it must be even",
                                cfg.channels, cfg.heads, cfg.channels / cfg.heads));
  if (cfg.heads % cfg.kv_heads != 0)
    fail("--kv-heads", fmt::format("--kv-heads {} does not divide --heads {} (each key/value head serves "
                                   "heads / kv_heads query heads)",
                                   cfg.kv_heads, cfg.heads));
  // The bounds rope and RMSNorm check (a NaN loss or a dead model otherwise), here at the flag.
  if (std::string error = tessel::rope_theta_error(cfg.rope_theta, cfg.channels / cfg.heads, cfg.seq);
      !error.empty())
    fail("--rope-theta", error);
  if (std::string error = tessel::norm_epsilon_error(cfg.norm_eps); !error.empty())
    fail("--norm-eps", error);
  return cfg;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel-llama: train a byte-level Llama (RMSNorm, RoPE, grouped-query attention, SwiGLU) on "
               "text, then sample from it",
               "tessel-llama"};
  tessel::trainer::Flags flags;
  flags.layers = 4;
  flags.channels = 128;
  flags.seq = 64;
  flags.batch = 16;
  flags.steps = 300;
  tessel::trainer::TrainOptions train;
  tessel::trainer::TrainerApp trainer(
      app, flags, train,
      {.defaultPath = "/usr/share/games/fortunes",
       .help = "text: a file, or a folder whose text files are concatenated"});
  tessel::trainer::addTransformerFlags(app, flags);
  llama::Config base;
  base.kv_heads = kDefault;
  base.hidden = kDefault;
  app.add_option("--kv-heads", base.kv_heads,
                 "key/value heads NKV, dividing --heads (0: NH/2 when NH is even, else NH; the default "
                 "--heads 4 gives 2)")
      ->capture_default_str()->check(tessel::trainer::integerIn(0, 4096));
  app.add_option("--hidden", base.hidden,
                 "SwiGLU width H (0: 2/3 of 4C rounded up to a multiple of 128; the default --channels 128 "
                 "gives 384)")
      ->capture_default_str()->check(tessel::trainer::integerIn(0, int64_t{1} << 20));
  app.add_option("--rope-theta", base.rope_theta, "rotary embedding base theta")
      ->capture_default_str()->check(tessel::trainer::positiveNumber());
  app.add_option("--norm-eps", base.norm_eps, "epsilon of the RMS norms")
      ->capture_default_str()->check(tessel::trainer::positiveNumber());
  tessel::trainer::SampleOptions sample;
  tessel::trainer::addSampleFlags(app, sample);

  std::shared_ptr<tessel::TextDataset> data;
  return trainer.run(argc, argv, [&] {
    const llama::Config cfg = configFromFlags(flags, base);
    tessel::trainer::ModelRecipe r;
    r.model = "llama";
    r.config = {{"layers", cfg.layers},     {"channels", cfg.channels},     {"heads", cfg.heads},
                {"kv_heads", cfg.kv_heads}, {"hidden", cfg.hidden},         {"seq", cfg.seq},
                {"vocab", cfg.vocab},       {"rope_theta", cfg.rope_theta}, {"norm_eps", cfg.norm_eps}};
    r.seq = cfg.seq;
    r.describe = fmt::format("L={} C={} NH={} NKV={} H={} T={} B={}", cfg.layers, cfg.channels, cfg.heads,
                             cfg.kv_heads, cfg.hidden, cfg.seq, flags.batch);
    r.compile = [cfg, &flags](const tessel::CompileOptions& o) {
      llama::Llama model(cfg);
      llama::build(model, flags.batch);
      return model.compile(o);
    };
    r.data = tessel::trainer::textData(flags, data);
    r.report = [&, cfg](const tessel::trainer::Trained& trained) {
      auto buildSampler = [cfg] {
        llama::Llama model(cfg);
        llama::buildSampler(model);
        return model.compile({.train = false});
      };
      tessel::trainer::reportSample(trained, buildSampler, *data, flags, sample);
    };
    return r;
  });
}
