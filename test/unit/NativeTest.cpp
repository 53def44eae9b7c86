// The native path (lowering, generated and fused C++ kernels, OpenBLAS, the memory plan)
// computes what the f64 reference interpreter computes, on the GPT example: the forward
// loss, every gradient, and one AdamW update.
#include "dsl/trainer/Flags.h"
#include "examples/gpt/model.h"
#include "runtime/io/SafeTensors.h"
#include "test/unit/NativeTokens.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

namespace {

struct Fixture : tessel::test::RandomTokens {
  gpt::Config cfg{.layers = 2, .channels = 24, .heads = 3, .seq = 9};
  Fixture() : RandomTokens(3, 9) {}
};

tessel::NativeOptions options() {
  return {.cache_dir = (std::filesystem::path(testing::TempDir()) / "tessel-native-test").string(),
          .seed = 5};
}

using tessel::test::relError;
using tessel::test::stateOf;

// Tolerance: f32 kernels vs f64 reference. Each value is a chain of ~10 ops per layer whose
// longest reduction is 4C = 96 terms; rounding grows like (terms) * 2^-24 ~ 6e-6 per
// reduction and compounds mildly through layers. 1e-4 of each tensor's magnitude leaves a
// margin of ~10x over what we measure while still catching any indexing or formula mistake
// (those give errors of order 1).
constexpr double kTolerance = 1e-4;

TEST(Native, GradientsMatchTheReference) {
  Fixture f;
  gpt::GPT model(f.cfg);
  gpt::build(model, f.batch);
  tessel::Program program = model.compile({.optimizer = "none"});
  tessel::NativeProgram native = program.native(options());
  tessel::rt::Executor& ex = native.executor();

  // The same initial values on both sides: the reference takes the native f32 parameters.
  std::map<std::string, tessel::ref::Tensor> state = stateOf(program, ex);
  std::vector<tessel::ref::Tensor> want = program.train_step_reference(state, f.refInputs());

  f.feed(ex, "train_step");
  ex.run("train_step");
  auto got = ex.outputs("train_step");
  ASSERT_EQ(got.size(), want.size());
  EXPECT_NEAR(got[0].value(), want[0].data[0], kTolerance * want[0].data[0]) << "loss";
  for (size_t i = 1; i < got.size(); ++i)
    EXPECT_LT(relError(static_cast<const float*>(got[i].data), want[i]), kTolerance)
        << "gradient of " << program.state()[i - 1].name;
  EXPECT_GT(native.arena_bytes(), 0);
  EXPECT_LE(ex.highWaterBytes(), native.arena_bytes());
}

/// One optimizer step natively and on the reference, from the same parameters; `hyper`
/// follows train_inputs() after the model inputs.
void expectStepMatches(const std::string& optimizer, const std::vector<double>& hyper) {
  Fixture f;
  gpt::GPT model(f.cfg);
  gpt::build(model, f.batch);
  tessel::Program program = model.compile({.optimizer = optimizer});
  tessel::NativeProgram native = program.native(options());
  tessel::rt::Executor& ex = native.executor();
  std::map<std::string, tessel::ref::Tensor> state = stateOf(program, ex);
  std::vector<tessel::ref::Tensor> inputs = f.refInputs();
  for (double h : hyper) inputs.push_back(tessel::ref::Tensor::filled({}, h));
  std::vector<tessel::ref::Tensor> want = program.train_step_reference(state, inputs);

  f.feed(ex, "train_step");
  for (size_t i = 0; i < hyper.size(); ++i) {
    float v = static_cast<float>(hyper[i]);
    ex.setInput("train_step", 2 + i, &v, sizeof v);
  }
  ex.run("train_step");
  auto got = ex.outputs("train_step");
  EXPECT_NEAR(got[0].value(), want[0].data[0], kTolerance * want[0].data[0]) << "loss";
  EXPECT_NEAR(got[1].value(), want[1].data[0], kTolerance * want[1].data[0]) << "grad norm";
  ASSERT_GT(want[1].data[0], hyper.back()) << "the clip threshold must be below the norm";
  // After one step every parameter moved by about lr (AdamW: ~lr * sign(g)); compare the
  // update relative to lr. f32 rounding of a gradient near 0 can flip an AdamW element's
  // direction, so require 99.9% of elements within 1e-3 of lr and all within 2 lr (the
  // largest possible disagreement). SGD moves by lr * g and agrees much more tightly.
  const double lr = hyper[0];
  for (const tessel::ParameterSpec& p : program.state()) {
    const float* d = ex.data(ex.bufferId(p.name));
    const tessel::ref::Tensor& w = state.at(p.name);
    int64_t bad = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      double diff = std::abs(d[i] - w.data[i]);
      EXPECT_LE(diff, 2.0 * lr + 1e-6) << p.name << "[" << i << "]";
      bad += diff > 1e-3 * lr + 1e-7 * std::abs(w.data[i]);
    }
    EXPECT_LE(bad, std::max<int64_t>(1, w.numel() / 1000)) << p.name;
  }
}

