// The training loop; see Loop.h.
#include "runtime/train/Loop.h"
#include "runtime/train/StartupTimes.h"

#include "runtime/exec/AllocationCounter.h"
#include "runtime/exec/ExportParams.h"
#include "runtime/exec/Replicas.h"
#include "runtime/exec/Trace.h"
#include "runtime/train/Progress.h"
#include "runtime/train/Report.h"
#include "runtime/train/RunLog.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <stdexcept>

namespace tessel::trainer {

int64_t lastStepOf(const TrainOptions& o) { return o.lastStep >= 0 ? std::min(o.lastStep, o.steps) : o.steps; }

int64_t stepsRun(const TrainOptions& o) { return std::max<int64_t>(0, lastStepOf(o) - o.firstStep + 1); }

double learningRate(const TrainOptions& o, int64_t step) {
  if (o.warmup > 0 && step <= o.warmup)
    return o.lr * static_cast<double>(step) / static_cast<double>(o.warmup);
  if (o.schedule == "constant" || o.steps <= o.warmup + 1) return o.lr;
  // Cosine from lr at the first step after warmup to minLrRatio * lr at the last step.
  double progress =
      static_cast<double>(step - o.warmup - 1) / static_cast<double>(o.steps - o.warmup - 1);
  double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * std::min(1.0, progress)));
  return o.lr * (o.minLrRatio + (1.0 - o.minLrRatio) * cosine);
}

namespace {

void setScalar(rt::ProgramExecutor& ex, const std::string& function, size_t index, double value) {
  float v = static_cast<float>(value);
  ex.setInput(function, index, &v, sizeof v);
}

/// The error for a loss that is NaN or infinite: which loss, when, and the likely causes
/// (a too large learning rate or weight decay both make the parameters overflow; AdamW's
/// decoupled decay multiplies them by 1 - lr * weight_decay every step).
std::runtime_error divergence(const char* which, double loss, int64_t step, double lr, const TrainOptions& o,
                              bool clipping) {
  return std::runtime_error(fmt::format(
      "the {} loss became {} at step {} (learning rate {:.3g}, weight decay {:.3g}): training diverged; "
      "likely causes: --lr or --weight-decay too large{}, or non-finite values in the data",
      which, std::isnan(loss) ? "NaN" : "infinite", step, lr, o.weightDecay,
      clipping ? "" : ", --grad-clip off"));
}

/// Throws unless output `index` of `fn` is a scalar f32 that the function computes (a Temp):
/// the loop reads it as `what`.
void requireScalarOutput(const rt::Program& program, const rt::Function& fn, size_t index, const char* what) {
  auto refuse = [&](const std::string& problem) {
    return std::runtime_error(fmt::format(
        "@{} output {} must be {}, a scalar f32 the function computes, but {}; the program is not a "
        "training program of this trainer",
        fn.name, index, what, problem));
  };
  if (index >= fn.outputs.size())
    throw refuse(fmt::format("the function has {} output(s)", fn.outputs.size()));
  const int id = fn.outputs[index];
  if (id < 0 || static_cast<size_t>(id) >= program.buffers.size())
    throw refuse(fmt::format("it names buffer {}, out of range", id));
  const rt::Buffer& b = program.buffers[static_cast<size_t>(id)];
  const char* kind = b.kind == rt::BufferKind::Parameter ? "parameter"
                     : b.kind == rt::BufferKind::State   ? "optimizer state"
                     : b.kind == rt::BufferKind::Input   ? "input"
                                                         : "temporary";
  if (b.kind != rt::BufferKind::Temp || !b.shape.empty() || b.dtype != rt::DType::F32)
    throw refuse(fmt::format("it is {} '{}' ({} [{}])", kind, b.name,
                             rt::dtypeName(b.dtype),
                             fmt::join(b.shape, ", ")));
}

}  // namespace

/// Microbatches per @train_step: M_eff for a pipelined program, else 1.
static size_t microbatchesPerStep(int64_t pipelineMicrobatches) {
  return pipelineMicrobatches > 1 ? static_cast<size_t>(pipelineMicrobatches) : 1;
}

