// What kind of work a program step does, for --profile's summary by kind (GEMM, row kernels,
// elementwise, layout copies, optimizer, collectives, attention) and for anything else that
// wants the step mix of a program. Runtime only: read from the program (the step's variant and,
// for a kernel step, the op its symbol names), never from timing.
#pragma once

#include "runtime/exec/Program.h"

#include <array>
#include <string>
#include <vector>

namespace tessel::rt {

/// The kinds, in the order summaries list them.
enum class StepKind {
  Gemm,             // a GemmStep
  Row,              // a kernel with a row reduction: layer_norm(_grad), rms_norm(_grad), softmax(_grad),
                    // cross_entropy(_grad), fused_classifier, the vocab-parallel row statistics,
                    // reduce_sum / reduce_mean, and a fused kernel with any of them (and no optimizer op)
  Elementwise,      // add, sub, mul, scale, activations and their gradients, cast, constant,
                    // broadcast, rope, and a fused kernel of those only
  Layout,           // transpose, split, concat, dynamic_slice kernels and every CopyStep
  Optimizer,        // adamw, sgd, global_norm, clip_coefficient, and a fused kernel with any of them
  Attention,        // a fused attention kernel (causal_attention, grouped_attention, *attention*)
  CollectiveStart,  // the start half of an asynchronous collective (all-reduce bucket, FSDP gather)
  CollectiveWait,   // its wait half
  CollectiveWhole,  // a synchronous one-step shard move (all_gather, reduce_scatter, all_to_all)
  PointToPoint,     // a pipeline send/recv group
  Other,            // embeddings (gathers and scatters), the scratch reset, anything unknown
};
inline constexpr int kStepKinds = 11;

/// "gemm", "row", "elementwise", "layout", "optimizer", "attention", "collective_start",
/// "collective_wait", "collective", "send_recv", "other".
const char* stepKindName(StepKind kind);

/// The op a generated kernel's symbol names: "layer_norm" for "k12_layer_norm",
/// "fused_add_gelu" for "k3_fused_add_gelu" (codegen/Lowering.cpp names every kernel
/// k<n>_<op's name> or k<n>_fused_<member ops>); the symbol itself if it has no k<n>_ prefix.
std::string kernelOpName(const std::string& symbol);

/// The kind of a kernel that computes op `name` (kernelOpName's result; see StepKind).
StepKind kernelKindOfOp(const std::string& name);

/// The kind of `step`.
StepKind stepKindOf(const Step& step);

/// The FLOPs of a GEMM step: 2 * batch * m * n * k (the product only; an epilogue adds O(m n)).
double gemmFlops(const GemmStep& g);

/// Per kind: the step count and summed seconds of `function`'s steps, given per-step
/// `seconds` (Executor::stepSeconds, same length as function.steps; empty: counts only).
struct KindTotals {
  std::array<int64_t, kStepKinds> steps{};
  std::array<double, kStepKinds> seconds{};
  double total = 0;       // sum of all seconds
  double gemmFlops = 0;   // sum of gemmFlops over the GEMM steps (one run)
};
KindTotals kindTotals(const Function& function, const std::vector<double>& seconds);

}  // namespace tessel::rt
