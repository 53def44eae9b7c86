// tessel-llama-export: one forward pass (--mode forward) or a few native AdamW steps
// (--mode train) of the Llama of examples/llama/model.h, written into one safetensors file
// that an independent implementation can replay (test/python/test_llama_vs_torch.py).
//
// Promise: --mode forward writes what tessel::test::forwardExport promises (every parameter
// under its Tessel name as F32, "tokens"/"targets" [B, T] I32 of one validation batch,
// "logits" [B, T, V] and "loss" as F64 from the f64 reference interpreter); --mode train
// what tessel::test::trainExport promises (init/ and final/ parameters, the batches, the
// per-step loss and gradient norm of the native f32 path, the hyper-parameters). Both add the
// config to the metadata as strings: layers, channels, heads, kv_heads, hidden, seq, vocab,
// rope_theta and norm_eps (17 significant digits).
#include "examples/llama/model.h"

#include "dsl/trainer/Flags.h"
#include "runtime/train/FlagChecks.h"
#include "test/tools/ModelExport.h"

#include <fmt/format.h>

int main(int argc, char** argv) {
  CLI::App app{"tessel-llama-export: a Llama forward pass or a few AdamW steps, exported as safetensors",
               "tessel-llama-export"};
  tessel::trainer::Flags flags;
  flags.layers = 2;
  flags.channels = 64;
  flags.heads = 4;
  flags.seq = 32;
  flags.batch = 4;
  flags.steps = 10;
  tessel::trainer::addCommonFlags(app, flags, "/usr/share/games/fortunes", "text file to sample the batches from");
  tessel::trainer::addTransformerFlags(app, flags);
  llama::Config cfg;
  app.add_option("--kv-heads", cfg.kv_heads, "key/value heads NKV")
      ->capture_default_str()->check(tessel::trainer::integerIn(1, 4096));
  app.add_option("--hidden", cfg.hidden, "SwiGLU width H")
      ->capture_default_str()->check(tessel::trainer::integerIn(1, int64_t{1} << 20));
  app.add_option("--rope-theta", cfg.rope_theta, "rotary embedding base")
      ->capture_default_str()->check(tessel::trainer::positiveNumber());
  app.add_option("--norm-eps", cfg.norm_eps, "epsilon of the RMS norms")
      ->capture_default_str()->check(tessel::trainer::positiveNumber());
  std::string mode = "forward";
  app.add_option("--mode", mode, "forward: one f64 reference forward pass; train: --steps native AdamW steps")
      ->capture_default_str()->check(CLI::IsMember({"forward", "train"}));
  tessel::test::TrainExportFlags exportFlags;
  tessel::test::addTrainExportFlags(app, exportFlags);
  std::string out;
  app.add_option("--out", out, "output file (.safetensors)")->required();

  return tessel::trainer::runMain(app, argc, argv, [&] {
    tessel::TextDataset data(flags.data);
    data.requireSequenceLength(flags.seq);
    cfg.layers = flags.layers;
    cfg.channels = flags.channels;
    cfg.heads = flags.heads;
    cfg.seq = flags.seq;

    llama::Llama model(cfg);
    const bool forward = mode == "forward";
    llama::build(model, flags.batch, /*withLogits=*/forward);
    tessel::Program program = model.compile({.optimizer = "adamw"});
    tessel::SafeTensorsFile file =
        forward ? tessel::test::forwardExport(program, data, flags.batch, flags.seq, flags.seed)
                : tessel::test::trainExport(program, data, flags.batch, flags.seq, flags.seed, flags.steps,
                                            exportFlags);
    file.metadata.insert({{"layers", std::to_string(cfg.layers)},
                          {"channels", std::to_string(cfg.channels)},
                          {"heads", std::to_string(cfg.heads)},
                          {"kv_heads", std::to_string(cfg.kv_heads)},
                          {"hidden", std::to_string(cfg.hidden)},
                          {"seq", std::to_string(cfg.seq)},
                          {"vocab", std::to_string(cfg.vocab)},
                          {"rope_theta", fmt::format("{:.17g}", cfg.rope_theta)},
                          {"norm_eps", fmt::format("{:.17g}", cfg.norm_eps)}});
    tessel::writeSafeTensors(out, file);
    std::vector<double> loss = file.tensors.at("loss").toF64();
    fmt::print("tessel-llama-export: {} L={} C={} NH={} NKV={} H={} T={} B={}: loss {:.6f}{}, wrote '{}'\n", mode,
               cfg.layers, cfg.channels, cfg.heads, cfg.kv_heads, cfg.hidden, cfg.seq, flags.batch, loss.front(),
               forward ? std::string() : fmt::format(" -> {:.6f} after {} steps", loss.back(), flags.steps), out);
    return 0;
  });
}