std::vector<std::string> hyperParameterNames(const rt::Program& program, int64_t pipelineMicrobatches) {
  const rt::Function* step = program.function("train_step");
  const rt::Function* forward = program.function("forward");
  if (!step || !forward)
    throw std::runtime_error(fmt::format("the program has no @{}; it cannot be trained",
                                         step ? "forward" : "train_step"));
  const size_t modelInputs = forward->inputs.size() * microbatchesPerStep(pipelineMicrobatches);
  if (modelInputs > step->inputs.size())
    throw std::runtime_error(fmt::format("@train_step has {} inputs, fewer than @forward's {} x {} microbatches",
                                         step->inputs.size(), forward->inputs.size(),
                                         microbatchesPerStep(pipelineMicrobatches)));
  std::vector<std::string> names;
  const std::string prefix = "train_step.";
  for (size_t i = modelInputs; i < step->inputs.size(); ++i) {
    std::string n = program.buffers.at(static_cast<size_t>(step->inputs[i])).name;
    if (n.rfind(prefix, 0) == 0) n = n.substr(prefix.size());
    names.push_back(std::move(n));
  }
  return names;
}

/// The pipelined part of checkTrainingProgram: @train_step's inputs [m k, (m + 1) k) are
/// @forward's k inputs (dtype and shape) for every microbatch m of M_eff.
static void checkPipelinedInputs(const rt::Program& program, const rt::Function& step, const rt::Function& forward,
                                 int64_t microsteps, int64_t pipelineMicrobatches) {
  if (microsteps != 1)
    throw std::runtime_error(fmt::format("a pipelined program runs its {} microbatches in one @train_step; "
                                         "{} microsteps (@accumulate_step) cannot be combined with it",
                                         pipelineMicrobatches, microsteps));
  const size_t k = forward.inputs.size(), m = static_cast<size_t>(pipelineMicrobatches);
  if (step.inputs.size() < k * m)
    throw std::runtime_error(fmt::format("@train_step has {} inputs, but a pipeline of {} microbatches needs {} x "
                                         "@forward's {} model inputs first; the program is not a pipelined "
                                         "training program for {} microbatches",
                                         step.inputs.size(), m, m, k, m));
  for (size_t i = 0; i < k * m; ++i) {
    const rt::Buffer& got = program.buffers.at(static_cast<size_t>(step.inputs[i]));
    const rt::Buffer& want = program.buffers.at(static_cast<size_t>(forward.inputs[i % k]));
    if (got.dtype != want.dtype || got.shape != want.shape)
      throw std::runtime_error(fmt::format(
          "@train_step input {} ('{}', {} [{}]) should be microbatch {}'s copy of @forward input {} ('{}', {} [{}]); "
          "the program is not a pipelined training program for {} microbatches",
          i, got.name, rt::dtypeName(got.dtype), fmt::join(got.shape, ", "), i / k, i % k, want.name,
          rt::dtypeName(want.dtype), fmt::join(want.shape, ", "), m));
  }
}

void checkTrainingProgram(const rt::Program& program, int64_t microsteps, int64_t pipelineMicrobatches) {
  const rt::Function* step = program.function("train_step");
  if (!step) throw std::runtime_error("the program has no @train_step; it cannot be trained");
  const rt::Function* forward = program.function("forward");
  if (!forward)
    throw std::runtime_error("the program has no @forward, which validation runs; it cannot be trained");
  requireScalarOutput(program, *step, 0, "the loss");
  requireScalarOutput(program, *step, 1, "the gradient norm");
  requireScalarOutput(program, *forward, 0, "the loss");
  if (step->outputs.size() > 1 && step->outputs[0] == step->outputs[1])
    throw std::runtime_error("@train_step outputs 0 (the loss) and 1 (the gradient norm) are one buffer");
  if (pipelineMicrobatches > 1) checkPipelinedInputs(program, *step, *forward, microsteps, pipelineMicrobatches);
  if (microsteps > 1) {
    const rt::Function* accumulate = program.function("accumulate_step");
    if (!accumulate)
      throw std::runtime_error(fmt::format("the program has no @accumulate_step, which {} microsteps need "
                                           "(compile with the plan's grad_accumulation)", microsteps));
    requireScalarOutput(program, *accumulate, 0, "the loss");
  }
}

