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
#include "runtime/data/TextDataset.h"
#include "runtime/io/SafeTensors.h"

#include <fmt/format.h>
#include <random>
#include <stdexcept>

namespace {

// The interpreter holds f32 parameters as doubles; converting back is exact.
std::vector<float> toF32(const tessel::ref::Tensor& t) {
  return std::vector<float>(t.data.begin(), t.data.end());
}

}  // namespace

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

    auto params = tessel::trainer::initParameters(program, flags.seed);
    std::mt19937_64 rng(flags.seed);
    tessel::TokenBatch batch = data.sample(tessel::Split::Val, flags.batch, flags.seq, rng);
    tessel::Shape shape{flags.batch, flags.seq};
    std::vector<tessel::ref::Tensor> inputs{
        tessel::ref::Tensor(shape, std::vector<double>(batch.tokens.begin(), batch.tokens.end())),
        tessel::ref::Tensor(shape,
                            std::vector<double>(batch.targets.begin(), batch.targets.end()))};
    std::vector<tessel::ref::Tensor> outputs = program.run_reference(params, inputs);

    tessel::SafeTensorsFile file;
    for (const auto& [name, tensor] : params)
      file.tensors.emplace(name, tessel::StTensor::fromF32(tensor.shape, toF32(tensor)));
    file.tensors.emplace("tokens", tessel::StTensor::fromI32(shape, batch.tokens));
    file.tensors.emplace("targets", tessel::StTensor::fromI32(shape, batch.targets));
    const auto& names = program.outputs();
    for (size_t i = 0; i < names.size(); ++i) {
      if (file.tensors.count(names[i]))
        throw std::logic_error("output '" + names[i] + "' clashes with a parameter name");
      file.tensors.emplace(names[i],
                           tessel::StTensor::fromF64(outputs[i].shape, outputs[i].data));
    }
    file.metadata = {{"layers", std::to_string(cfg.layers)},
                     {"channels", std::to_string(cfg.channels)},
                     {"heads", std::to_string(cfg.heads)},
                     {"seq", std::to_string(cfg.seq)},
                     {"vocab", std::to_string(cfg.vocab)},
                     {"batch", std::to_string(flags.batch)},
                     {"seed", std::to_string(flags.seed)},
                     {"data", data.path()}};
    tessel::writeSafeTensors(out, file);
    fmt::print("tessel-gpt-forward-export: L={} C={} NH={} T={} B={}: loss {:.6f}, wrote '{}'\n",
               cfg.layers, cfg.channels, cfg.heads, cfg.seq, flags.batch, outputs[0].data[0], out);
    return 0;
  });
}
