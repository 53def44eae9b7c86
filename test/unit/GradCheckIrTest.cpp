// Gradient check of the VJP of tessel.broadcast, on hand-written IR.
//
// The DSL never puts a broadcast in a forward function (it appears only in backward graphs,
// as the VJP of reduce_sum / reduce_mean), so BroadcastOp::buildVJP is reachable only from
// IR: here @forward is written as text, tessel-autodiff runs on it, and @train_step and
// @forward run on the reference interpreter exactly as in GradCheckTest.cpp (same harness,
// same tolerance argument).
#include "test/unit/GradCheckUtil.h"

#include "compiler/Interpreter.h"
#include "compiler/TesselDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace gradcheck;

constexpr double kTol = 5e-8;  // GradCheckTest.cpp's kTol (measured here: at most 8e-10)

std::string join(const Shape& s, const char* sep) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? sep : "") + std::to_string(s[i]);
  return out;
}

std::string type(const Shape& s) { return "tensor<" + join(s, "x") + (s.empty() ? "" : "x") + "f32>"; }

/// loss = reduce_sum(gelu(broadcast(x)) * r), with y = gelu(broadcast(x)) also returned.
std::string forwardIr(const Shape& in, const Shape& out, const Shape& dims) {
  Shape all;
  for (size_t d = 0; d < out.size(); ++d) all.push_back(static_cast<int64_t>(d));
  std::string ti = type(in), to = type(out);
  return "func.func @forward(%r: " + to + " {tessel.input = \"r\"}) -> (tensor<f32> "
         "{tessel.output = \"loss\"}, " + to + " {tessel.output = \"y\"}) {\n"
         "  %x = tessel.param \"x\" {std = 1.0 : f64} : " + ti + "\n"
         "  %b = tessel.broadcast %x [" + join(dims, ", ") + "] : " + ti + " -> " + to + "\n"
         "  %y = tessel.gelu %b : " + to + "\n"
         "  %m = tessel.mul %y, %r : (" + to + ", " + to + ") -> " + to + "\n"
         "  %l = tessel.reduce_sum %m [" + join(all, ", ") + "] : " + to + " -> tensor<f32>\n"
         "  return %l, %y : tensor<f32>, " + to + "\n"
         "}\n";
}

TEST(GradCheckIr, BroadcastInTheForwardFunction) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  mlir::DialectRegistry registry;
  tessel::registerTesselDialects(registry);
  mlir::MLIRContext context(registry);
  for (auto [in, out, dims] : {std::tuple{Shape{7}, Shape{3, 7, 5}, Shape{0, 2}},
                               {Shape{}, Shape{33}, Shape{0}},
                               {Shape{1, 7}, Shape{1, 2, 7}, Shape{1}},
                               {Shape{3, 5}, Shape{3, 5, 7}, Shape{2}},
                               {Shape{33}, Shape{1, 33, 1}, Shape{0, 2}}}) {
    std::string text = forwardIr(in, out, dims);
    SCOPED_TRACE(text);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    ASSERT_TRUE(module);
    mlir::PassManager pm(&context);
    pm.addPass(tessel::createAutodiff());
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    mlir::SymbolTable symbols(*module);
    auto forward = symbols.lookup<mlir::func::FuncOp>("forward");
    auto step = symbols.lookup<mlir::func::FuncOp>("train_step");
    ASSERT_TRUE(forward && step);

    Params params{{"x", rng.tensor(in)}};
    std::vector<ref::Tensor> inputs{rng.tensor(out)};
    std::vector<ref::Tensor> results = tessel::interpret(step, params, inputs);
    ASSERT_EQ(results.size(), 2u);
    EXPECT_DOUBLE_EQ(results[0].data.at(0), tessel::interpret(forward, params, inputs)[0].data.at(0));
    Probe probe{[&](const Params& p) { return tessel::interpret(forward, p, inputs).at(1).data; },
                inputs[0].data};
    Worst worst = compareWithFiniteDifferences(params, {"x"}, {results[1]}, probe, kTol, rng);
    std::printf("[ gradcheck ] broadcast %-38s %5lld elements, worst relative error %.2e at %s\n",
                (type(in) + " -> " + type(out)).c_str(), static_cast<long long>(worst.compared),
                worst.error, worst.where.c_str());
  }
}

}  // namespace