// lr, beta1, beta2, eps, weight_decay, step, max_grad_norm: a clipping threshold below the
// gradient norm so the clip path is exercised.
TEST(Native, AdamWStepMatchesTheReference) {
  expectStepMatches("adamw", {1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0, 0.5});
}

// lr, momentum, weight_decay, step, max_grad_norm; with momentum 0 the buffer is unused and
// must pass through unchanged (torch.optim.SGD), with momentum it starts as the gradient.
TEST(Native, SgdStepMatchesTheReference) {
  expectStepMatches("sgd", {1e-2, 0.0, 0.1, 1.0, 0.5});
  expectStepMatches("sgd", {1e-2, 0.9, 0.1, 1.0, 0.5});
  expectStepMatches("sgd", {1e-2, 0.9, 0.1, 3.0, 0.5});  // not the first step: buf = 0.9 buf + g
}

// Every form of constant the fused emitter writes compiles and computes the right thing:
// whole numbers (a literal "2f" would not compile), tiny and negative factors, an epsilon.
TEST(Native, FusedConstantsOfEveryFormCompile) {
  struct M : tessel::Model {
    tessel::LayerNorm ln{this, "ln", 8, /*eps=*/1.0};
  } m;
  tessel::Tensor x = m.input("x", {3, 8});
  tessel::Tensor y = tessel::scale(tessel::scale(m.ln(x), 2.0), -1e-30) * 1.0;
  m.set_loss(tessel::reduce_sum(tessel::scale(y, 1e30), {0, 1}));
  tessel::Program p = m.compile({.train = false});
  tessel::NativeProgram native = p.native(options());
  std::vector<float> input(24);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 5) - 2.0f;
  native.executor().setInput("forward", 0, input.data(), input.size() * sizeof(float));
  native.executor().run("forward");
  std::map<std::string, tessel::ref::Tensor> params = stateOf(p, native.executor());
  double want = p.run_reference(params, {tessel::ref::Tensor({3, 8}, std::vector<double>(
                                                                         input.begin(), input.end()))})[0]
                    .data[0];
  EXPECT_NEAR(native.executor().outputs("forward")[0].value(), want, 1e-4 + 1e-5 * std::abs(want));
}

struct WithUnused : tessel::Model {
  tessel::Linear used{this, "used", 4, 4};
  tessel::Linear unused{this, "unused", 4, 4};
};

