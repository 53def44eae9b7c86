// The DSL's rope() and grouped-query causal_attention(q, k, v, heads, kv_heads): every shape
// rule they check (compiler/Shapes.h) is a ModelError at the user's line that names the
// shapes or numbers, and a well-formed call builds the documented op.
#include "dsl/Plan.h"
#include "dsl/tessel.h"
#include "test/unit/TinyLlamaAttention.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <source_location>
#include <string>
#include <tuple>

#include <unistd.h>

namespace {

using tessel::DType;
using tessel::ModelError;
using tessel::Tensor;

/// Runs `body`, expects a ModelError raised at `line` of this file, and returns its message.
template <typename F>
std::string errorAt(int line, F&& body) {
  try {
    body();
  } catch (const ModelError& e) {
    EXPECT_EQ(e.diagnostic().file, std::source_location::current().file_name());
    EXPECT_EQ(e.diagnostic().line, line) << e.what();
    return e.diagnostic().message;
  }
  ADD_FAILURE() << "expected a tessel::ModelError";
  return {};
}

#define LINE static_cast<int>(std::source_location::current().line())

TEST(DslAttention, RopeShapeErrorsAreAtTheCallersLine) {
  tessel::Model m;
  Tensor x3 = m.input("x3", {2, 8, 36}), x2 = m.input("x2", {8, 64});
  Tensor ids = m.input("ids", {2, 8, 4}, DType::I32);
  int line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(x2, 4); }).find("input must be [B, T, heads * D], got 8x64"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(x3, 4); }).find("head size D=9 (input 2x8x36, 4 heads) is odd"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(x3, 5); }).find("last dimension 36 of input 2x8x36 is not 5 heads"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(x3, 2, -1.0); }).find("theta must be finite and > 0, got -1"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(ids, 2); }).find("must be a float tensor"),
            std::string::npos);
}

// A theta whose inverse frequencies theta^(-2i/D) or angles t * theta^(-2i/D) are not finite
// (compiler/Shapes.h, ropeThetaError) is a ModelError at the caller's line: 5e-324 with D = 64
// makes theta^(-62/64) inf (the kernels' angle at t = 0 was then 0 * inf = NaN); 1e-318 keeps
// it finite (~1.2e308) but not 7 times it at t = 7; inf and NaN are not finite. With D = 2
// (the only frequency is 1) or T = 1 (the only angle is 0) a tiny theta is fine, and so is the
// largest double at D = 64 (theta^(-62/64) >= 1 / DBL_MAX > 0).
TEST(DslAttention, RopeThetaWithoutFiniteFrequenciesIsAnErrorAtTheCallersLine) {
  tessel::Model m;
  Tensor x = m.input("x", {2, 8, 64}), x2 = m.input("x2", {2, 8, 2}), x1 = m.input("x1", {2, 1, 64});
  int line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(x, 1, 5e-324); })
                .find("'tessel.rope' op theta 5e-324 makes the inverse frequency theta^(-62/64) of head size "
                      "D=64 inf; every theta^(-2i/D) must be finite and > 0"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(x, 1, 1e-318); })
                .find("theta 1e-318 makes the angle (T-1) * theta^(-62/64) at T=8 positions inf"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(x, 4, std::numeric_limits<double>::infinity()); })
                .find("theta must be finite and > 0, got inf"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::rope(x, 4, std::numeric_limits<double>::quiet_NaN()); })
                .find("theta must be finite and > 0, got nan"),
            std::string::npos);
  EXPECT_NO_THROW(tessel::rope(x2, 1, 5e-324));
  EXPECT_NO_THROW(tessel::rope(x1, 1, 1e-318));
  EXPECT_NO_THROW(tessel::rope(x, 1, std::numeric_limits<double>::max()));
  EXPECT_EQ(tessel::rope_theta_error(10000.0, 64, 1 << 20), "");
  EXPECT_NE(tessel::rope_theta_error(5e-324, 64, 8), "");
}

