// The DSL: shape errors in a model source become diagnostics at the user's line with the
// module's parameter path; models build the IR the dialect documents.
#include "dsl/tessel.h"
#include "examples/gpt/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <source_location>

namespace {

using tessel::DType;
using tessel::ModelError;
using tessel::Tensor;

/// Runs `body`, expects a ModelError, and returns its diagnostic.
template <typename F>
tessel::Diagnostic diagnosticOf(F&& body) {
  try {
    body();
  } catch (const ModelError& e) {
    return e.diagnostic();
  }
  ADD_FAILURE() << "expected a tessel::ModelError";
  return {};
}

struct TwoLayer : tessel::Model {
  tessel::Linear fc1{this, "encoder.fc1", 64, 32};
  tessel::Linear fc2{this, "encoder.fc2", 48, 10};  // deliberately wrong: fc1 gives 32
};

TEST(DslDiagnostics, LinearShapeErrorPointsAtTheCallerLineAndPath) {
  TwoLayer m;
  Tensor x = m.input("x", {8, 64});
  int line = 0;
  tessel::Diagnostic d = diagnosticOf([&] {
    Tensor h = m.fc1(x);
    line = static_cast<int>(std::source_location::current().line()) + 1;
    Tensor y = m.fc2(h);
  });
  EXPECT_EQ(d.file, std::source_location::current().file_name());
  EXPECT_EQ(d.line, line);
  EXPECT_EQ(d.path, "encoder.fc2");
  EXPECT_NE(d.message.find("contracting dimensions differ"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("8x32"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("10x48"), std::string::npos) << d.message;
  // The full text reads like a compiler diagnostic.
  try {
    m.fc2(m.fc1(x));
  } catch (const ModelError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(".cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find(": error: 'tessel.matmul' op"), std::string::npos) << what;
    EXPECT_NE(what.find("[encoder.fc2]"), std::string::npos) << what;
  }
}

struct Residual : tessel::Model {
  tessel::Linear up{this, "block.up", 16, 24};
  int line = 0;
  Tensor forward(const Tensor& x) {
    tessel::Module::Scope scope = up.scope();
    line = static_cast<int>(std::source_location::current().line()) + 1;
    return x + up(x);  // [4, 16] + [4, 24]: does not broadcast
  }
};

TEST(DslDiagnostics, OperatorErrorCarriesTheExpressionLineAndScopePath) {
  Residual m;
  Tensor x = m.input("x", {4, 16});
  tessel::Diagnostic d = diagnosticOf([&] { m.forward(x); });
  EXPECT_EQ(d.file, std::source_location::current().file_name());
  EXPECT_EQ(d.line, m.line);  // the `return x + up(x);` line, not a line inside the DSL
  EXPECT_EQ(d.path, "block.up");
  EXPECT_NE(d.message.find("'tessel.add' op shapes 4x16 and 4x24 do not broadcast"),
            std::string::npos)
      << d.message;
}

TEST(DslDiagnostics, GptWithIndivisibleHeadsPointsAtTheModelSource) {
  gpt::GPT model(gpt::Config{.layers = 1, .channels = 48, .heads = 5, .seq = 8});
  tessel::Diagnostic d = diagnosticOf([&] { gpt::build(model, 2); });
  EXPECT_NE(d.file.find("examples/gpt/model.h"), std::string::npos) << d.file;
  EXPECT_GT(d.line, 0);
  EXPECT_EQ(d.path, "blocks.0");
  EXPECT_NE(d.message.find("not divisible by 5 heads"), std::string::npos) << d.message;
}

TEST(DslDiagnostics, DTypeErrors) {
  tessel::Model m;
  Tensor x = m.input("x", {4, 8});
  Tensor ids = m.input("ids", {4}, DType::I32);
  EXPECT_NE(diagnosticOf([&] { tessel::gelu(ids); }).message.find("must be a float tensor"),
            std::string::npos);
  EXPECT_NE(diagnosticOf([&] { tessel::cross_entropy(x, x); }).message.find("must be an i32"),
            std::string::npos);
}

TEST(DslDiagnostics, MisuseOfTheModelIsReported) {
  tessel::Model m;
  Tensor x = m.input("x", {4, 8});
  Tensor empty;
  EXPECT_NE(diagnosticOf([&] { tessel::relu(empty); }).message.find("empty tessel::Tensor"),
            std::string::npos);
  EXPECT_NE(diagnosticOf([&] { m.input("x", {2}); }).message.find("declared twice"),
            std::string::npos);
  EXPECT_NE(diagnosticOf([&] { m.set_loss(x); }).message.find("f32 scalar"), std::string::npos);
  EXPECT_NE(diagnosticOf([&] { m.compile(); }).message.find("no outputs"), std::string::npos);

  tessel::Model other;
  Tensor y = other.input("y", {4, 8});
  EXPECT_NE(diagnosticOf([&] { (void)(x + y); }).message.find("different model"),
            std::string::npos);
}

struct BadInit : tessel::Model {
  tessel::Linear bad{this, "bad", 4, 4, {.std = -1.0}};
};

TEST(DslDiagnostics, InvalidInitIsReportedAtTheDeclaration) {
  tessel::Diagnostic d = diagnosticOf([] { BadInit m; });
  EXPECT_EQ(d.path, "bad");
  EXPECT_NE(d.message.find("std -1"), std::string::npos) << d.message;
}

// Every kind of error leaves the model usable: building goes on after a caught ModelError,
// and a compiled program is never changed by later calls on its model.
TEST(DslDiagnostics, ModelStaysConsistentAfterErrors) {
  struct Two : tessel::Model {
    tessel::Linear a{this, "a", 4, 4}, b{this, "b", 8, 4};
  } m;
  Tensor x = m.input("x", {2, 4});
  EXPECT_NE(diagnosticOf([&] { m.b(x); }).message.find("contracting"), std::string::npos);
  EXPECT_NE(diagnosticOf([&] { m.b(x); }).message.find("contracting"), std::string::npos);
  Tensor y = m.a(x);
  m.set_loss(tessel::reduce_mean(y, {0, 1}));
  tessel::Program p = m.compile({.train = false});
  std::string before = p.ir();
  EXPECT_NE(diagnosticOf([&] { tessel::relu(y); }).message.find("already compiled"),
            std::string::npos);
  EXPECT_NE(diagnosticOf([&] { m.input("z", {1}); }).message.find("already compiled"),
            std::string::npos);
  EXPECT_EQ(p.ir(), before);
}

TEST(DslDiagnostics, EmptyTensorAnywhereIsNamed) {
  tessel::Model m;
  Tensor x = m.input("x", {2, 4});
  EXPECT_NE(diagnosticOf([&] { (void)(x + Tensor()); }).message.find("empty tessel::Tensor"),
            std::string::npos);
  EXPECT_NE(diagnosticOf([&] { tessel::matmul(x, Tensor()); }).message.find("empty"),
            std::string::npos);
}

TEST(DslDiagnostics, NamesAndShapesAreValidated) {
  EXPECT_NE(diagnosticOf([] { tessel::Model m(""); }).message.find("identifier"),
            std::string::npos);
  tessel::Model m;
  EXPECT_NE(diagnosticOf([&] { m.input("", {2}); }).message.find("non-empty name"),
            std::string::npos);
  // 2^31 x 2^31 x 2^31 overflows int64 when multiplied: refused, not wrapped.
  int64_t big = int64_t{1} << 31;
  EXPECT_NE(diagnosticOf([&] { m.input("huge", {big, big, big}); }).message.find("2^48"),
            std::string::npos);
  Tensor x = m.input("x", {2, 4});
  EXPECT_NE(diagnosticOf([&] { m.add_output("loss", tessel::reduce_sum(x, {0, 1})); })
                .message.find("reserved"),
            std::string::npos);
}

struct Twice : tessel::Model {
  tessel::Linear a{this, "same", 2, 2};
};

TEST(DslDiagnostics, DuplicateParameterNames) {
  Twice m;
  tessel::Diagnostic d = diagnosticOf([&] { tessel::Linear b(&m, "same", 2, 2); });
  EXPECT_NE(d.message.find("'same.weight' is declared twice"), std::string::npos) << d.message;
}

struct WithUnused : tessel::Model {
  tessel::Linear used{this, "used", 4, 4};
  tessel::Linear unused{this, "unused", 4, 4, {.bias = false}};
};

TEST(DslModel, UnusedParametersArePartOfTheProgram) {
  WithUnused m;
  Tensor x = m.input("x", {2, 4});
  m.set_loss(tessel::reduce_mean(m.used(x), {0, 1}));
  tessel::Program p = m.compile();
  std::vector<std::string> names;
  for (const auto& spec : p.parameters()) names.push_back(spec.name);
  EXPECT_EQ(names, (std::vector<std::string>{"used.weight", "used.bias", "unused.weight"}));
  EXPECT_NE(p.ir().find("tessel.param \"unused.weight\""), std::string::npos) << p.ir();
}

TEST(DslModel, CompiledModelCannotBeExtended) {
  tessel::Model m;
  Tensor x = m.input("x", {2, 4});
  m.set_loss(tessel::reduce_sum(x, {0, 1}));
  tessel::Program p = m.compile();
  EXPECT_NE(diagnosticOf([&] { tessel::relu(x); }).message.find("already compiled"),
            std::string::npos);
  EXPECT_THROW(m.compile(), std::logic_error);
}

TEST(DslModel, IrCarriesUserLinesAndParameterPaths) {
  gpt::GPT model(gpt::Config{.layers = 1, .channels = 16, .heads = 2, .seq = 4});
  gpt::build(model, 2);
  tessel::Program p = model.compile({.train = false});
  std::string ir = p.ir(/*locations=*/true);
  EXPECT_NE(ir.find("loc(\"blocks.0.attn.qkv\"("), std::string::npos) << ir;
  EXPECT_NE(ir.find("examples/gpt/model.h\":"), std::string::npos) << ir;
  // The attention stays one fused op (the pipeline no longer decomposes it by default) and
  // keeps the block's path.
  EXPECT_NE(ir.find("heads 2 : tensor<2x4x48xf32> -> tensor<2x4x16xf32> loc("), std::string::npos) << ir;
  EXPECT_EQ(p.outputs(), (std::vector<std::string>{"loss"}));
  ASSERT_EQ(p.inputs().size(), 2u);
  EXPECT_EQ(p.inputs()[0].first, "tokens");
}

// The GPT's parameter count from its closed form: embeddings V*C + T*C, per block
// 2 LN (4C) + qkv (3C*C + 3C) + proj (C*C + C) + fc (4C*C + 4C) + mlp.proj (4C*C + C),
// final LN 2C; the LM head is tied and adds nothing.
TEST(DslModel, GptParameterCountMatchesClosedForm) {
  gpt::Config cfg{.layers = 3, .channels = 32, .heads = 4, .seq = 16};
  gpt::GPT model(cfg);
  gpt::build(model, 2);
  tessel::Program p = model.compile();
  int64_t c = cfg.channels, total = 0;
  for (const auto& spec : p.parameters()) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    total += n;
  }
  int64_t perBlock = 4 * c + (3 * c * c + 3 * c) + (c * c + c) + (4 * c * c + 4 * c) + (4 * c * c + c);
  EXPECT_EQ(total, cfg.vocab * c + cfg.seq * c + cfg.layers * perBlock + 2 * c);
}

}  // namespace
