// tessel-decompose-attention preserves the math: the reference interpreter gives the same
// loss before and after the rewrite, on the GPT example with random weights and tokens; and
// the G*T layout of a decomposed grouped_attention equals multi-head causal attention on k
// and v repeated G times (ref::causalAttention, a kernel that shares none of its steps).
#include "compiler/Interpreter.h"
#include "compiler/TesselDialect.h"
#include "dsl/trainer/Flags.h"
#include "examples/gpt/model.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "runtime/reference/Reference.h"
#include "test/unit/RepeatedKv.h"

#include <fmt/format.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <unistd.h>

namespace {

double lossOf(mlir::ModuleOp module, const tessel::ParameterMap& params,
              const std::vector<tessel::ref::Tensor>& inputs) {
  mlir::func::FuncOp func = *module.getOps<mlir::func::FuncOp>().begin();
  return tessel::interpret(func, params, inputs).at(0).data.at(0);
}

TEST(DecomposeAttention, PreservesTheForwardLoss) {
  gpt::Config cfg{.layers = 2, .channels = 24, .heads = 3, .seq = 7};
  gpt::GPT model(cfg);
  const int64_t batch = 2;
  gpt::build(model, batch);
  // The forward function as the pass receives it in the pipeline: the IR dumped after
  // canonicalize (stage 01); the pipeline itself decomposes only with decompose_attention
  // (the compiled program's own IR keeps the fused attention).
  std::string dumpDir = ::testing::TempDir() + "decompose-attention-" + std::to_string(::getpid());
  tessel::Program program = model.compile({.dump_ir_dir = dumpDir, .train = false});
  auto params = tessel::trainer::initParameters(program, /*seed=*/7);

  std::mt19937_64 rng(std::random_device{}());
  std::vector<double> tokens(batch * cfg.seq), targets(batch * cfg.seq);
  for (auto& t : tokens) t = static_cast<double>(rng() % 256);
  for (auto& t : targets) t = static_cast<double>(rng() % 256);
  std::vector<tessel::ref::Tensor> inputs{tessel::ref::Tensor({batch, cfg.seq}, tokens),
                                          tessel::ref::Tensor({batch, cfg.seq}, targets)};

  mlir::DialectRegistry registry;
  tessel::registerTesselDialects(registry);
  mlir::MLIRContext context(registry);
  std::ifstream dumped(dumpDir + "/01-canonicalize.mlir");
  std::stringstream text;
  text << dumped.rdbuf();
  std::filesystem::remove_all(dumpDir);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text.str(), &context);
  ASSERT_TRUE(module);
  int attentionBefore = 0;
  module->walk([&](tessel::CausalAttentionOp) { ++attentionBefore; });
  EXPECT_EQ(attentionBefore, cfg.layers);
  double before = lossOf(*module, params, inputs);

  mlir::PassManager pm(&context);
  pm.addNestedPass<mlir::func::FuncOp>(tessel::createDecomposeAttention());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  int attention = 0;
  module->walk([&](tessel::CausalAttentionOp) { ++attention; });
  EXPECT_EQ(attention, 0);
  double after = lossOf(*module, params, inputs);

  // Both are f64 evaluations of the same math with different summation orders in the
  // attention (a fused loop vs matmul + softmax kernels): agreement to ~1e-12 relative is
  // what f64 rounding over sums of at most 4C = 96 terms allows; 1e-10 leaves margin.
  EXPECT_NEAR(before, after, 1e-10 * std::abs(before));
  EXPECT_GT(before, 5.0);  // a random-init byte model is near ln 256 = 5.545
}

TEST(DecomposeAttention, GroupedEqualsMultiHeadOnRepeatedKeysAndValues) {
  mlir::DialectRegistry registry;
  tessel::registerTesselDialects(registry);
  mlir::MLIRContext context(registry);
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  // G = 2, multi-query (G = 4), G = 3 with T = 9, G = 1.
  for (auto [b, t, heads, kvHeads, d] :
       {std::tuple{2, 7, 4, 2, 4}, {1, 5, 4, 1, 6}, {1, 9, 6, 2, 2}, {2, 3, 2, 2, 3}}) {
    SCOPED_TRACE(fmt::format("B={} T={} NH={} NKV={} D={}", b, t, heads, kvHeads, d));
    // f32 types: the interpreter evaluates them in f64 (it rounds only bf16 results).
    std::string qt = fmt::format("tensor<{}x{}x{}xf32>", b, t, heads * d);
    std::string kt = fmt::format("tensor<{}x{}x{}xf32>", b, t, kvHeads * d);
    std::string text = fmt::format(
        "func.func @f(%q: {0}, %k: {1}, %v: {1}) -> {0} {{\n"
        "  %y = tessel.grouped_attention %q, %k, %v heads {2} kv_heads {3} : ({0}, {1}, {1}) -> {0}\n"
        "  return %y : {0}\n}}\n",
        qt, kt, heads, kvHeads);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    ASSERT_TRUE(module);
    mlir::PassManager pm(&context);
    pm.addNestedPass<mlir::func::FuncOp>(tessel::createDecomposeAttention());
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    int grouped = 0;
    module->walk([&](tessel::GroupedAttentionOp) { ++grouped; });
    ASSERT_EQ(grouped, 0);

    auto random = [&](std::vector<int64_t> shape) {
      tessel::ref::Tensor x(std::move(shape));
      for (double& e : x.data) e = uniform(rng);
      return x;
    };
    tessel::ref::Tensor q = random({b, t, heads * d}), k = random({b, t, kvHeads * d}),
                        v = random({b, t, kvHeads * d});
    std::vector<tessel::ref::Tensor> y = tessel::interpret(
        *module->getOps<mlir::func::FuncOp>().begin(), {}, {q, k, v});
    // The independent path: [q | k repeated | v repeated], query head h meeting kv head h / G.
    tessel::ref::Tensor qkv = tessel::ref::testutil::repeatedQkv(q, k, v, heads, kvHeads);
    tessel::ref::Tensor want = tessel::ref::causalAttention(qkv, heads);
    ASSERT_EQ(y.at(0).shape, want.shape);
    // Both are f64 evaluations of the same math in different summation orders (matmul +
    // softmax kernels vs one fused loop), on O(1) values (|v| < 2) and sums of at most
    // 9 terms: a few ulps, ~1e-15; 1e-12 absolute leaves margin and is far below a wrong
    // pairing of heads (O(0.1)).
    for (int64_t i = 0; i < want.numel(); ++i)
      EXPECT_NEAR(y[0].data[i], want.data[i], 1e-12) << "at flat position " << i;
  }
}

}  // namespace
