// The training loop; see Trainer.h.
#include "dsl/trainer/Trainer.h"

#include "dsl/trainer/Flags.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>

namespace tessel::trainer {

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

void setScalar(rt::Executor& ex, const std::string& function, size_t index, double value) {
  float v = static_cast<float>(value);
  ex.setInput(function, index, &v, sizeof v);
}

std::string duration(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02d}s", s / 60, s % 60) : fmt::format("{}s", s);
}

}  // namespace

double evaluate(NativeProgram& native, int64_t batches, const BatchFeeder& feed) {
  rt::Executor& ex = native.executor();
  double sum = 0;
  for (int64_t i = 0; i < batches; ++i) {
    feed(ex, "forward");
    ex.run("forward");
    sum += ex.outputs("forward").at(0).value();
  }
  return sum / static_cast<double>(batches);
}

std::vector<StepStats> train(NativeProgram& native, const Program& program, const TrainOptions& o,
                             const BatchFeeder& trainBatch, const BatchFeeder& valBatch) {
  rt::Executor& ex = native.executor();
  const std::vector<std::string>& names = program.train_inputs();
  size_t firstHyper = program.inputs().size();
  std::ofstream log;
  if (!o.logJson.empty()) {
    log.open(o.logJson);
    if (!log) throw std::runtime_error(fmt::format("cannot write the JSON log '{}'", o.logJson));
  }
  double clip = (o.gradClip > 0 && std::isfinite(o.gradClip))
                    ? o.gradClip
                    : std::numeric_limits<double>::infinity();
  std::vector<StepStats> stats;
  auto start = std::chrono::steady_clock::now();
  for (int64_t step = 1; step <= o.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    StepStats s;
    s.step = step;
    s.lr = learningRate(o, step);
    trainBatch(ex, "train_step");
    for (size_t i = firstHyper; i < names.size(); ++i) {
      const std::string& n = names[i];
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
      setScalar(ex, "train_step", i, v);
    }
    ex.run("train_step");
    auto out = ex.outputs("train_step");
    s.loss = out.at(0).value();
    s.gradNorm = out.at(1).value();
    auto t1 = std::chrono::steady_clock::now();
    s.seconds = std::chrono::duration<double>(t1 - t0).count();
    s.tokensPerSecond = static_cast<double>(o.tokensPerStep) / s.seconds;
    bool evaluated = (o.evalEvery > 0 && step % o.evalEvery == 0) || step == o.steps;
    if (evaluated) s.valLoss = evaluate(native, o.evalBatches, valBatch);
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double eta = elapsed / static_cast<double>(step) * static_cast<double>(o.steps - step);
    fmt::print("step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | norm {:.3f} | {:.0f} {} | ETA {}\n",
               step, o.steps, s.loss,
               evaluated ? fmt::format(" | val {:.4f}", s.valLoss) : std::string(), s.lr,
               s.gradNorm, s.tokensPerSecond, o.throughputUnit, duration(eta));
    std::fflush(stdout);
    if (log) {
      nlohmann::json j{{"step", step},         {"loss", s.loss},
                       {"lr", s.lr},           {"grad_norm", s.gradNorm},
                       {"tokens_per_s", s.tokensPerSecond}, {"step_seconds", s.seconds}};
      if (evaluated) j["val_loss"] = s.valLoss;  // NaN is written as null
      log << j.dump() << "\n" << std::flush;
    }
    if (!std::isfinite(s.loss))
      throw std::runtime_error(fmt::format(
          "the loss became {} at step {} (learning rate {:.3g}); lower --lr{}",
          std::isnan(s.loss) ? "NaN" : "infinite", step, s.lr,
          std::isfinite(clip) ? "" : " or set --grad-clip"));
    stats.push_back(s);
  }
  return stats;
}


void addTrainFlags(CLI::App& app, TrainOptions& o) {
  app.add_option("--lr", o.lr, "peak learning rate")->capture_default_str()->check(finiteNumber())
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "linear warmup steps")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--schedule", o.schedule, "after warmup: cosine (to 0.1 lr) or constant")
      ->capture_default_str()->check(CLI::IsMember({"cosine", "constant"}));
  app.add_option("--optimizer", o.optimizer, "adamw or sgd (with momentum 0.9)")
      ->capture_default_str()->check(CLI::IsMember({"adamw", "sgd"}));
  app.add_option("--weight-decay", o.weightDecay, "decoupled weight decay of matrices")
      ->capture_default_str()->check(finiteNumber())->check(CLI::NonNegativeNumber);
  app.add_option("--grad-clip", o.gradClip, "global gradient-norm threshold (0: off)")
      ->capture_default_str()->check(finiteNumber())->check(CLI::NonNegativeNumber);
  app.add_option("--eval-every", o.evalEvery, "validate every N steps (0: at the end)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--eval-batches", o.evalBatches, "batches per validation")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--log-json", o.logJson, "write one JSON object per step to FILE")->type_name("FILE");
}

}  // namespace tessel::trainer

namespace tessel::trainer {

void printProfile(NativeProgram& native, const std::string& function, int64_t runs, int top) {
  std::vector<double> t = native.executor().stepSeconds(function);
  const rt::Function* f = native.program().function(function);
  if (t.empty() || !f) return;
  double total = 0;
  for (double s : t) total += s;
  std::vector<size_t> order(t.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t[a] > t[b]; });
  fmt::print("profile of @{}: {:.2f} ms per run over {} steps\n", function,
             1e3 * total / static_cast<double>(runs), t.size());
  for (int i = 0; i < top && i < static_cast<int>(order.size()); ++i) {
    const rt::Step& step = f->steps[order[i]];
    std::string what, where;
    if (auto* k = std::get_if<rt::KernelStep>(&step)) {
      what = k->symbol;
      where = k->location;
    } else if (auto* g = std::get_if<rt::GemmStep>(&step)) {
      what = fmt::format("gemm {}x[{}x{}x{}]{}{}", g->batch, g->m, g->n, g->k, g->transA ? " tA" : "",
                         g->transB ? " tB" : "");
      where = g->location;
    } else {
      what = "copy";
    }
    fmt::print("  {:7.3f} ms {:5.1f}%  {:<36} {}\n", 1e3 * t[order[i]] / static_cast<double>(runs),
               100.0 * t[order[i]] / total, what, where.substr(0, 90));
  }
}

}  // namespace tessel::trainer
