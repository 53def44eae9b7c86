// The trainer front end; see Flags.h.
#include "dsl/trainer/Flags.h"

#include "runtime/Init.h"

#include <fmt/format.h>
#include <iostream>

namespace tessel::trainer {

void addCommonFlags(CLI::App& app, Flags& f, const std::string& defaultData) {
  f.data = defaultData;
  app.add_option("--data", f.data, "training data: a file, or a folder of text files")
      ->capture_default_str();
  app.add_option("--dump-ir", f.dumpIr, "write the IR after every pipeline stage into DIR");
  app.add_option("--seed", f.seed, "seed of parameter init and batch sampling")
      ->capture_default_str();
  app.add_option("--steps", f.steps, "number of batches to run")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch", f.batch, "global batch size B")
      ->capture_default_str()->check(CLI::PositiveNumber);
}

void addTransformerFlags(CLI::App& app, Flags& f) {
  app.add_option("--layers", f.layers, "transformer blocks L")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--channels", f.channels, "channels C")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--heads", f.heads, "attention heads NH (C must be divisible by NH)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seq", f.seq, "sequence length T")
      ->capture_default_str()->check(CLI::PositiveNumber);
}

std::map<std::string, ref::Tensor> initParameters(const Program& program, uint64_t seed) {
  std::map<std::string, ref::Tensor> params;
  for (const ParameterSpec& p : program.parameters()) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    InitKind kind = p.init == Init::Normal  ? InitKind::Normal
                    : p.init == Init::Zeros ? InitKind::Zeros
                                            : InitKind::Ones;
    std::vector<float> values = initParameter(n, kind, p.std, seed, p.name);
    params.emplace(p.name, ref::Tensor(p.shape, std::vector<double>(values.begin(), values.end())));
  }
  return params;
}

int64_t parameterCount(const Program& program) {
  int64_t total = 0;
  for (const ParameterSpec& p : program.parameters()) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    total += n;
  }
  return total;
}

int runMain(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return body();
  } catch (const ModelError& e) {
    std::cerr << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << app.get_name() << ": error: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace tessel::trainer
