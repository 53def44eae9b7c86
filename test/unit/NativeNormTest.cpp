// The native path (generated C++ kernels, fusion, OpenBLAS) on a small Llama-style model built
// from RMSNorm, silu/swiglu and rms_norm: the gradients of @train_step match the f64 reference
// interpreter's (the fused SwiGLU gate and residual add + rms_norm kernels among them),
// activation checkpointing of the blocks leaves them bit for bit unchanged, and AdamW lowers
// the loss, in f32 and in bf16 mixed precision.
#include "test/support/TinyLlamaMlp.h"
#include "test/unit/NativeTokens.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <variant>

namespace {

/// Two MLP blocks of C = 16, H = 24 over V = 32 (test/support/TinyLlamaMlp.h).
struct TinyLlamaMlp : tessel::test::TinyLlamaMlp {
  static constexpr int64_t V = 32;
  TinyLlamaMlp() : tessel::test::TinyLlamaMlp(2, V, 16, 24) {}
};

constexpr int64_t kBatch = 3, kSeq = 5;

struct Data : tessel::test::RandomTokens {
  Data() : RandomTokens(kBatch, kSeq, TinyLlamaMlp::V) {}
};

tessel::NativeOptions options() {
  return {.cache_dir = (std::filesystem::path(testing::TempDir()) / "tessel-native-norm").string(),
          .seed = 11};
}

// f32 kernels against the f64 reference: every value is a short chain (~15 ops) whose longest
// reductions are C = 16 .. H = 24 terms and the V = 32 softmax, so rounding is ~(terms) 2^-24
// ~ 1e-6 per reduction; 1e-4 of each tensor's largest magnitude (as NativeTest.cpp) is a margin
// of ~30x, while a wrong formula or index gives an O(1) error.
constexpr double kTolerance = 1e-4;

TEST(NativeNorm, GradientsMatchTheReference) {
  // Twice: without GEMM epilogues, block 0's residual add fuses with block 1's rms_norm (the
  // fused_add_rms_norm kernel); with them (the default), the add is the down projection's
  // residual epilogue instead, and the rms_norm runs alone.
  for (bool epilogues : {false, true}) {
    SCOPED_TRACE(epilogues ? "with GEMM epilogues" : "without GEMM epilogues");
    Data data;
    TinyLlamaMlp model;
    model.build(kBatch, kSeq);
    tessel::Program program = model.compile({.optimizer = "none", .fuse_gemm_epilogues = epilogues});
    tessel::NativeProgram native = program.native(options());
    tessel::rt::Executor& ex = native.executor();
    std::map<std::string, tessel::ref::Tensor> state;
    for (const tessel::ParameterSpec& p : program.state()) {
      float* d = ex.data(ex.bufferId(p.name));
      int64_t n = 1;
      for (int64_t s : p.shape) n *= s;
      // The norm weights start at 1; move them so that a dropped weight shows.
      if (p.name.find("norm") != std::string::npos)
        for (int64_t i = 0; i < n; ++i) d[i] = 0.5f + 0.1f * static_cast<float>(i % 7);
      state.emplace(p.name, tessel::ref::Tensor(p.shape, std::vector<double>(d, d + n)));
    }
    // The fused kernels are among those checked: the SwiGLU gate, and the residual add of block
    // 0 with block 1's rms_norm.
    std::set<std::string> kernels;
    int residualEpilogues = 0;
    for (const tessel::rt::Step& s : ex.program().function("train_step")->steps) {
      if (auto* k = std::get_if<tessel::rt::KernelStep>(&s))
        kernels.insert(k->symbol.substr(k->symbol.find('_') + 1));
      if (auto* g = std::get_if<tessel::rt::GemmStep>(&s)) residualEpilogues += g->epilogue.residual >= 0;
    }
    EXPECT_TRUE(kernels.count("fused_silu_mul")) << "no fused SwiGLU gate";
    if (epilogues)
      EXPECT_GT(residualEpilogues, 0) << "no residual add fused into a GEMM";
    else
      EXPECT_TRUE(kernels.count("fused_add_rms_norm")) << "no fused residual add + rms_norm";
    std::vector<tessel::ref::Tensor> want = program.train_step_reference(state, data.refInputs());
    data.feed(ex, "train_step");
    ex.run("train_step");
    auto got = ex.outputs("train_step");
    ASSERT_EQ(got.size(), want.size());
    EXPECT_NEAR(got[0].value(), want[0].data[0], kTolerance * want[0].data[0]) << "loss";
    for (size_t i = 1; i < got.size(); ++i) {
      const tessel::ref::Tensor& w = want[i];
      double scale = 0;
      for (double v : w.data) scale = std::max(scale, std::abs(v));
      EXPECT_LT(tessel::test::relError(static_cast<const float*>(got[i].data), w), kTolerance)
          << "gradient of " << program.state()[i - 1].name;
      EXPECT_GT(scale, 1e-6) << "gradient of " << program.state()[i - 1].name << " is zero";
    }
  }
}

/// The gradients of one @train_step (optimizer "none") natively, from the parameters that the
/// seed draws, under `plan`; `steps` is set to the number of steps of @train_step.
std::vector<std::vector<float>> nativeGradients(const Data& data, const tessel::Plan& plan,
                                                size_t* steps) {
  TinyLlamaMlp model;
  model.build(kBatch, kSeq);
  tessel::Program program = model.compile({.optimizer = "none", .plan = plan});
  tessel::NativeProgram native = program.native(options());
  tessel::rt::Executor& ex = native.executor();
  *steps = ex.program().function("train_step")->steps.size();
  data.feed(ex, "train_step");
  ex.run("train_step");
  std::vector<std::vector<float>> grads;
  for (const auto& out : ex.outputs("train_step")) {
    std::vector<float> g;
    for (int64_t i = 0; i < out.numel; ++i) g.push_back(out.value(i));
    grads.push_back(std::move(g));
  }
  return grads;
}

// Recomputing the blocks (rms_norm, the SwiGLU kernels) in the backward pass runs the same
// kernels on the same values, so the loss and every gradient are bitwise those without it.
// (Full mode: selective checkpointing recomputes only core attention, which these blocks lack.)
TEST(NativeNorm, CheckpointedBlocksGiveTheSameGradients) {
  Data data;
  size_t plainSteps = 0, rematSteps = 0;
  std::vector<std::vector<float>> plain = nativeGradients(data, tessel::Plan(), &plainSteps);
  std::vector<std::vector<float>> remat =
      nativeGradients(data, tessel::Plan().checkpoint("blocks.*"), &rematSteps);
  EXPECT_GT(rematSteps, plainSteps) << "nothing was recomputed";
  ASSERT_EQ(remat.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(remat[i], plain[i]) << "output " << i;
}

/// 30 AdamW steps on one batch (lr 1e-2): the loss must fall well below its start, which is
/// near ln V = 3.47 for N(0, 0.02^2) weights; memorising 15 tokens takes it far lower.
double lossAfterTraining(tessel::DType precision, double* first) {
  Data data;
  TinyLlamaMlp model;
  model.build(kBatch, kSeq);
  tessel::Program program = model.compile({.precision = precision});
  tessel::NativeProgram native = program.native(options());
  tessel::rt::Executor& ex = native.executor();
  std::vector<float> hyper{1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, INFINITY};
  double loss = 0;
  for (int step = 1; step <= 30; ++step) {
    data.feed(ex, "train_step");
    hyper[5] = static_cast<float>(step);
    for (size_t i = 2; i < ex.program().function("train_step")->inputs.size(); ++i)
      ex.setInput("train_step", i, &hyper[i - 2], sizeof(float));
    ex.run("train_step");
    loss = ex.outputs("train_step")[0].value();
    if (step == 1) *first = loss;
  }
  return loss;
}

TEST(NativeNorm, AdamWLowersTheLossInF32AndBf16) {
  for (tessel::DType precision : {tessel::DType::F32, tessel::DType::BF16}) {
    SCOPED_TRACE(precision == tessel::DType::F32 ? "f32" : "bf16");
    double first = 0, last = lossAfterTraining(precision, &first);
    EXPECT_NEAR(first, std::log(32.0), 0.2);  // small random weights: nearly uniform logits
    EXPECT_LT(last, 0.5 * first);
  }
}

}  // namespace
