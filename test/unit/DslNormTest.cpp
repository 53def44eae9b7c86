// The DSL's silu, swiglu, rms_norm and RMSNorm (and layer_norm's epsilon): they build the ops
// the dialect documents, and a bad shape, type or epsilon is a ModelError at the user's line
// with the module's path.
#include "dsl/tessel.h"

#include <gtest/gtest.h>

#include <limits>
#include <source_location>
#include <string>

namespace {

using tessel::Tensor;

template <typename F>
tessel::Diagnostic diagnosticOf(F&& body) {
  try {
    body();
  } catch (const tessel::ModelError& e) {
    return e.diagnostic();
  }
  ADD_FAILURE() << "expected a tessel::ModelError";
  return {};
}

int nextLine(std::source_location here = std::source_location::current()) {
  return static_cast<int>(here.line()) + 1;
}

struct Norms : tessel::Model {
  tessel::RMSNorm norm{this, "blocks.0.ffn_norm", 16, /*eps=*/1e-6};
};

TEST(DslNorm, RmsNormWithTheWrongWidthPointsAtTheCallerAndPath) {
  Norms m;
  Tensor x = m.input("x", {4, 8, 12});
  int line = 0;
  tessel::Diagnostic d = diagnosticOf([&] {
    line = nextLine();
    m.norm(x);
  });
  EXPECT_EQ(d.file, std::source_location::current().file_name());
  EXPECT_EQ(d.line, line);
  EXPECT_EQ(d.path, "blocks.0.ffn_norm");
  EXPECT_NE(d.message.find("'tessel.rms_norm' op weight must be [C] = 12 for input 4x8x12, got 16"),
            std::string::npos)
      << d.message;
}

TEST(DslNorm, SwigluOperandsOfTwoShapesPointAtTheCaller) {
  tessel::Model m;
  Tensor gate = m.input("gate", {4, 96}), up = m.input("up", {4, 64});
  int line = 0;
  tessel::Diagnostic d = diagnosticOf([&] {
    line = nextLine();
    tessel::swiglu(gate, up);
  });
  EXPECT_EQ(d.line, line);
  EXPECT_NE(d.message.find("gate 4x96 and up 4x64 must have one shape"), std::string::npos)
      << d.message;
}

TEST(DslNorm, TypeAndEpsilonErrors) {
  tessel::Model m;
  Tensor x = m.input("x", {4, 8}), w = m.input("w", {8});
  Tensor ids = m.input("ids", {4, 8}, tessel::DType::I32);
  EXPECT_NE(diagnosticOf([&] { tessel::silu(ids); }).message.find("must be a float tensor"),
            std::string::npos);
  EXPECT_NE(diagnosticOf([&] { tessel::swiglu(x, ids); }).message.find("must be a float tensor"),
            std::string::npos);
  EXPECT_NE(diagnosticOf([&] { tessel::rms_norm(ids, w); }).message.find("must be a float tensor"),
            std::string::npos);
}

// Every epsilon outside [2^-126, 1] (compiler/Shapes.h, normEpsilonError) is refused by every
// norm of the DSL at the caller's line: layer_norm and rms_norm where they are called,
// LayerNorm and RMSNorm where they are declared. Both ends: 0, negative, below f32's smallest
// normal number (it would round to a subnormal or 0 in the f32 kernels), above 1, inf, NaN.
// The bounds themselves are accepted.
TEST(DslNorm, EpsilonOutsideItsRangeIsAnErrorAtTheCallersLine) {
  const double bad[] = {0.0, -1e-5, 1e-300, 0x1p-127, 1.0000001, 1e300,
                        std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  const char* expected = "epsilon must be in [1.1754943508222875e-38, 1]";
  for (double eps : bad) {
    SCOPED_TRACE(eps);
    tessel::Model m;
    Tensor x = m.input("x", {4, 8}), w = m.input("w", {8});
    int line = 0;
    tessel::Diagnostic d = diagnosticOf([&] {
      line = nextLine();
      tessel::rms_norm(x, w, eps);
    });
    EXPECT_EQ(d.line, line);
    EXPECT_NE(d.message.find(std::string("'tessel.rms_norm' op ") + expected), std::string::npos) << d.message;
    d = diagnosticOf([&] {
      line = nextLine();
      tessel::layer_norm(x, w, w, eps);
    });
    EXPECT_EQ(d.line, line);
    EXPECT_NE(d.message.find(std::string("'tessel.layer_norm' op ") + expected), std::string::npos) << d.message;
    d = diagnosticOf([&] {
      line = nextLine();
      tessel::RMSNorm norm(&m, "rms", 8, eps);
    });
    EXPECT_EQ(d.file, std::source_location::current().file_name());
    EXPECT_EQ(d.line, line);
    EXPECT_EQ(d.path, "rms");
    EXPECT_NE(d.message.find(std::string("'tessel.rms_norm' op ") + expected), std::string::npos) << d.message;
    d = diagnosticOf([&] {
      line = nextLine();
      tessel::LayerNorm norm(&m, "ln", 8, eps);
    });
    EXPECT_EQ(d.line, line);
    EXPECT_EQ(d.path, "ln");
    EXPECT_NE(d.message.find(std::string("'tessel.layer_norm' op ") + expected), std::string::npos) << d.message;
  }
  tessel::Model m;
  Tensor x = m.input("x", {4, 8}), w = m.input("w", {8});
  for (double eps : {0x1p-126, 1.0}) {
    EXPECT_NO_THROW(tessel::rms_norm(x, w, eps)) << eps;
    EXPECT_NO_THROW(tessel::layer_norm(x, w, w, eps)) << eps;
    EXPECT_EQ(tessel::norm_epsilon_error(eps), "") << eps;
  }
  EXPECT_NE(tessel::norm_epsilon_error(1e-60).find(expected), std::string::npos);
}

// swiglu is two ops, silu then mul (so that fusion joins them and autodiff needs no rule of its
// own); RMSNorm declares "<path>.weight" [C] with ones and passes its epsilon on.
TEST(DslNorm, BuildsTheDocumentedOps) {
  Norms m;
  Tensor gate = m.input("gate", {2, 16}), up = m.input("up", {2, 16});
  m.add_output("y", m.norm(tessel::swiglu(gate, up)));
  tessel::Program p = m.compile({.train = false});
  std::string ir = p.ir();
  size_t silu = ir.find("tessel.silu ");
  size_t mul = ir.find("tessel.mul ");
  size_t norm = ir.find("tessel.rms_norm ");
  ASSERT_NE(silu, std::string::npos) << ir;
  ASSERT_NE(mul, std::string::npos) << ir;
  ASSERT_NE(norm, std::string::npos) << ir;
  EXPECT_LT(silu, mul);
  EXPECT_LT(mul, norm);
  EXPECT_NE(ir.find("epsilon = 9.9999999999999995E-7 : f64"), std::string::npos) << ir;
  ASSERT_EQ(p.parameters().size(), 1u);
  EXPECT_EQ(p.parameters()[0].name, "blocks.0.ffn_norm.weight");
  EXPECT_EQ(p.parameters()[0].shape, (tessel::Shape{16}));
  EXPECT_EQ(p.parameters()[0].init, tessel::Init::Ones);
}

}  // namespace
