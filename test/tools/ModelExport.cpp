// The export tools' shared part; see ModelExport.h.
#include "test/tools/ModelExport.h"

#include "dsl/trainer/Flags.h"
#include "dsl/trainer/Trainer.h"
#include "runtime/train/FlagChecks.h"
#include "runtime/train/TextBatches.h"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

namespace tessel::test {
namespace {

/// Every trainable parameter (not optimizer state), copied out of the executor by name.
std::map<std::string, StTensor> readParameters(NativeProgram& native, const Program& program,
                                               const std::string& prefix) {
  rt::Executor& ex = native.executor();
  std::map<std::string, StTensor> out;
  for (const ParameterSpec& p : program.parameters()) {
    if (p.state) continue;
    int id = ex.bufferId(p.name);
    const rt::Buffer& buffer = ex.program().buffers.at(static_cast<size_t>(id));
    if (buffer.kind != rt::BufferKind::Parameter || buffer.shape != p.shape)
      throw std::logic_error(fmt::format("buffer '{}' is not a Parameter of shape [{}]", p.name,
                                         fmt::join(p.shape, ", ")));
    const float* data = ex.data(id);
    out.emplace(prefix + p.name, StTensor::fromF32(p.shape, std::vector<float>(data, data + buffer.numel())));
  }
  return out;
}

std::string exact(double v) { return fmt::format("{:.17g}", v); }

}  // namespace

void addTrainExportFlags(CLI::App& app, TrainExportFlags& flags) {
  trainer::TrainOptions& train = flags.train;
  train.schedule = "constant";
  train.warmup = 0;
  train.weightDecay = 0.1;
  app.add_option("--lr", train.lr, "constant learning rate")
      ->capture_default_str()->check(trainer::positiveNumber());
  app.add_option("--weight-decay", train.weightDecay, "decoupled weight decay of matrices")
      ->capture_default_str()->check(trainer::nonNegativeNumber());
  app.add_option("--grad-clip", train.gradClip, "global gradient-norm threshold (0: off)")
      ->capture_default_str()->check(trainer::nonNegativeNumber());
  app.add_option("--threads", flags.threads, "CPU threads (0: all cores)")->check(trainer::integerIn(0, 1024));
  app.add_option("--cache-dir", flags.cacheDir, "kernel cache folder (default: $TESSEL_CACHE_DIR or "
                 "~/.cache/tessel)")->type_name("DIR");
}

SafeTensorsFile forwardExport(const Program& program, const TextDataset& data, int64_t batch, int64_t seq,
                              uint64_t seed) {
  auto params = trainer::initParameters(program, seed);
  std::mt19937_64 rng(seed);
  TokenBatch b = data.sample(Split::Val, batch, seq, rng);
  Shape shape{batch, seq};
  std::vector<ref::Tensor> inputs{ref::Tensor(shape, std::vector<double>(b.tokens.begin(), b.tokens.end())),
                                  ref::Tensor(shape, std::vector<double>(b.targets.begin(), b.targets.end()))};
  std::vector<ref::Tensor> outputs = program.run_reference(params, inputs);

  SafeTensorsFile file;
  // The interpreter holds the f32 parameters as doubles; converting back is exact.
  for (const auto& [name, tensor] : params)
    file.tensors.emplace(name, StTensor::fromF32(tensor.shape, std::vector<float>(tensor.data.begin(),
                                                                                   tensor.data.end())));
  file.tensors.emplace("tokens", StTensor::fromI32(shape, b.tokens));
  file.tensors.emplace("targets", StTensor::fromI32(shape, b.targets));
  const auto& names = program.outputs();
  for (size_t i = 0; i < names.size(); ++i) {
    if (file.tensors.count(names[i]))
      throw std::logic_error("output '" + names[i] + "' clashes with a parameter name");
    file.tensors.emplace(names[i], StTensor::fromF64(outputs[i].shape, outputs[i].data));
  }
  file.metadata = {{"batch", std::to_string(batch)}, {"seed", std::to_string(seed)}, {"data", data.path()}};
  return file;
}

SafeTensorsFile trainExport(const Program& program, const TextDataset& data, int64_t batch, int64_t seq,
                            uint64_t seed, int64_t steps, const TrainExportFlags& flags) {
  NativeProgram native = program.native({.threads = flags.threads, .cache_dir = flags.cacheDir, .seed = seed});
  SafeTensorsFile file;
  file.tensors = readParameters(native, program, "init/");

  // Train: record every batch as it is fed. The validation pass train() runs after the last
  // step only reads the parameters; one batch keeps it cheap.
  std::vector<int32_t> tokens, targets;
  tokens.reserve(static_cast<size_t>(steps * batch * seq));
  targets.reserve(static_cast<size_t>(steps * batch * seq));
  std::mt19937_64 rng(seed);
  auto trainBatch = [&](rt::ProgramExecutor& ex, const std::string& fn, size_t) {
    TokenBatch b = data.sample(Split::Train, batch, seq, rng);
    tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
    targets.insert(targets.end(), b.targets.begin(), b.targets.end());
    ex.setInput(fn, 0, b.tokens.data(), b.tokens.size() * sizeof(int32_t));
    ex.setInput(fn, 1, b.targets.data(), b.targets.size() * sizeof(int32_t));
  };
  trainer::ValidationFeeder valBatch = trainer::textValFeeder({&data, batch, seq, 0, 1, 1, seed});
  trainer::TrainOptions train = flags.train;
  train.steps = steps;
  train.evalBatches = 1;
  train.tokensPerStep = batch * seq;
  std::vector<trainer::StepStats> stats = trainer::train(native, program, train, trainBatch, valBatch);
  if (static_cast<int64_t>(stats.size()) != steps)
    throw std::logic_error(fmt::format("train() ran {} steps, not {}", stats.size(), steps));

  std::map<std::string, StTensor> after = readParameters(native, program, "final/");
  file.tensors.insert(after.begin(), after.end());
  std::vector<double> loss, gradNorm;
  for (const auto& s : stats) {
    loss.push_back(s.loss);
    gradNorm.push_back(s.gradNorm);
  }
  Shape batchShape{steps, batch, seq};
  file.tensors.emplace("tokens", StTensor::fromI32(batchShape, tokens));
  file.tensors.emplace("targets", StTensor::fromI32(batchShape, targets));
  file.tensors.emplace("loss", StTensor::fromF64({steps}, loss));
  file.tensors.emplace("grad_norm", StTensor::fromF64({steps}, gradNorm));

  // The hyper-parameters as @train_step received them: f32 scalars (Trainer.cpp), so the
  // values written here are the f32-rounded ones a replay must use.
  auto f32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  bool clips = train.gradClip > 0 && std::isfinite(train.gradClip);
  file.metadata = {{"batch", std::to_string(batch)},
                   {"seed", std::to_string(seed)},
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
  return file;
}

}  // namespace tessel::test
