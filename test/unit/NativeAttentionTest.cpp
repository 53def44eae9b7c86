// The native path (lowering, the generated rope kernel, the fused grouped-query attention
// kernels, OpenBLAS) computes what the f64 reference interpreter computes, on a
// small Llama-style attention model: rope on q and k, grouped-query causal attention with
// kv_heads < heads, an output projection and a tied LM head; the loss and every gradient,
// then a few AdamW steps that lower the loss, in f32 and in bf16 mixed precision.
#include "test/unit/NativeTokens.h"
#include "test/unit/TinyLlamaAttention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

namespace {

/// 6 query heads and 2 kv heads (G = 3) of D = 4.
struct Gqa6x2 : tessel::test::TinyLlamaAttention {
  Gqa6x2() : TinyLlamaAttention(6, 2, 4) {}
};

constexpr int64_t kBatch = 3, kSeq = 9;

struct Data : tessel::test::RandomTokens {
  Data() : RandomTokens(kBatch, kSeq, 256) {}
};

tessel::NativeOptions options() {
  return {.cache_dir = (std::filesystem::path(testing::TempDir()) / "tessel-native-test").string(),
          .seed = 11};
}

// Tolerance: f32 kernels against f64, as NativeTest.cpp: chains of ~15 ops whose longest
// reduction is 256 terms (the LM head's); rounding ~256 * 2^-24 ~ 2e-5 per reduction, so
// 1e-4 of each tensor's magnitude, while an indexing or pairing mistake is O(1).
constexpr double kTolerance = 1e-4;

TEST(NativeAttention, LossAndGradientsMatchTheReference) {
  Data data;
  Gqa6x2 model;
  model.build(kBatch, kSeq);
  tessel::Program program = model.compile({.optimizer = "none"});
  tessel::NativeProgram native = program.native(options());
  tessel::rt::Executor& ex = native.executor();
  std::map<std::string, tessel::ref::Tensor> state = tessel::test::stateOf(program, ex);
  std::vector<tessel::ref::Tensor> want = program.train_step_reference(state, data.refInputs());
  data.feed(ex, "train_step");
  ex.run("train_step");
  auto got = ex.outputs("train_step");
  ASSERT_EQ(got.size(), want.size());
  EXPECT_NEAR(got[0].value(), want[0].data[0], kTolerance * want[0].data[0]) << "loss";
  for (size_t i = 1; i < got.size(); ++i) {
    EXPECT_LT(tessel::test::relError(static_cast<const float*>(got[i].data), want[i]), kTolerance)
        << "gradient of " << program.state()[i - 1].name;
  }
}

// Training lowers the loss on a fixed batch (memorisation): 30 AdamW steps at lr 1e-2 take a
// random-init byte model from ~ln 256 = 5.5 well below it, in f32 and in bf16 mixed precision
// (rope and the attention then run in bf16). A broken backward of rope or of the grouped
// attention stalls it near 5.5.
TEST(NativeAttention, TrainingLowersTheLossInF32AndBf16) {
  Data data;
  for (tessel::DType precision : {tessel::DType::F32, tessel::DType::BF16}) {
    SCOPED_TRACE(precision == tessel::DType::F32 ? "f32" : "bf16");
    Gqa6x2 model;
    model.build(kBatch, kSeq);
    tessel::Program program = model.compile({.precision = precision});
    tessel::NativeProgram native = program.native(options());
    tessel::rt::Executor& ex = native.executor();
    // lr, beta1, beta2, eps, weight_decay, step, max_grad_norm (train_inputs order).
    std::vector<float> hyper{1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.0f, 1.0f};
    double first = 0, last = 0;
    for (int step = 1; step <= 30; ++step) {
      hyper[5] = static_cast<float>(step);
      data.feed(ex, "train_step");
      for (size_t i = 0; i < hyper.size(); ++i)
        ex.setInput("train_step", 2 + i, &hyper[i], sizeof(float));
      ex.run("train_step");
      double loss = ex.outputs("train_step")[0].value();
      ASSERT_TRUE(std::isfinite(loss)) << "step " << step;
      (step == 1 ? first : last) = loss;
    }
    EXPECT_GT(first, 4.5);
    EXPECT_LT(last, first - 1.0);
  }
}

// Activation checkpointing recomputes rope and the grouped attention (full: the whole block;
// selective, decomposed: the core attention between the two matmuls, through the G*T
// reshapes) with the same kernels, so the loss and every gradient are bitwise those of the
// run without it. The fused attention saves no probabilities, so selective checkpointing
// has nothing to recompute there: its program is the plain one.
TEST(NativeAttention, CheckpointingRecomputesTheSameBits) {
  Data data;
  for (bool decomposed : {false, true}) {
  SCOPED_TRACE(decomposed ? "decomposed" : "fused");
  auto run = [&](const tessel::Plan& plan) {
    Gqa6x2 model;
    model.build(kBatch, kSeq);
    tessel::Program program =
        model.compile({.optimizer = "none", .plan = plan, .decompose_attention = decomposed});
    tessel::NativeProgram native = program.native(options());
    data.feed(native.executor(), "train_step");
    native.executor().run("train_step");
    std::vector<std::vector<float>> out;
    for (const auto& o : native.executor().outputs("train_step")) {
      const auto* d = static_cast<const float*>(o.data);
      out.emplace_back(d, d + o.numel);
    }
    return std::make_pair(out, program.ir());
  };
  auto [plain, plainIr] = run(tessel::Plan());
  for (tessel::CheckpointMode mode : {tessel::CheckpointMode::Full, tessel::CheckpointMode::Selective}) {
    SCOPED_TRACE(tessel::checkpointModeName(mode));
    auto [again, ir] = run(tessel::Plan().checkpoint("blocks.*", mode));
    if (decomposed || mode == tessel::CheckpointMode::Full)
      EXPECT_NE(ir, plainIr) << "nothing was recomputed";
    else
      EXPECT_EQ(ir, plainIr) << "fused attention: nothing to recompute";
    EXPECT_EQ(again, plain);
  }
  }
}

}  // namespace
