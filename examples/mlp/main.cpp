// tessel-mlp: trains the MLP of model.h on Fashion-MNIST and reports test accuracy.
//
// One epoch by default (--steps 0: as many steps as one pass over the training images);
// the training order is the distributed sampler's seeded shuffle per epoch
// (runtime/train/ImageBatches.h), so `--plan dp=N` under `mpirun -np N` trains each rank on
// its rows of the same global batches. The trainer (dsl/trainer/App.h) gives it every
// standard flag: --plan, --device, --emit-bundle, --precision, --log-json, --explain.
#include "examples/mlp/model.h"

#include "dsl/trainer/App.h"
#include "runtime/data/Idx.h"
#include "runtime/train/ImageBatches.h"

#include <algorithm>
#include <fmt/format.h>

#include <optional>
#include <memory>

int main(int argc, char** argv) {
  CLI::App app{"tessel-mlp: an MLP classifier trained on Fashion-MNIST", "tessel-mlp"};
  tessel::trainer::Flags flags;
  flags.batch = 64;
  flags.steps = 0;
  tessel::trainer::TrainOptions train;
  train.schedule = "constant";
  tessel::trainer::TrainerApp trainer(app, flags, train,
                                      {.defaultPath = "/usr/share/datasets/fashion-mnist",
                                       .help = "folder with Fashion-MNIST's {train,t10k}-*-idx*-ubyte.gz",
                                       .minSteps = 0,
                                       .stepsHelp = "training steps (0: one epoch)"});
  mlp::Config cfg;
  app.add_option("--hidden", cfg.hidden, "hidden width")->capture_default_str()
      ->check(tessel::trainer::integerIn(1, int64_t{1} << 16));

  auto trainSet = std::make_shared<tessel::ImageDataset>();
  auto test = std::make_shared<tessel::ImageDataset>();
  return trainer.run(argc, argv, [&] {
    *trainSet = tessel::readFashionMnist(flags.data, tessel::Split::Train);
    *test = tessel::readFashionMnist(flags.data, tessel::Split::Val);
    cfg.pixels = test->pixels();
    tessel::trainer::requireImageBatch({trainSet.get(), test.get(), flags.batch});
    tessel::trainer::ModelRecipe r;
    r.model = "mlp";
    r.config = {{"pixels", cfg.pixels}, {"hidden", cfg.hidden}, {"classes", cfg.classes}};
    r.describe = fmt::format("{} -> {} -> {} -> {}, B={}", cfg.pixels, cfg.hidden, cfg.hidden, cfg.classes,
                             flags.batch);
    r.compile = [&](const tessel::CompileOptions& o) {
      mlp::Mlp model(cfg);
      mlp::build(model, flags.batch);
      return model.compile(o);
    };
    r.data = [&](const tessel::trainer::DataShard& s, tessel::trainer::TrainOptions& t) {
      const tessel::trainer::ImageBatchOptions o{trainSet.get(), test.get(), s.batch, s.rank, s.world,
                                                 s.microsteps,   s.seed,     s.firstStep};
      if (t.steps == 0) t.steps = trainSet->count / s.batch;  // one epoch; the remainder is dropped
      return tessel::trainer::imageRankData(o, flags.data);
    };
    // Test accuracy over every whole local batch of the test set, on rank 0 (@forward takes
    // the rows of one rank and microstep). A sharded program (tensor parallelism) holds only
    // this rank's shards: the same rows then run through an unsharded forward program with
    // the gathered parameters.
    r.report = [&](const tessel::trainer::Trained& trained) {
      const tessel::rt::Function* trainedForward = trained.executor.program().function("forward");
      const int64_t rows =
          trained.executor.program().buffers.at(static_cast<size_t>(trainedForward->inputs[0])).shape[0];
      std::optional<mlp::Mlp> evalModel;
      std::optional<tessel::Program> evalProgram;
      std::optional<tessel::NativeProgram> unsharded;
      if (trained.parameters) {
        evalModel.emplace(cfg);
        mlp::build(*evalModel, rows);
        evalProgram.emplace(evalModel->compile({.train = false}));
        unsharded = evalProgram->native(trained.native);
        unsharded->copy_parameters_from(*trained.parameters);
      }
      tessel::rt::ProgramExecutor& ex = unsharded ? unsharded->executor() : trained.executor;
      int64_t correct = 0, seen = 0;
      for (int64_t first = 0; first + rows <= test->count; first += rows) {
        std::vector<int64_t> ids(static_cast<size_t>(rows));
        for (int64_t i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = first + i;
        tessel::ImageBatch b = tessel::gatherImages(*test, ids, 0, rows);
        ex.setInput("forward", 0, b.images.data(), b.images.size() * sizeof(float));
        ex.setInput("forward", 1, b.labels.data(), b.labels.size() * sizeof(int32_t));
        ex.run("forward");
        const float* logits = static_cast<const float*>(ex.outputs("forward").at(1).data);
        for (int64_t i = 0; i < rows; ++i) {
          const float* row = logits + i * cfg.classes;
          correct += (std::max_element(row, row + cfg.classes) - row) == b.labels[static_cast<size_t>(i)];
        }
        seen += rows;
      }
      fmt::print("test accuracy: {:.2f}% ({} of {} images)\n",
                 100.0 * static_cast<double>(correct) / static_cast<double>(seen), correct, seen);
    };
    return r;
  });
}
