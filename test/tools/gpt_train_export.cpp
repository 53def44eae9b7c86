// tessel-gpt-train-export: trains the GPT of examples/gpt/model.h for a few AdamW steps on
// the native path (generated f32 kernels + OpenBLAS) and writes everything an independent
// implementation needs to replay the run into one safetensors file.
//
// Promise: the file holds
//   - "init/<param>" for every trainable parameter under its Tessel name, as F32: the exact
//     bytes of the executor's Parameter buffers before the first step;
//   - "final/<param>" (F32): the same buffers after the last step;
//   - "tokens" and "targets" [steps, B, T] as I32: the batch each step trained on, drawn
//     from the train split with std::mt19937_64(seed);
//   - "loss" and "grad_norm" [steps] as F64: what @train_step returned at each step (the
//     loss of the parameters before the step, the global gradient norm before clipping);
//   - metadata, all strings: the config (layers, channels, heads, seq, vocab, batch, seed,
//     steps), the data path, and the hyper-parameters exactly as fed to @train_step (lr,
//     beta1, beta2, eps, weight_decay, max_grad_norm ("inf": no clipping), schedule
//     "constant", warmup 0), printed with 17 significant digits.
// The learning rate is constant (no warmup, no decay) so a replay needs no schedule.
// test/python/test_gpt_train_vs_torch.py replays the run with torch.optim.AdamW.
#include "examples/gpt/model.h"

#include "dsl/trainer/Flags.h"
#include "test/tools/ModelExport.h"

#include <fmt/format.h>

int main(int argc, char** argv) {
  CLI::App app{"tessel-gpt-train-export: a few native AdamW steps of the GPT, exported as "
               "safetensors",
               "tessel-gpt-train-export"};
  tessel::trainer::Flags flags;
  flags.layers = 2;
  flags.channels = 64;
  flags.heads = 4;
  flags.seq = 32;
  flags.batch = 4;
  flags.steps = 10;
  tessel::trainer::addCommonFlags(app, flags, "/usr/share/games/fortunes",
                                  "text file to sample the batches from");
  tessel::trainer::addTransformerFlags(app, flags);
  tessel::test::TrainExportFlags exportFlags;
  tessel::test::addTrainExportFlags(app, exportFlags);
  std::string out;
  app.add_option("--out", out, "output file (.safetensors)")->required();

  return tessel::trainer::runMain(app, argc, argv, [&] {
    tessel::TextDataset data(flags.data);
    data.requireSequenceLength(flags.seq);

    gpt::Config cfg{flags.layers, flags.channels, flags.heads, flags.seq, 256};
    gpt::GPT model(cfg);
    gpt::build(model, flags.batch);
    tessel::Program program = model.compile({.optimizer = "adamw"});

    tessel::SafeTensorsFile file =
        tessel::test::trainExport(program, data, flags.batch, flags.seq, flags.seed, flags.steps, exportFlags);
    file.metadata.insert({{"layers", std::to_string(cfg.layers)},
                          {"channels", std::to_string(cfg.channels)},
                          {"heads", std::to_string(cfg.heads)},
                          {"seq", std::to_string(cfg.seq)},
                          {"vocab", std::to_string(cfg.vocab)}});
    tessel::writeSafeTensors(out, file);
    std::vector<double> loss = file.tensors.at("loss").toF64();
    fmt::print("tessel-gpt-train-export: L={} C={} NH={} T={} B={}, {} steps: loss {:.6f} -> "
               "{:.6f}, wrote '{}'\n",
               cfg.layers, cfg.channels, cfg.heads, cfg.seq, flags.batch, flags.steps, loss.front(),
               loss.back(), out);
    return 0;
  });
}