// A loss that ignores a parameter still trains: the parameter gets an explicit zero
// gradient (and AdamW then leaves it unchanged), and compiling prints a remark.
TEST(Native, UnusedParameterTrainsWithZeroGradientAndARemark) {
  for (const char* optimizer : {"none", "adamw"}) {
    SCOPED_TRACE(optimizer);
    WithUnused m;
    tessel::Tensor x = m.input("x", {2, 4});
    tessel::Tensor y = m.used(x);
    m.set_loss(tessel::reduce_mean(y * y, {0, 1}));
    testing::internal::CaptureStderr();
    tessel::Program p = m.compile({.optimizer = optimizer});
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("remark: parameter 'unused.weight' does not affect the loss; its gradient is zero, so it "
                       "is not all-reduced and the optimizer leaves it as it is: no update, no weight decay, no "
                       "optimizer state (as torch.optim skips a parameter whose .grad is None) [unused]"),
              std::string::npos)
        << err;
    tessel::NativeProgram native = p.native(options());
    tessel::rt::Executor& ex = native.executor();
    std::vector<float> input{1, -2, 3, 0.5f, -1, 2, 0.25f, 4};
    const float* w = ex.data(ex.bufferId("unused.weight"));
    std::vector<float> before(w, w + 16);
    const float* u = ex.data(ex.bufferId("used.weight"));
    std::vector<float> usedBefore(u, u + 16);
    ex.setInput("train_step", 0, input.data(), input.size() * sizeof(float));
    std::vector<float> hyper{1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, INFINITY};
    for (size_t i = 1; i < ex.program().function("train_step")->inputs.size(); ++i)
      ex.setInput("train_step", i, &hyper[i - 1], sizeof(float));
    ex.run("train_step");
    if (std::string(optimizer) == "none") {
      auto out = ex.outputs("train_step");
      ASSERT_EQ(out.size(), 5u);  // loss, used.weight, used.bias, unused.weight, unused.bias
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(out[3].value(i), 0.0f);
      double usedNorm = 0;
      for (int64_t i = 0; i < 16; ++i) usedNorm += std::abs(out[1].value(i));
      EXPECT_GT(usedNorm, 0.0);
    } else {
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(w[i], before[i]) << "unused.weight moved";
      EXPECT_NE(std::vector<float>(u, u + 16), usedBefore) << "used.weight did not train";
    }
  }
}

/// One linear layer of width `n` named "fc" (so two widths share parameter names).
struct OneLinear : tessel::Model {
  int64_t n;
  tessel::Linear fc;
  explicit OneLinear(int64_t width) : n(width), fc(this, "fc", 4, width) {}
};

tessel::NativeProgram forwardOf(OneLinear& m) {
  tessel::Tensor x = m.input("x", {2, 4});
  m.add_output("y", m.fc(x));
  return m.compile({.train = false}).native(options());
}

// Copying parameters between programs never skips one silently: a parameter of the same
// name and another size (a tensor-parallel shard, whose sampler once kept its random initial
// values) is an error naming it, and the gathered, full-size tensors copy by name.
TEST(Native, CopyingParametersRefusesOtherSizesAndTakesGatheredTensors) {
  OneLinear wide(8), narrow(4);
  tessel::NativeProgram a = forwardOf(wide), b = forwardOf(narrow);
  try {
    b.copy_parameters_from(a.executor());
    FAIL() << "copied a parameter of another size";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'fc.weight' holds 64 bytes here but 128 in the source"), std::string::npos)
        << e.what();
  }
  tessel::SafeTensorsFile full;
  std::vector<float> w(16), bias(4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = -1.0f - static_cast<float>(i);
  full.tensors["fc.weight"] = tessel::StTensor::fromF32({4, 4}, w);
  full.tensors["fc.bias"] = tessel::StTensor::fromF32({4}, bias);
  EXPECT_EQ(b.copy_parameters_from(full), 2);
  tessel::rt::Executor& ex = b.executor();
  const float* got = ex.data(ex.bufferId("fc.weight"));
  EXPECT_EQ(std::vector<float>(got, got + 16), w);
  const float* gotBias = ex.data(ex.bufferId("fc.bias"));
  EXPECT_EQ(std::vector<float>(gotBias, gotBias + 4), bias);
  full.tensors["fc.bias"] = tessel::StTensor::fromF32({5}, std::vector<float>(5, 0.0f));
  EXPECT_THROW(b.copy_parameters_from(full), std::runtime_error);
}

}  // namespace
