// The vocab-parallel ops on one shard (offset 0, Vl = V) through autodiff and the reference
// interpreter: the compositions of compiler/VocabParallel.h (row_max, sum_exp, target_logit
// with their all-reduces, then cross_entropy_from_stats; embedding_shard then its
// all-reduce), put in place of tessel.cross_entropy and tessel.embedding, give those ops'
// values and gradients, and their gradients match central finite differences
// (GradCheckUtil.h). The offset comes from tessel.mesh_coordinate, which the one-rank
// interpreter evaluates to 0, and the all-reduces span a one-rank axis (the identity), as in
// a tp = 1 program. Also: none of the ops is row-local (compiler/RowLocal.h), so tessel-fuse
// leaves them alone.
#include "test/unit/GradCheckUtil.h"

#include "compiler/Interpreter.h"
#include "compiler/RowLocal.h"
#include "compiler/TesselDialect.h"
#include "compiler/VocabParallel.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace gradcheck;

constexpr double kTol = 5e-8;  // GradCheckTest.cpp's finite-difference tolerance
/// The composition and the unsharded op, both in f64, group their row sums differently: at
/// most ~V eps = 3e-15 relative here; 1e-12 still catches a wrong term (>= 1e-3).
constexpr double kSameTol = 1e-12;

const char* kGrid = "shard.grid @mesh(shape = 1) {tessel.axis_names = [\"tp\"]}\n";

/// Cross-entropy of param z [2, 5, 12] against input targets.
std::string lossIr(const std::string& body) {
  return std::string(kGrid) +
         "func.func @forward(%t: tensor<2x5xi32> {tessel.input = \"targets\"}) -> (tensor<f32> "
         "{tessel.output = \"loss\"}) {\n"
         "  %z = tessel.param \"z\" {std = 1.0 : f64} : tensor<2x5x12xf32>\n" +
         body + "  return %l : tensor<f32>\n}\n";
}

const char* kUnshardedLoss = R"mlir(
  %l = tessel.cross_entropy %z, %t : (tensor<2x5x12xf32>, tensor<2x5xi32>) -> tensor<f32>
)mlir";

/// loss = reduce_sum(rows * r) of the rows of param table [12, 4] gathered by input ids.
std::string embeddingIr(const std::string& gather) {
  return std::string(kGrid) +
         "func.func @forward(%t: tensor<3x7xi32> {tessel.input = \"ids\"}, %r: tensor<3x7x4xf32> "
         "{tessel.input = \"r\"}) -> (tensor<f32> {tessel.output = \"loss\"}) {\n"
         "  %w = tessel.param \"w\" {std = 1.0 : f64} : tensor<12x4xf32>\n" +
         gather +
         "  %p = tessel.mul %e, %r : (tensor<3x7x4xf32>, tensor<3x7x4xf32>) -> tensor<3x7x4xf32>\n"
         "  %l = tessel.reduce_sum %p [0, 1, 2] : tensor<3x7x4xf32> -> tensor<f32>\n"
         "  return %l : tensor<f32>\n}\n";
}

const char* kGather = R"mlir(
  %e = tessel.embedding %w, %t : (tensor<12x4xf32>, tensor<3x7xi32>) -> tensor<3x7x4xf32>
)mlir";

/// Replaces every tessel.cross_entropy and tessel.embedding of `module` by its vocab-parallel
/// composition over axis 0 of @mesh (one rank), the offset from tessel.mesh_coordinate.
void shardVocabulary(mlir::ModuleOp module) {
  tessel::VocabGroup group{mlir::FlatSymbolRefAttr::get(module.getContext(), "mesh"), {0}};
  llvm::SmallVector<mlir::Operation*> ops;
  module.walk([&](mlir::Operation* op) {
    if (mlir::isa<tessel::CrossEntropyOp, tessel::EmbeddingOp>(op)) ops.push_back(op);
  });
  for (mlir::Operation* op : ops) {
    mlir::OpBuilder b(op);
    mlir::Value offset =
        tessel::MeshCoordinateOp::create(b, op->getLoc(), "mesh", llvm::ArrayRef<int16_t>{0});
    mlir::Value v;
    if (auto ce = mlir::dyn_cast<tessel::CrossEntropyOp>(op))
      v = tessel::buildVocabParallelCrossEntropy(b, op->getLoc(), ce.getLogits(), ce.getTargets(),
                                                 offset, ce.getLogits().getType().getShape().back(),
                                                 group);
    else if (auto e = mlir::dyn_cast<tessel::EmbeddingOp>(op))
      v = tessel::buildVocabParallelEmbedding(b, op->getLoc(), e.getTable(), e.getIndices(), offset,
                                              e.getTable().getType().getDimSize(0), group);
    op->getResult(0).replaceAllUsesWith(v);
    op->erase();
  }
}

/// A module parsed (its vocabulary sharded if `shard`) and differentiated (tessel-autodiff),
/// with its @forward and @train_step.
struct Differentiated {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp forward, step;
};

Differentiated differentiate(mlir::MLIRContext& context, const std::string& text, bool shard) {
  Differentiated d;
  d.module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  EXPECT_TRUE(d.module) << text;
  if (!d.module) return d;
  if (shard) {
    shardVocabulary(*d.module);
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*d.module)));
    int unsharded = 0, reductions = 0;  // the comparison must not be of a module with itself
    d.module->walk([&](mlir::Operation* op) {
      unsharded += mlir::isa<tessel::CrossEntropyOp, tessel::EmbeddingOp>(op);
      reductions += mlir::isa<tessel::AllReduceOp>(op);
    });
    EXPECT_EQ(unsharded, 0);
    EXPECT_GT(reductions, 0);
  }
  mlir::PassManager pm(&context);
  pm.addPass(tessel::createAutodiff());
  EXPECT_TRUE(mlir::succeeded(pm.run(*d.module))) << text;
  mlir::SymbolTable symbols(*d.module);
  d.forward = symbols.lookup<mlir::func::FuncOp>("forward");
  d.step = symbols.lookup<mlir::func::FuncOp>("train_step");
  EXPECT_TRUE(d.forward && d.step);
  return d;
}

