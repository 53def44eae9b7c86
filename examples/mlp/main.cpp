// tessel-mlp: builds the MLP of model.h, compiles it and runs it on Fashion-MNIST.
// Until training arrives, --steps N evaluates the forward loss and accuracy of the freshly
// initialised model on N test batches. At init the loss is close to ln(10) = 2.303 and the
// accuracy close to chance (10%).
#include "examples/mlp/model.h"

#include "dsl/trainer/Flags.h"
#include "runtime/data/Idx.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>
#include <random>

int main(int argc, char** argv) {
  CLI::App app{"tessel-mlp: an MLP classifier on Fashion-MNIST", "tessel-mlp"};
  tessel::trainer::Flags flags;
  flags.batch = 64;
  tessel::trainer::addCommonFlags(app, flags, "/usr/share/datasets/fashion-mnist",
                                  "folder with Fashion-MNIST's {train,t10k}-*-idx*-ubyte.gz");
  mlp::Config cfg;
  app.add_option("--hidden", cfg.hidden, "hidden width")->capture_default_str()
      ->check(CLI::PositiveNumber);

  return tessel::trainer::runMain(app, argc, argv, [&] {
    tessel::ImageDataset test = tessel::readFashionMnist(flags.data, tessel::Split::Val);
    cfg.pixels = test.pixels();
    mlp::Mlp model(cfg);
    mlp::build(model, flags.batch);
    tessel::Program program = model.compile({.dump_ir_dir = flags.dumpIr});
    fmt::print("tessel-mlp: {} -> {} -> {} -> {}, B={}, {} parameters, {} test images\n",
               cfg.pixels, cfg.hidden, cfg.hidden, cfg.classes, flags.batch,
               tessel::trainer::parameterCount(program), test.count);

    auto params = tessel::trainer::initParameters(program, flags.seed);
    std::vector<int64_t> order(test.count);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(flags.seed);
    for (int64_t i = test.count - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);

    double lossSum = 0;
    int64_t correct = 0;
    for (int64_t step = 0; step < flags.steps; ++step) {
      tessel::ImageBatch b = tessel::gatherImages(test, order, step * flags.batch, flags.batch);
      std::vector<tessel::ref::Tensor> inputs{
          tessel::ref::Tensor({flags.batch, cfg.pixels},
                              std::vector<double>(b.images.begin(), b.images.end())),
          tessel::ref::Tensor({flags.batch}, std::vector<double>(b.labels.begin(), b.labels.end()))};
      auto out = program.run_reference(params, inputs);
      double loss = out[0].data[0];
      for (int64_t i = 0; i < flags.batch; ++i) {
        const double* row = out[1].data.data() + i * cfg.classes;
        correct += (std::max_element(row, row + cfg.classes) - row) == b.labels[i];
      }
      lossSum += loss;
      fmt::print("step {:>4}/{}: forward loss {:.4f}\n", step + 1, flags.steps, loss);
    }
    fmt::print("mean forward loss {:.4f} (ln 10 = {:.4f}), accuracy {:.1f}% over {} images\n",
               lossSum / static_cast<double>(flags.steps), std::log(10.0),
               100.0 * static_cast<double>(correct) / static_cast<double>(flags.steps * flags.batch),
               flags.steps * flags.batch);
    return 0;
  });
}