std::pair<int64_t, int64_t> traceWindow(const std::string& flag, int64_t steps, int64_t firstStep) {
  const int64_t before = firstStep - 1;  // steps a resumed run does not run
  if (flag.empty())
    return steps - before >= 6 ? std::pair<int64_t, int64_t>{before + 2, before + 6}
                               : std::pair<int64_t, int64_t>{firstStep, steps};
  const size_t colon = flag.find(':');
  const int64_t first = std::stoll(flag.substr(0, colon)), last = std::stoll(flag.substr(colon + 1));
  if (last > steps)
    throw std::runtime_error(fmt::format("--trace-steps {}: the run has {} step{}", flag, steps, steps == 1 ? "" : "s"));
  if (first < firstStep)
    throw std::runtime_error(fmt::format("--trace-steps {}: the run resumes at step {}", flag, firstStep));
  return {first, last};
}

/// The mean of `value` over the ranks of `comm` (itself without one).
static double meanOverRanks(rt::Communicator* comm, double value) {
  if (!comm || comm->worldSize() == 1) return value;
  float v = static_cast<float>(value);
  comm->allReduce(&v, 1, rt::DType::F32, rt::ReduceOp::Avg, "loss")->wait();
  return v;
}

std::vector<StepStats> train(rt::ProgramExecutor& ex, const TrainOptions& o,
                             const BatchFeeder& trainBatch, const ValidationFeeder& valBatch) {
  checkTrainingProgram(ex.program(), o.microsteps, o.pipelineMicrobatches);
  const std::vector<std::string> names = hyperParameterNames(ex.program(), o.pipelineMicrobatches);
  // A pipelined @train_step takes M_eff microbatches of the model's k inputs, then the
  // hyper-parameters (the file comment); otherwise one microbatch.
  const size_t modelInputs = ex.program().function("forward")->inputs.size();
  const size_t stepMicrobatches = microbatchesPerStep(o.pipelineMicrobatches);
  const size_t firstHyper = modelInputs * stepMicrobatches;
  std::ofstream log;
  if (!o.logJson.empty() && (!o.comm || o.comm->rank() == 0)) {
    // A resumed run continues the log of the run it resumes (records of steps > firstStep - 1).
    log.open(o.logJson, o.firstStep > 1 ? std::ios::app : std::ios::trunc);
    if (!log) throw std::runtime_error(fmt::format("cannot write the JSON log '{}'", o.logJson));
  }
  // Validation runs @forward once per microbatch: microsteps, or M_eff under a pipeline.
  const int64_t valMicrobatches = stepMicrobatches > 1 ? o.pipelineMicrobatches : o.microsteps;
  if (valBatch.microsteps != valMicrobatches)
    throw std::logic_error(fmt::format("the validation set feeds {} microbatches per batch, the loop runs {}",
                                       valBatch.microsteps, valMicrobatches));
  const int64_t evalBatches = evaluationBatches(o.evalBatches, valBatch);
  if (!o.comm || o.comm->rank() == 0) {
    std::string note = o.evalBatches > valBatch.batches
                           ? fmt::format(" (--eval-batches {} is more than it holds)", o.evalBatches)
                           : std::string();
    fmt::print("{}{}\n", describeValidation(valBatch, evalBatches), note);
  }
  double clip = (o.gradClip > 0 && std::isfinite(o.gradClip))
                    ? o.gradClip
                    : std::numeric_limits<double>::infinity();
  // The trace window: every rank records the same steps, from clocks started together.
  std::unique_ptr<rt::TraceRecorder> trace;
  std::pair<int64_t, int64_t> window{0, -1};
  if (!o.traceFile.empty()) {
    window = traceWindow(o.traceSteps, o.steps, o.firstStep);
    trace = std::make_unique<rt::TraceRecorder>();
    trace->alignClocks(o.comm);
    ex.setTrace(trace.get());
  }
  rt::TraceRecorder* tr = trace.get();
  const bool print = !o.comm || o.comm->rank() == 0;
  if (print && !o.reportDir.empty()) prepareReportFolder(o.reportDir);
  // What step 1's record says about the run; every rank takes part in gathering the memory.
  nlohmann::json run = o.runInfo.is_object() ? o.runInfo : nlohmann::json::object();
  const bool recording = !o.logJson.empty() || !o.reportDir.empty();
  if (recording) {
    run["world_size"] = o.comm ? o.comm->worldSize() : 1;
    run["steps"] = o.steps;
    if (o.firstStep > 1) run["resumed_after_step"] = o.firstStep - 1;
    run["unit"] = o.throughputUnit;
    run["training"] = {{"optimizer", o.optimizer}, {"lr", o.lr}, {"warmup", o.warmup}, {"schedule", o.schedule},
                       {"weight_decay", o.weightDecay}, {"grad_clip", o.gradClip}, {"microsteps", o.microsteps},
                       {"eval_every", o.evalEvery}, {"eval_batches", o.evalBatches}};
    if (stepMicrobatches > 1) run["training"]["pipeline_microbatches"] = o.pipelineMicrobatches;
    run["memory"] = memoryByRank(ex.program(), ex.allocationCounter(), o.comm);
  }
  const RankMemory memory = rankMemory(ex.program());
  std::vector<nlohmann::json> records;  // for --report, on rank 0
  ProgressPrinter progress(stdoutIsTerminal(), o.logEvery, o.throughputUnit);
  double lastValLoss = 0;
  bool anyValidation = false;
  std::vector<StepStats> stats;
  auto start = std::chrono::steady_clock::now();
  const int64_t lastStep = lastStepOf(o);
  for (int64_t step = o.firstStep; step <= lastStep; ++step) {
    if (tr) tr->setActive(step >= window.first && step <= window.second);
    auto t0 = std::chrono::steady_clock::now();
    const rt::CollectiveCounters before = o.counters ? o.counters() : rt::CollectiveCounters{};
    StepStats s;
    s.step = step;
    s.lr = learningRate(o, step);
    if (o.comm) o.comm->setStep(step);  // named by a collective's timeout message
    if (o.deviceComm) o.deviceComm->setStep(step);
    double microLosses = 0;
    for (int64_t m = 1; m < o.microsteps; ++m) {
      {
        rt::TraceScope data(tr, "data", "data", "accumulate_step batch");
        trainBatch(ex, "accumulate_step", 0);
      }
      rt::TraceScope run(tr, "accumulate_step", "function");
      ex.run("accumulate_step");
      microLosses += ex.outputs("accumulate_step").at(0).value();
    }
    {
      rt::TraceScope data(tr, "data", "data", "train_step batch");
      for (size_t m = 0; m < stepMicrobatches; ++m) trainBatch(ex, "train_step", m * modelInputs);
    }
    for (size_t h = 0; h < names.size(); ++h) {
      const std::string& n = names[h];
      double v = n == "lr"             ? s.lr
                 : n == "beta1"        ? o.beta1
                 : n == "beta2"        ? o.beta2
                 : n == "eps"          ? o.eps
                 : n == "weight_decay" ? o.weightDecay
                 : n == "momentum"     ? o.momentum
                 : n == "step"         ? static_cast<double>(step)
                 : n == "max_grad_norm"
                     ? clip
                     : throw std::logic_error("train_step has an unknown input '" + n + "'");
      setScalar(ex, "train_step", firstHyper + h, v);
    }
    std::vector<rt::OutputView> out;
    if (step == o.firstStep) rt::markStartupPhase("loop setup and first batch");  // the first launch
    {
      rt::TraceScope run(tr, "train_step", "function");
      ex.run("train_step");
      out = ex.outputs("train_step");  // a GPU executor waits for the device here
    }
    if (o.checkReplicas && o.comm && o.comm->worldSize() > 1) {
      rt::TraceScope check(tr, "check replicas", "collective");
      rt::checkReplicas(ex, *o.comm, step);
    }
    {
      rt::TraceScope mean(tr, "loss all_reduce", "collective");
      s.loss = meanOverRanks(o.comm, (microLosses + out.at(0).value()) / static_cast<double>(o.microsteps));
    }
    s.gradNorm = out.at(1).value();
    // Every rank's gradient norm, for the record: a plan must give every rank the same norm.
    std::vector<float> rankNorms;
    if (recording && o.comm && o.comm->worldSize() > 1) {
      const float mine = static_cast<float>(s.gradNorm);  // the norm is an f32 output: exact
      rankNorms.resize(static_cast<size_t>(o.comm->worldSize()));
      o.comm->allGather(&mine, rankNorms.data(), o.comm->worldSize(), rt::DType::F32, "grad_norm")->wait();
    }
    auto t1 = std::chrono::steady_clock::now();
    s.seconds = std::chrono::duration<double>(t1 - t0).count();
    if (tr && tr->active()) {
      tr->fillIdle(t0, t1);
      tr->complete(fmt::format("step {}", step), "step", t0, t1, fmt::format("{} s", s.seconds));
    }
    s.tokensPerSecond = static_cast<double>(o.tokensPerStep) / s.seconds;
    bool evaluated = (o.evalEvery > 0 && step % o.evalEvery == 0) || step == o.steps;
    // The ranks' batch means have equal sizes, so their mean is the global batch mean.
    if (evaluated) {
      rt::TraceScope validation(tr, "validation", "function");
      s.valLoss = meanOverRanks(o.comm, evaluate(ex, valBatch, evalBatches));
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // This run's steps so far (a resumed run started at firstStep) predict the rest of it.
    double eta = elapsed / static_cast<double>(step - o.firstStep + 1) * static_cast<double>(lastStep - step);
    if (evaluated) lastValLoss = s.valLoss, anyValidation = true;
    if (print)
      progress.update({.step = step, .steps = o.steps, .loss = s.loss, .lr = s.lr, .gradNorm = s.gradNorm,
                       .throughput = s.tokensPerSecond, .evaluated = evaluated, .valLoss = s.valLoss,
                       .anyValidation = anyValidation, .lastValLoss = lastValLoss, .etaSeconds = eta});
    if (print && recording) {
      nlohmann::json j{{"step", step},         {"loss", s.loss},
                       {"lr", s.lr},           {"grad_norm", s.gradNorm},
                       {"tokens_per_s", s.tokensPerSecond}, {"step_seconds", s.seconds}};
      if (evaluated) j["val_loss"] = s.valLoss;  // NaN is written as null
      if (!rankNorms.empty()) j["grad_norm_by_rank"] = rankNorms;
      if (o.counters) addStepCommunication(j, before, o.counters());
      const rt::AllocationCounter* counter = ex.allocationCounter();
      j["peak_memory_bytes"] = counter ? counter->peak() : memory.total() - memory.activationArena + ex.highWaterBytes();
      j["arena_high_water_bytes"] = ex.highWaterBytes();
      if (step == o.firstStep) j["run"] = run;
      if (log.is_open()) {
        log << j.dump() << "\n" << std::flush;
        if (!log)
          throw std::runtime_error(fmt::format("cannot write the JSON log '{}' (step {}): the disk may be "
                                               "full or the file unwritable",
                                               o.logJson, step));
      }
      if (!o.reportDir.empty()) records.push_back(std::move(j));
    }
    if (!std::isfinite(s.loss)) throw divergence("training", s.loss, step, s.lr, o, std::isfinite(clip));
    if (evaluated && !std::isfinite(s.valLoss))
      throw divergence("validation", s.valLoss, step, s.lr, o, std::isfinite(clip));
    stats.push_back(s);
    if (o.afterStep) {
      const std::vector<std::string> lines = o.afterStep(step);
      if (print && !lines.empty()) {
        progress.finish();  // on a terminal, below the redrawn bar rather than after it
        for (const std::string& line : lines) fmt::print("{}\n", line);
      }
    }
  }
  progress.finish();
  if (print && !o.reportDir.empty())
    fmt::print("report: {} steps written to '{}'\n", records.size(), writeReport(records, o.reportDir));
  if (trace) {
    trace->setActive(false);
    ex.setTrace(nullptr);
    const int world = o.comm ? o.comm->worldSize() : 1;
    rt::writeTrace(*trace, o.comm, o.traceFile,
                   nlohmann::json{{"steps", {window.first, window.second}},
                                  {"world_size", world},
                                  {"clock_alignment", "every rank's time 0 is its exit from one all-reduce"}}
                       .dump());
    if (!o.comm || o.comm->rank() == 0)
      fmt::print("trace: steps {}-{} of {} rank{} written to '{}'\n", window.first, window.second, world,
                 world == 1 ? "" : "s", o.traceFile);
  }
  if (!o.exportParams.empty()) {
    rt::exportParameters(ex, o.comm, o.exportParams);
    if (!o.comm || o.comm->rank() == 0) fmt::print("exported the parameters to '{}'\n", o.exportParams);
  }
  return stats;
}

void addCommFlags(CLI::App& app, bool& checkSchedule, bool& checkReplicas, double& commTimeout) {
  app.add_flag("--check-schedule", checkSchedule,
               "before training, compare every rank's collective schedule and fail fast on a mismatch");
  app.add_flag("--check-replicas", checkReplicas,
               "after every step, check that every parameter and optimizer state is bitwise the same "
               "on every rank of its replica group (the mesh axes that do not shard it; a hash per "
               "buffer and rank, all-gathered)");
  app.add_option("--comm-timeout", commTimeout, "seconds a collective may take before the job fails")
      ->capture_default_str()->check(positiveUpTo(rt::kMaxTimeoutSeconds));
}

void addTrainFlags(CLI::App& app, TrainOptions& o, bool optimizerFlag) {
  app.add_option("--lr", o.lr, "peak learning rate")->capture_default_str()->check(positiveNumber());
  app.add_option("--warmup", o.warmup, "linear warmup steps")->capture_default_str()
      ->check(integerIn(0, int64_t{1} << 40));
  app.add_option("--schedule", o.schedule, "after warmup: cosine (to 0.1 lr) or constant")
      ->capture_default_str()->check(CLI::IsMember({"cosine", "constant"}));
  if (optimizerFlag)
    app.add_option("--optimizer", o.optimizer, "adamw or sgd (with momentum 0.9)")
        ->capture_default_str()->check(CLI::IsMember({"adamw", "sgd"}));
  app.add_option("--weight-decay", o.weightDecay, "decoupled weight decay of matrices")
      ->capture_default_str()->check(nonNegativeNumber());
  app.add_option("--grad-clip", o.gradClip, "global gradient-norm threshold (0: off)")
      ->capture_default_str()->check(nonNegativeNumber());
  app.add_option("--eval-every", o.evalEvery, "validate every N steps (0: at the end)")
      ->capture_default_str()->check(integerIn(0, int64_t{1} << 40));
  app.add_option("--eval-batches", o.evalBatches,
                 "global batches per validation: the first of the held-out data, in order (0: all)")
      ->capture_default_str()->check(integerIn(0, int64_t{1} << 20));
  app.add_option("--log-json", o.logJson, "write one JSON object per step to FILE")->type_name("FILE")->check(nonEmpty("file name"));
  app.add_option("--log-every", o.logEvery,
                 "when stdout is not a terminal, print a progress line every N steps (and at each validation and "
                 "the last step); on a terminal one progress bar redraws in place")
      ->capture_default_str()->check(integerIn(1, int64_t{1} << 40));
  app.add_option("--report", o.reportDir,
                 "after training, write DIR/index.html: a static page (no network) with the loss, validation and "
                 "throughput curves, memory per rank, communication per step, configuration and plan (also "
                 "`tessel report LOG.jsonl --out DIR` from a --log-json file)")
      ->type_name("DIR")->check(nonEmpty("folder"));
  app.add_option("--export-params", o.exportParams,
                 "after training, write every parameter in its global shape, f32, under its name, to FILE "
                 "(safetensors; rank 0 writes, every rank takes part in gathering the shards)")
      ->type_name("FILE.safetensors")->check(writableFile());
  app.add_option("--trace", o.traceFile,
                 "write a Chrome trace-event JSON of the --trace-steps window to FILE (open it in Perfetto): per "
                 "rank (pid = rank) the steps, data loading, functions, kernels, GEMMs, collective starts and "
                 "waits, and idle time; rank 0 merges every rank's events")
      ->type_name("FILE")->check(writableFile());
  app.add_option("--trace-steps", o.traceSteps,
                 "the steps --trace records, A:B (1-based, inclusive; default 2:6, or every step of a shorter run)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            const size_t colon = v.find(':');
            auto number = [](const std::string& t) {
              return !t.empty() && t.size() <= 12 && t.find_first_not_of("0123456789") == std::string::npos;
            };
            if (colon == std::string::npos || !number(v.substr(0, colon)) || !number(v.substr(colon + 1)))
              return "'" + v + "' is not A:B (two step numbers, e.g. 2:6)";
            const int64_t a = std::stoll(v.substr(0, colon)), b = std::stoll(v.substr(colon + 1));
            if (a < 1 || a > b) return "'" + v + "': the steps must satisfy 1 <= A <= B";
            return "";
          },
          ""));
}

}  // namespace tessel::trainer
