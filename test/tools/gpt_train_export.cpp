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
#include "dsl/trainer/Trainer.h"
#include "runtime/data/TextDataset.h"
#include "runtime/io/SafeTensors.h"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <random>
#include <stdexcept>

namespace {

/// Every trainable parameter (not optimizer state), copied out of the executor by name.
std::map<std::string, tessel::StTensor> readParameters(tessel::NativeProgram& native,
                                                       const tessel::Program& program,
                                                       const std::string& prefix) {
  tessel::rt::Executor& ex = native.executor();
  std::map<std::string, tessel::StTensor> out;
  for (const tessel::ParameterSpec& p : program.parameters()) {
    if (p.state) continue;
    int id = ex.bufferId(p.name);
    const tessel::rt::Buffer& buffer = ex.program().buffers.at(static_cast<size_t>(id));
    if (buffer.kind != tessel::rt::BufferKind::Parameter || buffer.shape != p.shape)
      throw std::logic_error(fmt::format("buffer '{}' is not a Parameter of shape [{}]", p.name,
                                         fmt::join(p.shape, ", ")));
    const float* data = ex.data(id);
    std::vector<float> values(data, data + buffer.numel());
    out.emplace(prefix + p.name, tessel::StTensor::fromF32(p.shape, values));
  }
  return out;
}

std::string exact(double v) { return fmt::format("{:.17g}", v); }

}  // namespace

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
  tessel::trainer::TrainOptions train;
  train.schedule = "constant";
  train.warmup = 0;
  train.weightDecay = 0.1;
  app.add_option("--lr", train.lr, "constant learning rate")
      ->capture_default_str()->check(tessel::trainer::positiveNumber());
  app.add_option("--weight-decay", train.weightDecay, "decoupled weight decay of matrices")
      ->capture_default_str()->check(tessel::trainer::nonNegativeNumber());
  app.add_option("--grad-clip", train.gradClip, "global gradient-norm threshold (0: off)")
      ->capture_default_str()->check(tessel::trainer::nonNegativeNumber());
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads (0: all cores)")->check(tessel::trainer::integerIn(0, 1024));
  std::string cacheDir;
  app.add_option("--cache-dir", cacheDir, "kernel cache folder (default: $TESSEL_CACHE_DIR or "
                 "~/.cache/tessel)")->type_name("DIR");
  std::string out;
  app.add_option("--out", out, "output file (.safetensors)")->required();

  return tessel::trainer::runMain(app, argc, argv, [&] {
    tessel::TextDataset data(flags.data);
    data.requireSequenceLength(flags.seq);

    gpt::Config cfg{flags.layers, flags.channels, flags.heads, flags.seq, 256};
    gpt::GPT model(cfg);
    gpt::build(model, flags.batch);
    tessel::Program program = model.compile({.optimizer = "adamw"});
    tessel::NativeProgram native =
        program.native({.threads = threads, .cache_dir = cacheDir, .seed = flags.seed});

    tessel::SafeTensorsFile file;
    file.tensors = readParameters(native, program, "init/");

    // Train: record every batch as it is fed. The validation pass train() runs after the
    // last step only reads the parameters; one batch keeps it cheap.
    const int64_t B = flags.batch, T = flags.seq, steps = flags.steps;
    std::vector<int32_t> tokens, targets;
    tokens.reserve(static_cast<size_t>(steps * B * T));
    targets.reserve(static_cast<size_t>(steps * B * T));
    std::mt19937_64 rng(flags.seed);
    auto feed = [&](const tessel::TokenBatch& b, tessel::rt::ProgramExecutor& ex, const std::string& fn) {
      ex.setInput(fn, 0, b.tokens.data(), b.tokens.size() * sizeof(int32_t));
      ex.setInput(fn, 1, b.targets.data(), b.targets.size() * sizeof(int32_t));
    };
    auto trainBatch = [&](tessel::rt::ProgramExecutor& ex, const std::string& fn, size_t) {
      tessel::TokenBatch b = data.sample(tessel::Split::Train, B, T, rng);
      tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
      targets.insert(targets.end(), b.targets.begin(), b.targets.end());
      feed(b, ex, fn);
    };
    tessel::trainer::ValidationFeeder valBatch =
        tessel::trainer::textValFeeder({&data, B, T, 0, 1, 1, flags.seed});
    train.steps = steps;
    train.evalBatches = 1;
    train.tokensPerStep = B * T;
    std::vector<tessel::trainer::StepStats> stats =
        tessel::trainer::train(native, program, train, trainBatch, valBatch);
    if (static_cast<int64_t>(stats.size()) != steps)
      throw std::logic_error(fmt::format("train() ran {} steps, not {}", stats.size(), steps));

    std::map<std::string, tessel::StTensor> after = readParameters(native, program, "final/");
    file.tensors.insert(after.begin(), after.end());
    std::vector<double> loss, gradNorm;
    for (const auto& s : stats) {
      loss.push_back(s.loss);
      gradNorm.push_back(s.gradNorm);
    }
    tessel::Shape batchShape{steps, B, T};
    file.tensors.emplace("tokens", tessel::StTensor::fromI32(batchShape, tokens));
    file.tensors.emplace("targets", tessel::StTensor::fromI32(batchShape, targets));
    file.tensors.emplace("loss", tessel::StTensor::fromF64({steps}, loss));
    file.tensors.emplace("grad_norm", tessel::StTensor::fromF64({steps}, gradNorm));

    // The hyper-parameters as @train_step received them: f32 scalars (Trainer.cpp), so the
    // values written here are the f32-rounded ones a replay must use.
    auto f32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };
    bool clips = train.gradClip > 0 && std::isfinite(train.gradClip);
    file.metadata = {{"layers", std::to_string(cfg.layers)},
                     {"channels", std::to_string(cfg.channels)},
                     {"heads", std::to_string(cfg.heads)},
                     {"seq", std::to_string(cfg.seq)},
                     {"vocab", std::to_string(cfg.vocab)},
                     {"batch", std::to_string(B)},
                     {"seed", std::to_string(flags.seed)},
                     {"steps", std::to_string(steps)},
                     {"data", data.path()},
                     {"optimizer", "adamw"},
                     {"schedule", "constant"},
                     {"warmup", "0"},
                     {"lr", exact(f32(train.lr))},
                     {"beta1", exact(f32(train.beta1))},
                     {"beta2", exact(f32(train.beta2))},
                     {"eps", exact(f32(train.eps))},
                     {"weight_decay", exact(f32(train.weightDecay))},
                     {"max_grad_norm", clips ? exact(f32(train.gradClip)) : "inf"}};
    tessel::writeSafeTensors(out, file);
    fmt::print("tessel-gpt-train-export: L={} C={} NH={} T={} B={}, {} steps: loss {:.6f} -> "
               "{:.6f}, wrote '{}'\n",
               cfg.layers, cfg.channels, cfg.heads, cfg.seq, B, steps, loss.front(), loss.back(),
               out);
    return 0;
  });
}
