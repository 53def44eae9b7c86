// The trainer front end; see Flags.h.
#include "dsl/trainer/Flags.h"

#include "runtime/comm/World.h"
#include "runtime/numeric/Fnv1a.h"

#include <cstdio>
#include <cstring>

#include "runtime/Init.h"
#include "runtime/cuda/Driver.h"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>

namespace tessel::trainer {

namespace {
/// A size flag: an integer in [min, max] (runtime/train/FlagChecks.h), so no value wraps or
/// saturates silently.
CLI::Option* sizeFlag(CLI::App& app, const char* name, int64_t& value, const std::string& help,
                      int64_t max, int64_t min = 1) {
  return app.add_option(name, value, help)->capture_default_str()->check(integerIn(min, max));
}
}  // namespace


void addCommonFlags(CLI::App& app, Flags& f, const std::string& defaultData,
                    const std::string& dataHelp, int64_t minSteps, const std::string& stepsHelp) {
  f.data = defaultData;
  app.add_option("--data", f.data, dataHelp)->capture_default_str();
  app.add_option("--dump-ir", f.dumpIr, "write the IR after every pipeline stage into this folder")
      ->type_name("DIR");
  app.add_option("--seed", f.seed, "seed of parameter init and batch sampling")
      ->capture_default_str()->check(integerIn(0, int64_t{1} << 62));
  sizeFlag(app, "--steps", f.steps, stepsHelp, int64_t{1} << 40, minSteps);
  app.add_option("--device", f.device, "where to run: cpu, cuda, or auto (a GPU when usable)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--precision", f.precision,
                 "f32, or bf16: mixed precision with bf16 activations and f32 master weights, "
                 "optimizer state and loss")
      ->capture_default_str()->check(CLI::IsMember({"f32", "bf16"}));
  sizeFlag(app, "--batch", f.batch, "global batch size B", int64_t{1} << 24);
  app.add_option("--plan", f.plan, "parallelism plan: dp=N (data parallelism over N ranks; tp and pp are not "
                                   "supported yet)")
      ->capture_default_str();
  sizeFlag(app, "--grad-accumulation", f.microsteps, "microsteps per optimizer step (gradient accumulation)",
           int64_t{1} << 20);
  app.add_option("--bucket-mb", f.bucketMb, "gradient all-reduce bucket capacity in MiB")
      ->capture_default_str()->check(positiveNumber());
  app.add_flag("--overlap,!--no-overlap", f.overlap,
               "start each bucket's all-reduce during the backward pass (default on)");
  app.add_flag("--explain", f.explain,
               "print the plan: buckets (parameters, bytes), where each collective starts and waits, and the "
               "bytes each rank sends per step");
  app.add_flag("--check-schedule", f.checkSchedule,
               "before training, compare every rank's collective schedule and fail fast on a mismatch");
  app.add_flag("--check-replicas", f.checkReplicas,
               "after every step, check that every rank holds bitwise the same parameters and "
               "optimizer state (a hash per rank, all-gathered)");
  app.add_option("--comm-timeout", f.commTimeout, "seconds a collective may take before the job fails")
      ->capture_default_str()->check(positiveNumber());
}

Plan planFromFlags(const Flags& f) {
  Plan plan = parsePlan(f.plan, f.microsteps);
  plan.bucket_mb(f.bucketMb).overlap(f.overlap);
  return plan;
}

void requireSingleRankPlan(const Flags& f, const std::string& program) {
  Plan plan = planFromFlags(f);
  if (plan.mesh().size() != 1 || plan.microsteps() != 1)
    throw std::runtime_error(fmt::format("{} runs on one rank without gradient accumulation so far; --plan {} "
                                         "--grad-accumulation {} needs tessel-gpt",
                                         program, f.plan, f.microsteps));
}

void addTransformerFlags(CLI::App& app, Flags& f) {
  sizeFlag(app, "--layers", f.layers, "transformer blocks L", 4096);
  sizeFlag(app, "--channels", f.channels, "channels C", int64_t{1} << 16);
  sizeFlag(app, "--heads", f.heads, "attention heads NH (C must be divisible by NH)", 4096);
  sizeFlag(app, "--seq", f.seq, "sequence length T", int64_t{1} << 20);
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

std::string resolveDeviceFlag(const Flags& flags, const std::string& program, bool cudaReady) {
  std::string device = rt::resolveDevice(flags.device, cudaReady);
  const rt::CudaDriverStatus& s = rt::probeCudaDriver();
  if (flags.device == "auto" && s.loaded && s.devices > 0)
    fmt::print("{}: {} GPU(s) found; running on the {}\n", program, s.devices,
               device == "cuda" ? "GPU" : "CPU (this example has no GPU path)");
  return device;
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

namespace {

/// Writes `message` and a newline to stderr in one write, so the lines of several ranks
/// (forwarded by mpirun) never run into each other; under a launcher the line ends with
/// " [rank R of N]" (the message itself keeps its "file:line:col: error:" start).
void reportError(const std::string& message) {
  std::string line = message;
  try {
    rt::WorldInfo w = rt::detectWorld();
    if (w.size > 1) line += fmt::format(" [rank {} of {}]", w.rank, w.size);
  } catch (const std::exception&) {  // malformed launcher variables: report without the rank
  }
  line += "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void checkSameCommandLine(int argc, char** argv, rt::Communicator& comm) {
  if (comm.worldSize() == 1) return;
  uint64_t h = numeric::kFnv1aOffsetBasis;  // over the arguments, each with its NUL
  for (int i = 1; i < argc; ++i) h = numeric::fnv1a(h, argv[i], std::strlen(argv[i]) + 1);
  std::vector<uint64_t> all(static_cast<size_t>(comm.worldSize()));
  comm.allGather(&h, all.data(), 2 * static_cast<int64_t>(all.size()), rt::DType::I32,
                 "command_line")->wait();
  std::vector<int> differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ.push_back(static_cast<int>(r));
  if (!differ.empty())
    throw std::runtime_error(fmt::format(
        "rank(s) {} were started with other arguments than rank 0; every rank of a "
        "data-parallel job must run the same command",
        fmt::join(differ, ", ")));
}

int runMain(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return body();
  } catch (const rt::CommError& e) {
    // A collective failed (a dead or late rank, a timeout): every surviving rank ends here,
    // naming the collective, its size, the step and the missing ranks.
    rt::abortJob(rt::detectWorld().rank, e.what());
  } catch (const ModelError& e) {
    reportError(e.what());
  } catch (const std::bad_alloc&) {
    reportError(app.get_name() +
                ": error: out of memory: the model, batch or data set does not fit in this "
                "machine's memory; reduce the model size or --batch");
  } catch (const std::exception& e) {
    reportError(app.get_name() + ": error: " + e.what());
  }
  return 1;
}

}  // namespace tessel::trainer