void expectSame(const ref::Tensor& got, const ref::Tensor& want, const char* what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  double scale = 1e-300;
  for (double v : want.data) scale = std::max(scale, std::abs(v));
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_LE(std::abs(got.data[i] - want.data[i]), kSameTol * scale)
        << what << "[" << i << "]: " << got.data[i] << " vs " << want.data[i];
}

/// Runs @train_step (the loss, then the one parameter's gradient) of `text` with and without
/// its vocabulary sharded, expects them equal, and the sharded gradient equal to finite
/// differences of the sharded @forward.
void checkAgainstUnsharded(const std::string& text, const std::string& param, const Shape& shape,
                           const std::vector<ref::Tensor>& inputs, Rng& rng) {
  mlir::DialectRegistry registry;
  tessel::registerTesselDialects(registry);
  mlir::MLIRContext context(registry);
  Differentiated a = differentiate(context, text, true), b = differentiate(context, text, false);
  ASSERT_TRUE(a.step && b.step);
  Params params{{param, rng.tensor(shape)}};
  std::vector<ref::Tensor> got = tessel::interpret(a.step, params, inputs);
  std::vector<ref::Tensor> want = tessel::interpret(b.step, params, inputs);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  expectSame(got[0], want[0], "loss");
  expectSame(got[1], want[1], ("d loss / d " + param).c_str());
  Probe probe{[&](const Params& p) { return tessel::interpret(a.forward, p, inputs).at(0).data; },
              {1.0}};
  Worst worst = compareWithFiniteDifferences(params, {param}, {got[1]}, probe, kTol, rng);
  std::printf("[ gradcheck ] vocab-parallel %-6s %5lld elements, worst relative error %.2e at %s\n",
              param.c_str(), static_cast<long long>(worst.compared), worst.error,
              worst.where.c_str());
}

TEST(VocabParallelGrad, OneShardCrossEntropyEqualsCrossEntropyAndFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  ref::Tensor targets({2, 5});
  for (double& t : targets.data) t = static_cast<double>(rng.below(12));
  checkAgainstUnsharded(lossIr(kUnshardedLoss), "z", {2, 5, 12}, {targets}, rng);
}

TEST(VocabParallelGrad, OneShardEmbeddingEqualsEmbeddingAndFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  ref::Tensor ids({3, 7});
  for (double& t : ids.data) t = static_cast<double>(rng.below(12));
  ids.data[0] = ids.data[1];  // a repeated id: its gradient rows add up
  checkAgainstUnsharded(embeddingIr(kGather), "w", {12, 4}, {ids, rng.tensor({3, 7, 4})}, rng);
}

// Row-local ops are those whose every float operand is the result's shape or a suffix of it
// (compiler/RowLocal.h), which the fused emitters stream row by row. None of these is:
// row_max, sum_exp, target_logit and cross_entropy_from_stats reduce the row away (results
// [N...] of operands [N..., V]); sum_exp_grad's shift and grad are [N...], a prefix of its
// result's shape, not a suffix; the gathers and scatters take integer operands. So
// tessel-fuse never puts them in a region, and they keep their own kernels.
TEST(VocabParallelGrad, NoVocabParallelOpIsRowLocal) {
  mlir::DialectRegistry registry;
  tessel::registerTesselDialects(registry);
  mlir::MLIRContext context(registry);
  const char* text = R"mlir(
func.func @ops(%z: tensor<2x8xf32>, %m: tensor<2xf32>, %t: tensor<2xi32>, %o: tensor<i32>,
               %w: tensor<8x4xf32>, %g: tensor<2x4xf32>, %dl: tensor<f32>) {
  %0 = tessel.row_max %z : tensor<2x8xf32> -> tensor<2xf32>
  %1 = tessel.sum_exp %z, %m : (tensor<2x8xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = tessel.target_logit %z, %t, %o vocab 16 : (tensor<2x8xf32>, tensor<2xi32>, tensor<i32>) -> tensor<2xf32>
  %3 = tessel.cross_entropy_from_stats %m, %m, %m : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<f32>
  %4 = tessel.sum_exp_grad %z, %m, %m : (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x8xf32>
  %5 = tessel.target_logit_grad %t, %o, %m : (tensor<2xi32>, tensor<i32>, tensor<2xf32>) -> tensor<2x8xf32>
  %6:2 = tessel.cross_entropy_from_stats_grad %m, %dl : (tensor<2xf32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>)
  %7 = tessel.embedding_shard %w, %t, %o vocab 16 : (tensor<8x4xf32>, tensor<2xi32>, tensor<i32>) -> tensor<2x4xf32>
  %8 = tessel.embedding_shard_grad %t, %o, %g : (tensor<2xi32>, tensor<i32>, tensor<2x4xf32>) -> tensor<8x4xf32>
  return
}
)mlir";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  int ops = 0;
  module->walk([&](mlir::Operation* op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "tessel") {
      EXPECT_FALSE(tessel::rowLocalShape(op).has_value()) << op->getName().getStringRef().str();
      ++ops;
    }
  });
  EXPECT_EQ(ops, 9);
}

}  // namespace
