// What the lab trainers share: the synthetic classification data (runtime/data/
// SyntheticDataset.h) as the trainer's data, with its flags, and the trainer around a model.
//
// Every lab trains on a seeded Gaussian mixture: --samples training rows and --held-out rows
// of --features f32 features, labels in [0, --classes). Both are drawn from --seed, so every
// rank holds the same data (the trainer checks it) and picks its rows of each global batch
// through the distributed sampler, which reshuffles every epoch (runtime/train/ImageBatches.h).
// The validation loss is the mean cross-entropy over the held-out rows.
#pragma once

#include "dsl/trainer/App.h"
#include "examples/labs/models.h"  // Sizes
#include "runtime/data/SyntheticDataset.h"

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace lab {

/// --data's only value: the labs draw their data, they read none.
inline constexpr const char* kSynthetic = "synthetic";

/// The data flags of a lab and the splits they draw.
struct SyntheticData {
  tessel::SyntheticOptions options;
  std::shared_ptr<tessel::SyntheticSplits> splits = std::make_shared<tessel::SyntheticSplits>();

  /// Registers --samples, --held-out, --features, --classes and --noise on `app`.
  void addFlags(CLI::App& app) {
    using tessel::trainer::integerIn;
    // The data's own ranges (SyntheticDataset.h), which a bundle's config is held to as well.
    app.add_option("--samples", options.samples, "synthetic training samples N")
        ->capture_default_str()->check(integerIn(1, tessel::kMaxSyntheticSamples));
    app.add_option("--held-out", options.heldOut, "synthetic held-out samples (the validation set)")
        ->capture_default_str()->check(integerIn(1, tessel::kMaxSyntheticSamples));
    app.add_option("--features", options.features, "features F per sample")
        ->capture_default_str()->check(integerIn(1, tessel::kMaxSyntheticFeatures));
    app.add_option("--classes", options.classes, "classes K")
        ->capture_default_str()->check(integerIn(2, tessel::kMaxSyntheticClasses));
    app.add_option("--noise", options.noise, "standard deviation of the features around their class centre")
        ->capture_default_str()->check(tessel::trainer::numberIn(0, tessel::kMaxSyntheticDeviation));
  }

  /// The recipe's data function: draws the splits from the shard's seed and feeds this rank's
  /// rows of every global batch. `data` is --data, which must be "synthetic".
  tessel::trainer::RankData rankData(const std::string& data, const tessel::trainer::DataShard& s,
                                     tessel::trainer::TrainOptions&) {
    if (data != kSynthetic)
      throw tessel::DataError(fmt::format("--data '{}': the labs train on their synthetic data only (--data {})",
                                          data, kSynthetic));
    return tessel::trainer::syntheticRankData(
        options, *splits, {.batch = s.batch, .rank = s.rank, .world = s.world, .microsteps = s.microsteps,
                           .seed = s.seed, .firstStep = s.firstStep});
  }

  /// The bundle's "config" entries of the data.
  nlohmann::json config() const {
    return tessel::trainer::syntheticConfig(options);
  }
};

/// The trainer's --data flag of a lab.
inline tessel::trainer::DataFlag dataFlag() {
  return {.defaultPath = kSynthetic,
          .help = "the data: 'synthetic' only (features and labels drawn from --seed; see --samples)"};
}

/// The defaults a lab gives the trainer's flags (shown by --help).
struct Defaults {
  int64_t batch = 32;
  int64_t steps = 93;  // three epochs of 1000 samples in batches of 32
  double lr = 1e-3;
  double weightDecay = 0.01;  // torch.optim.AdamW's default
  tessel::SyntheticOptions data;  // the data flags' defaults
};

/// A lab's trainer: the trainer application of dsl/trainer/App.h (every standard flag: --plan,
/// --precision, --explain, --checkpoint-dir, --export-params, ...) on the synthetic data, with
/// AdamW at a constant learning rate and every held-out batch in each evaluation.
class Lab {
 public:
  Lab(CLI::App& app, const Defaults& defaults) : trainer_(app, setDefaults(defaults), train_, dataFlag()) {
    data.options = defaults.data;
    data.addFlags(app);
    // The labs' models are tiny: one thread per rank is fastest. 93 steps of the DDP lab took
    // 0.1 s with one thread and 0.8 s with two on a 2-core machine (a team's start and barrier
    // per kernel outweigh the work), and far longer when ranks' teams contend for the cores.
    app.get_option("--threads")->default_val(1);
  }

  /// Parses the flags and trains the model `compile` builds on the global batch (with its
  /// name, description and config entries); see TrainerApp::run.
  int run(int argc, char** argv, const std::string& model, const std::function<std::string()>& describe,
          const std::function<nlohmann::json()>& config,
          const std::function<tessel::Program(const tessel::CompileOptions&)>& compile) {
    return trainer_.run(argc, argv, [&] {
      tessel::trainer::ModelRecipe r;
      r.model = model;
      r.config = config();
      r.config.update(data.config());
      r.describe = fmt::format("{}, B={}", describe(), flags.batch);
      r.compile = [compile](const tessel::CompileOptions& o) {
        refusePipeline(o.plan);
        return compile(o);
      };
      r.communication = communication;
      r.data = [this](const tessel::trainer::DataShard& s, tessel::trainer::TrainOptions& t) {
        return data.rankData(flags.data, s, t);
      };
      return r;
    });
  }

  /// Trains the MLP classifier F -> H -> GELU -> K (models.h, Classifier) as `model`.
  int runClassifier(int argc, char** argv, const std::string& model) {
    return run(
        argc, argv, model,
        [this] {
          const Sizes s = sizes();
          return fmt::format("{} -> {} -> GELU -> {}", s.features, s.hidden, s.classes);
        },
        [this] { return nlohmann::json{{"hidden", size.hidden}}; },
        [this](const tessel::CompileOptions& o) {
          Classifier model(sizes());
          build(model, flags.batch);
          return model.compile(o);
        });
  }

  /// The model's sizes: --features and --classes from the data flags, the rest from `size`.
  Sizes sizes() const {
    Sizes s = size;
    s.features = data.options.features;
    s.classes = data.options.classes;
    return s;
  }

  /// Registers --hidden (into size.hidden) with `help`.
  void addHiddenFlag(CLI::App& app, const std::string& help) {
    app.add_option("--hidden", size.hidden, help)->capture_default_str()
        ->check(tessel::trainer::integerIn(1, int64_t{1} << 16));
  }

  tessel::trainer::Flags flags;
  SyntheticData data;
  Sizes size;  // the model's sizes from its own flags (sizes() adds the data's)
  /// Optional: the closed form of a step's collective payload, which --explain compares with
  /// the compiled program's (ModelRecipe::communication).
  std::function<std::optional<tessel::trainer::CommunicationFormula>(const tessel::Plan&)> communication;

 private:
  tessel::trainer::Flags& setDefaults(const Defaults& d) {
    flags.batch = d.batch;
    flags.steps = d.steps;
    train_.lr = d.lr;
    train_.weightDecay = d.weightDecay;
    train_.schedule = "constant";
    train_.evalBatches = 0;
    return flags;
  }

  /// A pipeline splits a model's layers into stages, and its @forward must return the loss
  /// alone; the labs' models are two or three layers and return their logits too, so a pp
  /// plan is refused at its pp item, naming the plans the labs do take.
  static void refusePipeline(const tessel::Plan& plan) {
    if (plan.pp() <= 1) return;
    const tessel::PlanSite& site = plan.pipeline_site();
    throw tessel::ModelError(tessel::Diagnostic{
        site.file, site.line, site.column, "",
        fmt::format("the labs do not take a pipeline plan (pp={}): their models are too few layers to "
                    "split into stages and return their logits besides the loss; use dp, fsdp or tp axes",
                    plan.pp())});
  }

  tessel::trainer::TrainOptions train_;
  tessel::trainer::TrainerApp trainer_;
};

}  // namespace lab
