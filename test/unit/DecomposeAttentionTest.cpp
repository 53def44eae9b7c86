// tessel-decompose-attention preserves the math: the reference interpreter gives the same
// loss before and after the rewrite, on the GPT example with random weights and tokens.
#include "compiler/Interpreter.h"
#include "compiler/TesselDialect.h"
#include "dsl/trainer/Flags.h"
#include "examples/gpt/model.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

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
  // canonicalize (stage 01), before decompose-attention (the compiled program's own IR is
  // already decomposed and fused).
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

}  // namespace
