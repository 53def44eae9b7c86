// tessel-gpt-forward-export: runs one forward pass of the GPT of examples/gpt/model.h on the
// f64 reference interpreter and writes everything an independent implementation needs to
// reproduce it into one safetensors file.
//
// Promise: the file holds
//   - every parameter under its Tessel name ("wte.weight", "blocks.0.attn.qkv.weight", ...)
//     as F32; the values are exact, since initParameters() rounds them to f32 first;
//   - "tokens" and "targets" [B, T] as I32 (one validation batch of the data file);
//   - "logits" [B, T, V] and "loss" (scalar) as F64, straight from the f64 interpreter;
//   - metadata: the config (layers, channels, heads, seq, vocab, batch, seed) and the data
//     path, all as strings.
// test/python/test_gpt_forward_vs_torch.py checks these against PyTorch.
#include "examples/gpt/model.h"

#include "dsl/trainer/Flags.h"
#include "test/tools/ModelExport.h"

#include <fmt/format.h>

int main(int argc, char** argv) {
  CLI::App app{"tessel-gpt-forward-export: one GPT forward pass, exported as safetensors",
               "tessel-gpt-forward-export"};
  tessel::trainer::Flags flags;
  tessel::trainer::addCommonFlags(app, flags, "/usr/share/games/fortunes", "text file to sample the batch from");
  tessel::trainer::addTransformerFlags(app, flags);
  std::string out;
  app.add_option("--out", out, "output file (.safetensors)")->required();

  return tessel::trainer::runMain(app, argc, argv, [&] {
    tessel::TextDataset data(flags.data);
    data.requireSequenceLength(flags.seq);

    gpt::Config cfg{flags.layers, flags.channels, flags.heads, flags.seq, 256};
    gpt::GPT model(cfg);
    gpt::build(model, flags.batch, /*withLogits=*/true);
    tessel::Program program = model.compile();

    tessel::SafeTensorsFile file = tessel::test::forwardExport(program, data, flags.batch, flags.seq, flags.seed);
    file.metadata.insert({{"layers", std::to_string(cfg.layers)},
                          {"channels", std::to_string(cfg.channels)},
                          {"heads", std::to_string(cfg.heads)},
                          {"seq", std::to_string(cfg.seq)},
                          {"vocab", std::to_string(cfg.vocab)}});
    tessel::writeSafeTensors(out, file);
    fmt::print("tessel-gpt-forward-export: L={} C={} NH={} T={} B={}: loss {:.6f}, wrote '{}'\n",
               cfg.layers, cfg.channels, cfg.heads, cfg.seq, flags.batch,
               file.tensors.at("loss").toF64().at(0), out);
    return 0;
  });
}
