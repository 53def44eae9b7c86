// Step kinds for profiles; see StepKind.h.
#include "runtime/exec/StepKind.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace tessel::rt {
namespace {

/// The op names (compiler/*.td mnemonics) whose kernels reduce along rows.
const char* const kRowOps[] = {"layer_norm",  "layer_norm_grad", "rms_norm",         "rms_norm_grad",
                               "softmax",     "softmax_grad",    "cross_entropy",    "cross_entropy_grad",
                               "fused_classifier", "row_max",    "sum_exp",          "sum_exp_grad",
                               "target_logit", "target_logit_grad", "cross_entropy_from_stats",
                               "cross_entropy_from_stats_grad", "reduce_sum", "reduce_mean"};
const char* const kLayoutOps[] = {"transpose", "split", "concat", "dynamic_slice"};
const char* const kOptimizerOps[] = {"adamw", "sgd", "global_norm", "clip_coefficient"};
const char* const kOtherOps[] = {"embedding", "embedding_grad", "embedding_shard", "embedding_shard_grad",
                                 "reset_scratch"};

template <size_t N>
bool among(const std::string& name, const char* const (&list)[N]) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

const char* stepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::Gemm: return "gemm";
    case StepKind::Row: return "row";
    case StepKind::Elementwise: return "elementwise";
    case StepKind::Layout: return "layout";
    case StepKind::Optimizer: return "optimizer";
    case StepKind::Attention: return "attention";
    case StepKind::CollectiveStart: return "collective_start";
    case StepKind::CollectiveWait: return "collective_wait";
    case StepKind::CollectiveWhole: return "collective";
    case StepKind::PointToPoint: return "send_recv";
    case StepKind::Other: return "other";
  }
  throw std::logic_error("stepKindName: unknown StepKind");
}

std::string kernelOpName(const std::string& symbol) {
  if (symbol.size() < 3 || symbol[0] != 'k' || !std::isdigit(static_cast<unsigned char>(symbol[1]))) return symbol;
  size_t i = 1;
  while (i < symbol.size() && std::isdigit(static_cast<unsigned char>(symbol[i]))) ++i;
  if (i >= symbol.size() || symbol[i] != '_') return symbol;
  return symbol.substr(i + 1);
}

StepKind kernelKindOfOp(const std::string& name) {
  if (name.find("attention") != std::string::npos) return StepKind::Attention;
  if (among(name, kOptimizerOps) || startsWith(name, "adamw") || startsWith(name, "multi_tensor")) return StepKind::Optimizer;
  if (among(name, kRowOps)) return StepKind::Row;
  if (among(name, kLayoutOps)) return StepKind::Layout;
  if (among(name, kOtherOps)) return StepKind::Other;
  if (startsWith(name, "fused_")) {
    // fused_<member>_<member>...: an optimizer kernel when a member is an optimizer op, else a
    // row kernel when any member reduces rows, else elementwise. Member names hold
    // underscores themselves, so test every row op as a "_<op>" part of the name.
    std::string members = name.substr(5) + "_";
    for (const char* op : kOptimizerOps)  // an optimizer update with its scaling fused in
      if (members.find(std::string("_") + op + "_") != std::string::npos) return StepKind::Optimizer;
    for (const char* op : kRowOps)
      if (members.find(std::string("_") + op + "_") != std::string::npos) return StepKind::Row;
    return StepKind::Elementwise;
  }
  return StepKind::Elementwise;  // add, sub, mul, scale, activations, cast, constant, broadcast, rope
}

StepKind stepKindOf(const Step& step) {
  if (std::holds_alternative<GemmStep>(step)) return StepKind::Gemm;
  if (std::holds_alternative<CopyStep>(step)) return StepKind::Layout;
  if (auto* k = std::get_if<KernelStep>(&step)) return kernelKindOfOp(kernelOpName(k->symbol));
  const auto& c = std::get<CollectiveStep>(step);
  if (c.kind == CollectiveStep::Kind::SendRecv) return StepKind::PointToPoint;
  if (c.kind == CollectiveStep::Kind::AllReduceStart) return StepKind::CollectiveStart;
  if (c.kind == CollectiveStep::Kind::AllReduceWait) return StepKind::CollectiveWait;
  if (c.phase == CollectiveStep::Phase::Start) return StepKind::CollectiveStart;
  if (c.phase == CollectiveStep::Phase::Wait) return StepKind::CollectiveWait;
  return StepKind::CollectiveWhole;
}

double gemmFlops(const GemmStep& g) {
  return 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m) * static_cast<double>(g.n) *
         static_cast<double>(g.k);
}

KindTotals kindTotals(const Function& function, const std::vector<double>& seconds) {
  if (!seconds.empty() && seconds.size() != function.steps.size())
    throw std::invalid_argument("kindTotals: " + std::to_string(seconds.size()) + " step times for @" + function.name +
                                "'s " + std::to_string(function.steps.size()) + " steps");
  KindTotals t;
  for (size_t i = 0; i < function.steps.size(); ++i) {
    int kind = static_cast<int>(stepKindOf(function.steps[i]));
    ++t.steps[kind];
    if (!seconds.empty()) {
      t.seconds[kind] += seconds[i];
      t.total += seconds[i];
    }
    if (auto* g = std::get_if<GemmStep>(&function.steps[i])) t.gemmFlops += gemmFlops(*g);
  }
  return t;
}

}  // namespace tessel::rt