TEST(DslAttention, GroupedAttentionShapeErrorsAreAtTheCallersLine) {
  tessel::Model m;
  Tensor q = m.input("q", {2, 8, 64}), k = m.input("k", {2, 8, 32}), v = m.input("v", {2, 8, 32});
  Tensor k48 = m.input("k48", {2, 8, 48}), short_t = m.input("kt", {2, 4, 32});
  int line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::causal_attention(q, k48, k48, 4, 3); })
                .find("kv_heads=3 must be positive and divide heads=4"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::causal_attention(q, k, k48, 4, 2); })
                .find("k 2x8x32 and v 2x8x48 must have one shape"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::causal_attention(q, short_t, short_t, 4, 2); })
                .find("must agree in batch and sequence"),
            std::string::npos);
  line = LINE + 1;
  EXPECT_NE(errorAt(line, [&] { tessel::causal_attention(q, k, v, 8, 1); })
                .find("k 2x8x32 must have 1 kv heads of D=8 channels"),
            std::string::npos);
}

TEST(DslAttention, BuildsTheDocumentedOps) {
  tessel::Model m;
  Tensor q = m.input("q", {2, 8, 64}), k = m.input("k", {2, 8, 32}), v = m.input("v", {2, 8, 32});
  Tensor y = tessel::causal_attention(tessel::rope(q, 4), tessel::rope(k, 2, 500000.0), v, 4, 2);
  EXPECT_EQ(y.shape(), (tessel::Shape{2, 8, 64}));
  m.add_output("y", y);
  // The IR as the DSL built it: the first dump (later stages may fuse around the attention).
  std::filesystem::path dir = std::filesystem::path(testing::TempDir()) /
                              ("dsl-attention-" + std::to_string(::getpid()));
  m.compile({.dump_ir_dir = dir.string(), .train = false});
  std::string ir;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("00-", 0) == 0) {
      std::ifstream in(entry.path());
      ir.assign(std::istreambuf_iterator<char>(in), {});
    }
  std::filesystem::remove_all(dir);
  EXPECT_NE(ir.find("tessel.rope %arg0 heads 4 theta 1.000000e+04 : tensor<2x8x64xf32>"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("heads 2 theta 5.000000e+05 : tensor<2x8x32xf32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tessel.grouped_attention"), std::string::npos) << ir;
  EXPECT_NE(ir.find("heads 4 kv_heads 2 : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, "
                    "tensor<2x8x32xf32>) -> tensor<2x8x64xf32>"),
            std::string::npos)
      << ir;
}

// Tensor parallelism that cannot split the heads of a grouped-query attention is a ModelError
// at the attention's line in the model source, naming NH, NKV and tp.
TEST(DslAttention, TensorParallelRefusalIsAtTheAttentionsLine) {
  int attentionLine = 0;  // the causal_attention call in the model source
  std::ifstream source(std::string(TESSEL_SOURCE_DIR) + "/test/unit/TinyLlamaAttention.h");
  std::string text;
  for (int n = 1; std::getline(source, text); ++n)
    if (text.find("causal_attention(rope(") != std::string::npos) attentionLine = n;
  ASSERT_GT(attentionLine, 0);
  for (auto [heads, kvHeads, tp, why] :
       {std::tuple{int64_t{6}, int64_t{2}, int64_t{4}, "tp=4 must divide the 6 query heads"},
        {6, 3, 2, "tp=2 must divide the 3 key/value heads or be a multiple of them"}}) {
    SCOPED_TRACE(why);
    tessel::test::TinyLlamaAttention m(heads, kvHeads, 4);
    m.build(2, 4);
    try {
      m.compile({.plan = tessel::Plan(tessel::Mesh{{"tp", tp}}).tensor_parallel("tp")});
      ADD_FAILURE() << "expected a tessel::ModelError";
    } catch (const ModelError& e) {
      EXPECT_NE(e.diagnostic().file.find("TinyLlamaAttention.h"), std::string::npos) << e.what();
      EXPECT_EQ(e.diagnostic().line, attentionLine) << e.what();
      EXPECT_EQ(e.diagnostic().path, "blocks.0") << e.what();
      EXPECT_NE(e.diagnostic().message.find(std::to_string(heads) + " query heads and " +
                                            std::to_string(kvHeads) + " key/value heads"),
                std::string::npos)
          << e.what();
      EXPECT_NE(e.diagnostic().message.find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
