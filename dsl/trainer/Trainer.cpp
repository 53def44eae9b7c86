// The training loop; see Trainer.h.
#include "dsl/trainer/Trainer.h"

#include "runtime/exec/Collectives.h"
#include "runtime/exec/GemmEpilogue.h"
#include "runtime/exec/StepKind.h"

#include "dsl/trainer/Flags.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace tessel::trainer {

std::vector<StepStats> train(NativeProgram& native, const Program& program, const TrainOptions& o,
                             const BatchFeeder& trainBatch, const ValidationFeeder& valBatch) {
  // The loop reads the hyper-parameter names from the lowered program; they must agree with
  // the compiled model's signature.
  std::vector<std::string> hyper = hyperParameterNames(native.program(), o.pipelineMicrobatches);
  const std::vector<std::string>& names = program.train_inputs();
  // A pipelined @train_step takes the model's inputs once per microbatch (Loop.h).
  size_t first = program.inputs().size() * static_cast<size_t>(std::max<int64_t>(1, o.pipelineMicrobatches));
  if (names.size() != first + hyper.size() ||
      !std::equal(hyper.begin(), hyper.end(), names.begin() + static_cast<long>(first)))
    throw std::logic_error("the lowered @train_step inputs differ from the model's signature");
  return train(native.executor(), o, trainBatch, valBatch);
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
      what = fmt::format("gemm {}x[{}x{}x{}]{}{}{}{}", g->batch, g->m, g->n, g->k, g->transA ? " tA" : "",
                         g->transB ? " tB" : "", g->epilogue.empty() ? "" : " +",
                         rt::gemmEpilogueName(g->epilogue));  // the fused epilogue, if any
      where = g->location;
    } else if (auto* c = std::get_if<rt::CollectiveStep>(&step); c && c->movesShards()) {
      what = fmt::format("{} dim {}", rt::collectiveKindName(rt::collectiveKindIndex(*c)), c->dim);
      where = c->location;
    } else if (auto* c = std::get_if<rt::CollectiveStep>(&step); c && c->kind == rt::CollectiveStep::Kind::SendRecv) {
      what = fmt::format("send_recv {} sends {} recvs", c->sends,
                         static_cast<int64_t>(c->tensors.size()) - c->sends);
      where = c->location;
    } else if (auto* c = std::get_if<rt::CollectiveStep>(&step)) {
      what = fmt::format("all_reduce_{} bucket {}",
                         c->kind == rt::CollectiveStep::Kind::AllReduceStart ? "start" : "wait", c->bucket);
      where = c->location;
    } else {
      what = "copy";
    }
    fmt::print("  {:7.3f} ms {:5.1f}%  {:<36} {}\n", 1e3 * t[order[i]] / static_cast<double>(runs),
               100.0 * t[order[i]] / total, what, where.substr(0, 90));
  }
  printKindSummary(*f, t, runs);
}

void printKindSummary(const rt::Function& f, const std::vector<double>& seconds, int64_t runs) {
  rt::KindTotals k = rt::kindTotals(f, seconds);
  double perRun = 1.0 / static_cast<double>(std::max<int64_t>(1, runs));
  fmt::print("profile of @{} by kind: ms per step, share of the step, steps per run\n", f.name);
  for (int i = 0; i < rt::kStepKinds; ++i) {
    if (k.steps[i] == 0) continue;
    auto kind = static_cast<rt::StepKind>(i);
    std::string extra;
    if (kind == rt::StepKind::Gemm && k.seconds[i] > 0)
      extra = fmt::format("  {:.1f} GFLOP/s", k.gemmFlops / (k.seconds[i] * perRun) / 1e9);
    fmt::print("  kind {:<17} {:9.3f} ms {:5.1f}% {:5} steps{}\n", rt::stepKindName(kind), 1e3 * k.seconds[i] * perRun,
               k.total > 0 ? 100.0 * k.seconds[i] / k.total : 0.0, k.steps[i], extra);
  }
}



}  // namespace tessel::trainer
