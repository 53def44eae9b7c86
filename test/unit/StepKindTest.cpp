// The step kinds of --profile's summary (runtime/exec/StepKind.h) on a lowered GPT program:
// every step has a kind from the program (no step falls to "other" but the embedding's and the
// scratch reset's), the GEMM kind counts exactly the GemmSteps, and the shares of a summary sum
// to 100%. Also the symbol parsing and the fused-kernel rule on hand-made names.
#include "runtime/exec/StepKind.h"

#include "examples/gpt/model.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace tessel::rt {
namespace {

Program gptProgram() {
  gpt::GPT model({.layers = 2, .channels = 64, .heads = 4, .seq = 32});
  gpt::build(model, 4);
  return model.compile().lower(/*cuda_kernels=*/false);
}

TEST(StepKindTest, KernelOpNameStripsTheNumberPrefixOnly) {
  EXPECT_EQ(kernelOpName("k12_layer_norm"), "layer_norm");
  EXPECT_EQ(kernelOpName("k3_fused_add_gelu"), "fused_add_gelu");
  EXPECT_EQ(kernelOpName("k0_reset_scratch"), "reset_scratch");
  EXPECT_EQ(kernelOpName("kx_add"), "kx_add");   // no number: not a generated name
  EXPECT_EQ(kernelOpName("k12"), "k12");
  EXPECT_EQ(kernelOpName("my_kernel"), "my_kernel");
}

TEST(StepKindTest, OpNamesMapToTheirKinds) {
  EXPECT_EQ(kernelKindOfOp("layer_norm_grad"), StepKind::Row);
  EXPECT_EQ(kernelKindOfOp("softmax"), StepKind::Row);
  EXPECT_EQ(kernelKindOfOp("reduce_sum"), StepKind::Row);
  EXPECT_EQ(kernelKindOfOp("gelu_grad"), StepKind::Elementwise);
  EXPECT_EQ(kernelKindOfOp("add"), StepKind::Elementwise);
  EXPECT_EQ(kernelKindOfOp("transpose"), StepKind::Layout);
  EXPECT_EQ(kernelKindOfOp("concat"), StepKind::Layout);
  EXPECT_EQ(kernelKindOfOp("adamw"), StepKind::Optimizer);
  EXPECT_EQ(kernelKindOfOp("global_norm"), StepKind::Optimizer);
  EXPECT_EQ(kernelKindOfOp("causal_attention"), StepKind::Attention);
  EXPECT_EQ(kernelKindOfOp("embedding_grad"), StepKind::Other);
  // A fused kernel is a row kernel when a member reduces rows, elementwise otherwise.
  EXPECT_EQ(kernelKindOfOp("fused_add_layer_norm"), StepKind::Row);
  EXPECT_EQ(kernelKindOfOp("fused_softmax_grad_scale"), StepKind::Row);
  EXPECT_EQ(kernelKindOfOp("fused_add_gelu"), StepKind::Elementwise);
  EXPECT_EQ(kernelKindOfOp("fused_mul_add_and_3_more"), StepKind::Elementwise);
  EXPECT_EQ(kernelKindOfOp("fused_mul_adamw"), StepKind::Optimizer);  // the gradient's scaling fused in
}

TEST(StepKindTest, CollectivesSplitIntoHalvesAndPointToPoint) {
  CollectiveStep c;
  c.kind = CollectiveStep::Kind::AllReduceStart;
  EXPECT_EQ(stepKindOf(c), StepKind::CollectiveStart);
  c.kind = CollectiveStep::Kind::AllReduceWait;
  EXPECT_EQ(stepKindOf(c), StepKind::CollectiveWait);
  c.kind = CollectiveStep::Kind::SendRecv;  // --profile once labelled these all_reduce_wait
  EXPECT_EQ(stepKindOf(c), StepKind::PointToPoint);
  c.kind = CollectiveStep::Kind::AllGather;
  EXPECT_EQ(stepKindOf(c), StepKind::CollectiveWhole);
  c.phase = CollectiveStep::Phase::Start;
  EXPECT_EQ(stepKindOf(c), StepKind::CollectiveStart);
  EXPECT_EQ(stepKindOf(CopyStep{}), StepKind::Layout);
}

TEST(StepKindTest, LoweredGptStepsAllHaveKindsAndGemmsCountExactly) {
  Program p = gptProgram();
  const Function* f = p.function("train_step");
  ASSERT_NE(f, nullptr);
  int64_t gemms = 0;
  double flops = 0;
  std::set<std::string> others;
  for (const Step& s : f->steps) {
    if (auto* g = std::get_if<GemmStep>(&s)) {
      ++gemms;
      flops += 2.0 * g->batch * g->m * g->n * g->k;
    }
    StepKind kind = stepKindOf(s);
    EXPECT_NE(std::string(stepKindName(kind)), "");
    if (kind == StepKind::Other) others.insert(kernelOpName(std::get<KernelStep>(s).symbol));
  }
  // Only the embedding's kernels are "other" in a GPT: every other kernel has a named kind.
  for (const std::string& op : others) EXPECT_TRUE(op.rfind("embedding", 0) == 0 || op == "reset_scratch") << op;
  // Uniform step times: the shares are the step counts' and must sum to 100%.
  std::vector<double> seconds(f->steps.size(), 1e-3);
  KindTotals t = kindTotals(*f, seconds);
  EXPECT_EQ(t.steps[static_cast<int>(StepKind::Gemm)], gemms);
  EXPECT_GT(gemms, 0);
  EXPECT_DOUBLE_EQ(t.gemmFlops, flops);
  EXPECT_EQ(std::accumulate(t.steps.begin(), t.steps.end(), int64_t{0}), static_cast<int64_t>(f->steps.size()));
  double share = 0;
  for (double s : t.seconds) share += 100.0 * s / t.total;
  EXPECT_NEAR(share, 100.0, 1e-9);  // a sum of f->steps.size() doubles: rounding only
  // A GPT step has row kernels (layer norms, softmax), elementwise kernels and an optimizer.
  EXPECT_GT(t.steps[static_cast<int>(StepKind::Row)], 0);
  EXPECT_GT(t.steps[static_cast<int>(StepKind::Elementwise)], 0);
  EXPECT_GT(t.steps[static_cast<int>(StepKind::Optimizer)], 0);
  EXPECT_THROW(kindTotals(*f, std::vector<double>(3, 1.0)), std::invalid_argument);
}

}  // namespace
}  // namespace tessel::rt
