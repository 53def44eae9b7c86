// tessel-gpt: trains the byte-level GPT of model.h on a text corpus, then samples from it.
//
// The model is compiled twice: once with a train step (autodiff + AdamW) on batch B, once
// forward-only on one sequence for sampling; both run as generated C++ kernels plus
// OpenBLAS GEMMs, and the sampler takes the trained parameters by name.
#include "examples/gpt/model.h"

#include "dsl/trainer/Flags.h"
#include "dsl/trainer/Sampling.h"
#include "dsl/trainer/Trainer.h"
#include "runtime/bundle/Bundle.h"
#include "runtime/data/TextDataset.h"
#include "runtime/exec/Collectives.h"

#include <fmt/format.h>
#include <memory>
#include <random>

int main(int argc, char** argv) {
  CLI::App app{"tessel-gpt: train a byte-level GPT on text, then sample from it", "tessel-gpt"};
  tessel::trainer::Flags flags;
  flags.layers = 4;
  flags.channels = 128;
  flags.seq = 64;
  flags.batch = 16;
  flags.steps = 300;
  tessel::trainer::addCommonFlags(app, flags, "/usr/share/games/fortunes",
                                  "text: a file, or a folder whose text files are concatenated");
  tessel::trainer::addTransformerFlags(app, flags);
  tessel::trainer::TrainOptions train;
  tessel::trainer::addTrainFlags(app, train);
  tessel::trainer::SampleOptions sample;
  tessel::trainer::addSampleFlags(app, sample);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  bool profile = false;
  app.add_flag("--profile", profile, "time every step and print where a train step's time goes");
  std::string emitBundle;
  app.add_option("--emit-bundle", emitBundle,
                 "only compile: write the train program as a bundle folder for tessel-run")
      ->type_name("DIR");

  return tessel::trainer::runMain(app, argc, argv, [&] {
    tessel::trainer::resolveDeviceFlag(flags, app.get_name());
    gpt::Config cfg{flags.layers, flags.channels, flags.heads, flags.seq, 256};

    // The ranks: one until the MPI world (runtime/comm) is wired in; the plan is checked
    // against it at startup, so `--plan dp=4` in a plain run is an error naming the flag.
    const tessel::Plan plan = tessel::trainer::planFromFlags(flags);
    const int rank = 0, world = 1;
    tessel::rt::Communicator* comm = nullptr;
    // --explain of a plan for more ranks than this process has only compiles and reports,
    // so a plan can be inspected on one machine before launching it.
    const bool explainOnly = flags.explain && plan.mesh().size() != world;
    plan.check_world_size(explainOnly ? plan.mesh().size() : world);
    const int64_t microsteps = plan.microsteps();
    if (!emitBundle.empty() && plan.dp() * microsteps > 1)
      throw std::runtime_error("--emit-bundle: bundles of data-parallel or accumulating plans are not supported "
                               "yet; use --plan dp=1 --grad-accumulation 1");

    gpt::GPT model(cfg);
    gpt::build(model, flags.batch);
    tessel::Program program =
        model.compile({.dump_ir_dir = flags.dumpIr, .optimizer = train.optimizer, .plan = plan});
    tessel::NativeOptions native{.threads = threads, .seed = flags.seed, .profile = profile};
    tessel::NativeProgram trainer = program.native(native);
    trainer.executor().setCommunicator(comm);
    if (flags.checkSchedule && comm) tessel::rt::checkCollectiveSchedule(trainer.program(), *comm);
    if (flags.explain && rank == 0) {
      fmt::print("plan: {} ({} ranks), global batch {}, {} rows per rank per microstep\n", plan.describe(), plan.mesh().size(),
                 flags.batch, flags.batch / (plan.dp() * microsteps));
      std::string report = tessel::rt::explainCollectives(trainer.program(), "train_step");
      fmt::print("{}", report.empty() ? "no collectives: the program runs on one rank\n" : report);
      if (explainOnly) return 0;
    }
    if (!emitBundle.empty()) {
      tessel::rt::BundleInfo info;
      info.model = "gpt";
      info.config = {{"layers", cfg.layers}, {"channels", cfg.channels}, {"heads", cfg.heads},
                     {"seq", cfg.seq}, {"vocab", 256}};
      info.seq = flags.seq;
      info.batch = flags.batch;
      info.optimizer = train.optimizer;
      tessel::rt::writeBundle(trainer.program(), trainer.kernel_library_path(), info, emitBundle);
      fmt::print("tessel-gpt: wrote bundle '{}' (L={} C={} NH={} T={} B={}, {} parameters); "
                 "train it with: tessel-run {}\n",
                 emitBundle, cfg.layers, cfg.channels, cfg.heads, cfg.seq, flags.batch,
                 tessel::trainer::parameterCount(program), emitBundle);
      return 0;
    }
    tessel::TextDataset data(flags.data);
    data.requireSequenceLength(flags.seq);
    fmt::print("tessel-gpt: L={} C={} NH={} T={} B={}, {} parameters, arena {:.1f} MiB, data "
               "'{}' ({} bytes)\n",
               cfg.layers, cfg.channels, cfg.heads, cfg.seq, flags.batch,
               tessel::trainer::parameterCount(program),
               static_cast<double>(trainer.arena_bytes()) / (1 << 20), data.path(), data.size());

    std::mt19937_64 rng(flags.seed), valRng(flags.seed + 1);
    // Every rank draws the same global batch from the same seed and feeds its own rows
    // (microbatchRows), one microbatch per call; validation uses microbatch 0 of each draw.
    auto feeder = [&](tessel::Split split, std::mt19937_64& r) {
      auto micro = std::make_shared<int64_t>(0);
      auto global = std::make_shared<tessel::TokenBatch>();
      return [&, split, micro, global](tessel::rt::Executor& ex, const std::string& fn) {
        if (*micro == 0 || fn == "forward") *global = data.sample(split, flags.batch, flags.seq, r);
        auto [first, last] = tessel::trainer::microbatchRows(flags.batch, rank, world,
                                                             fn == "forward" ? 0 : *micro, microsteps);
        size_t offset = static_cast<size_t>(first * flags.seq), bytes = static_cast<size_t>((last - first) * flags.seq) * sizeof(int32_t);
        ex.setInput(fn, 0, global->tokens.data() + offset, bytes);
        ex.setInput(fn, 1, global->targets.data() + offset, bytes);
        if (fn != "forward") *micro = (*micro + 1) % microsteps;
      };
    };
    train.microsteps = microsteps;
    train.comm = comm;
    train.steps = flags.steps;
    train.tokensPerStep = flags.batch * flags.seq;
    tessel::trainer::train(trainer, program, train, feeder(tessel::Split::Train, rng),
                           feeder(tessel::Split::Val, valRng));
    if (profile) tessel::trainer::printProfile(trainer, "train_step", flags.steps);
    fmt::print("memory: arena planned {:.2f} MiB, high-water {:.2f} MiB\n",
               static_cast<double>(trainer.arena_bytes()) / (1 << 20),
               static_cast<double>(trainer.executor().highWaterBytes()) / (1 << 20));

    if (sample.bytes > 0) {
      gpt::GPT samplerModel(cfg);
      gpt::buildSampler(samplerModel);
      tessel::Program samplerProgram = samplerModel.compile({.train = false});
      tessel::NativeProgram sampler = samplerProgram.native(native);
      sampler.copy_parameters_from(trainer);
      tessel::TokenBatch prompt = data.sample(tessel::Split::Val, 1, flags.seq, valRng);
      std::string text = tessel::trainer::sampleBytes(sampler, prompt.tokens, sample, rng);
      fmt::print("---- {} sampled bytes (temperature {}, top-k {}) ----\n{}\n----\n", sample.bytes,
                 sample.temperature, sample.topK, text);
    }
    return 0;
  });
}
