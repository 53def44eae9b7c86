// tessel-mlp: trains the MLP of model.h on Fashion-MNIST and reports test accuracy.
//
// One epoch by default (--steps 0: as many steps as one pass over the training images);
// the training order is a seeded shuffle per epoch. Runs as generated C++ kernels and
// OpenBLAS GEMMs.
#include "examples/mlp/model.h"

#include "dsl/trainer/Flags.h"
#include "dsl/trainer/Trainer.h"
#include "runtime/data/Idx.h"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>
#include <random>

namespace {

std::vector<int64_t> shuffled(int64_t n, std::mt19937_64& rng) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
  return order;
}

void feed(tessel::rt::ProgramExecutor& ex, const std::string& fn, const tessel::ImageBatch& b) {
  ex.setInput(fn, 0, b.images.data(), b.images.size() * sizeof(float));
  ex.setInput(fn, 1, b.labels.data(), b.labels.size() * sizeof(int32_t));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel-mlp: an MLP classifier trained on Fashion-MNIST", "tessel-mlp"};
  tessel::trainer::Flags flags;
  flags.batch = 64;
  flags.steps = 0;
  tessel::trainer::addCommonFlags(app, flags, "/usr/share/datasets/fashion-mnist",
                                  "folder with Fashion-MNIST's {train,t10k}-*-idx*-ubyte.gz",
                                  /*minSteps=*/0, "training steps (0: one epoch)");
  mlp::Config cfg;
  app.add_option("--hidden", cfg.hidden, "hidden width")->capture_default_str()
      ->check(tessel::trainer::integerIn(1, int64_t{1} << 16));
  tessel::trainer::TrainOptions train;
  train.schedule = "constant";
  tessel::trainer::addTrainFlags(app, train);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads (0: all cores)")->check(tessel::trainer::integerIn(0, 1024));

  return tessel::trainer::runMain(app, argc, argv, [&] {
    tessel::trainer::requireSingleRankPlan(flags, app.get_name());
    tessel::trainer::resolveDeviceFlag(flags, app.get_name());
    tessel::ImageDataset trainSet = tessel::readFashionMnist(flags.data, tessel::Split::Train);
    tessel::ImageDataset test = tessel::readFashionMnist(flags.data, tessel::Split::Val);
    cfg.pixels = test.pixels();
    if (flags.batch > test.count || flags.batch > trainSet.count)
      throw std::runtime_error(fmt::format(
          "--batch {} is larger than the data: {} training and {} test images", flags.batch,
          trainSet.count, test.count));
    mlp::Mlp model(cfg);
    mlp::build(model, flags.batch);
    tessel::Program program =
        model.compile({.dump_ir_dir = flags.dumpIr,
                       .optimizer = train.optimizer,
                       .precision = flags.precisionType()});
    tessel::NativeProgram native = program.native({.threads = threads, .seed = flags.seed});
    fmt::print("tessel-mlp: {} -> {} -> {} -> {}, B={}, {} parameters, {} training and {} test "
               "images\n",
               cfg.pixels, cfg.hidden, cfg.hidden, cfg.classes, flags.batch,
               tessel::trainer::parameterCount(program), trainSet.count, test.count);

    const int64_t perEpoch = trainSet.count / flags.batch;  // the remainder is dropped
    std::mt19937_64 rng(flags.seed);
    std::vector<int64_t> order = shuffled(trainSet.count, rng);
    int64_t position = 0;
    auto trainFeeder = [&](tessel::rt::ProgramExecutor& ex, const std::string& fn) {
      if (position == perEpoch) {  // a new epoch: a new shuffle
        order = shuffled(trainSet.count, rng);
        position = 0;
      }
      feed(ex, fn, tessel::gatherImages(trainSet, order, position++ * flags.batch, flags.batch));
    };
    std::vector<int64_t> testOrder(test.count);
    std::iota(testOrder.begin(), testOrder.end(), 0);
    // Validation: the test set in file order, the same whole batches on every evaluation.
    tessel::trainer::ValidationFeeder testFeeder = tessel::trainer::orderedValidation(
        test.count, flags.batch, 0, 1, 1, "test images",
        [&](tessel::rt::ProgramExecutor& ex, const std::string& fn, int64_t first, int64_t count) {
          feed(ex, fn, tessel::gatherImages(test, testOrder, first, count));
        });
    train.steps = flags.steps > 0 ? flags.steps : perEpoch;
    train.tokensPerStep = flags.batch;
    train.throughputUnit = "img/s";
    tessel::trainer::train(native, program, train, trainFeeder, testFeeder);

    // Test accuracy over every whole batch of the test set.
    tessel::rt::Executor& ex = native.executor();
    int64_t correct = 0, seen = 0;
    for (int64_t first = 0; first + flags.batch <= test.count; first += flags.batch) {
      tessel::ImageBatch b = tessel::gatherImages(test, testOrder, first, flags.batch);
      feed(ex, "forward", b);
      ex.run("forward");
      const float* logits = static_cast<const float*>(ex.outputs("forward").at(1).data);
      for (int64_t i = 0; i < flags.batch; ++i) {
        const float* row = logits + i * cfg.classes;
        correct += (std::max_element(row, row + cfg.classes) - row) == b.labels[i];
      }
      seen += flags.batch;
    }
    fmt::print("test accuracy: {:.2f}% ({} of {} images)\n",
               100.0 * static_cast<double>(correct) / static_cast<double>(seen), correct, seen);
    return 0;
  });
}
