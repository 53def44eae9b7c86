// The typed IR vocabulary: every `"tessel.<name>"` literal in the sources is an op name (the
// tessel.* attributes are declared once, in compiler/TesselDialect.td, and reached through
// compiler/FunctionAttrs.h); and the stage facts the passes check (passes/PipelineStage.h)
// read the right stage from IR written at each point of the pipeline.
#include "codegen/Lowering.h"
#include "compiler/FunctionAttrs.h"
#include "compiler/TesselDialect.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <tuple>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace rt = tessel::rt;
using tessel::PipelineStage;
using tessel::StageFact;

std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  tessel::registerTesselDialects(registry);
  auto context = std::make_unique<mlir::MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

// Any source that spells a tessel attribute name instead of using the dialect's declaration
// fails, with the file and line; op names ("tessel.add") are what the literal may name.
TEST(IrVocabulary, NoAttributeNameLiteralOutsideTheDialect) {
  auto context = makeContext();
  const std::regex literal(R"re("tessel\.([A-Za-z_][A-Za-z0-9_]*))re");
  std::vector<std::string> offenders;
  size_t scanned = 0;
  for (const char* dir : {"compiler", "passes", "codegen", "dsl", "runtime", "examples",
                          "test/unit", "test/tools", "test/simt", "test/mpi"}) {
    fs::path root = fs::path(TESSEL_SOURCE_DIR) / dir;
    if (!fs::exists(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu")) continue;
      ++scanned;
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number)
        for (std::sregex_iterator it(line.begin(), line.end(), literal), end; it != end; ++it) {
          std::string name = "tessel." + (*it)[1].str();
          if (!mlir::RegisteredOperationName::lookup(name, context.get()))
            offenders.push_back(fs::relative(entry.path(), TESSEL_SOURCE_DIR).string() + ":" +
                                std::to_string(number) + ": \"" + name + "\"");
        }
    }
  }
  EXPECT_GT(scanned, 50u) << "the source tree was not found under " << TESSEL_SOURCE_DIR;
  std::ostringstream list;
  for (const std::string& o : offenders) list << "\n  " << o;
  EXPECT_TRUE(offenders.empty())
      << "tessel.* literals that are not op names (use compiler/FunctionAttrs.h):" << list.str();
}

// The accessors read and write the names the dialect declares (and the verifier accepts).
TEST(IrVocabulary, FunctionAttributesRoundTrip) {
  auto context = makeContext();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @f(%x: tensor<4xf32> {tessel.input = "x"})
        -> (tensor<4xf32> {tessel.output = "loss"}, tensor<4xf32> {tessel.grad = "w"}) {
      return %x, %x : tensor<4xf32>, tensor<4xf32>
    })", context.get());
  ASSERT_TRUE(module);
  auto f = *module->getOps<mlir::func::FuncOp>().begin();
  EXPECT_EQ(tessel::inputName(f, 0).getValue(), "x");
  EXPECT_EQ(tessel::outputName(f, 0).getValue(), "loss");
  EXPECT_FALSE(tessel::outputName(f, 1));
  EXPECT_EQ(tessel::gradName(f, 1).getValue(), "w");
  EXPECT_EQ(tessel::findOutput(f, "loss"), std::optional<unsigned>(0));
  EXPECT_EQ(tessel::findOutput(f, "grad_norm"), std::nullopt);
  EXPECT_EQ(tessel::batchShards(f), 0);
  tessel::setBatchShards(f, 4);
  tessel::setMixedPrecision(f);
  tessel::setInputName(f, 0, "tokens");
  EXPECT_EQ(tessel::batchShards(f), 4);
  EXPECT_TRUE(tessel::isMixedPrecision(f));
  EXPECT_TRUE(mlir::succeeded(mlir::verify(module->getOperation())));
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  EXPECT_NE(text.find("{tessel.input = \"tokens\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("attributes {tessel.batch_shards = 4 : i64, tessel.mixed_precision}"),
            std::string::npos)
      << text;
}

/// Lowers one all-reduce of a tensor<4xf32> over a 2 x 4 mesh (dp, tp) to a program,
/// collecting the diagnostics in `errors`. `reduce` and `axes` are spliced into the op.
struct LoweredAllReduce {
  std::unique_ptr<mlir::MLIRContext> context = makeContext();
  std::string errors;
  mlir::ScopedDiagnosticHandler handler{context.get(), [this](mlir::Diagnostic& d) {
                                          errors += d.str() + "\n";
                                          return mlir::success();
                                        }};
  /// True when the module parses and lowers into `program`.
  bool lower(const char* reduce, const char* axes, rt::Program& program) {
    std::string source = std::string(R"(
      shard.grid @mesh(shape = 2x4) {tessel.axis_names = ["dp", "tp"]}
      func.func @train_step(%g: tensor<4xf32> {tessel.input = "g"}) -> (tensor<4xf32> {tessel.output = "r"}) {
        %f = tessel.all_reduce_start %g reduce )") + reduce + " on @mesh grid_axes = " + axes + R"( bucket 0 params ["g"] : tensor<4xf32>
        %r = tessel.all_reduce_wait %f : tensor<4xf32>
        return %r : tensor<4xf32>
      })";
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(source, context.get());
    EXPECT_TRUE(module) << errors;
    return module && mlir::succeeded(tessel::lowerToProgram(*module, program));
  }
};

/// The collective steps of the first function of `program` (the start and the wait).
std::vector<rt::CollectiveStep> collectiveSteps(const rt::Program& program) {
  std::vector<rt::CollectiveStep> steps;
  for (const rt::Step& step : program.functions.at(0).steps)
    if (auto* c = std::get_if<rt::CollectiveStep>(&step)) steps.push_back(*c);
  return steps;
}

// The enum words reach the program format unchanged, max included (the vocab-parallel
// cross-entropy's max across tp).
TEST(IrVocabulary, LoweringWritesTheReduceWord) {
  LoweredAllReduce l;
  for (const char* word : {"sum", "avg", "max"}) {
    rt::Program program;
    ASSERT_TRUE(l.lower(word, "[0]", program)) << l.errors;
    std::vector<rt::CollectiveStep> steps = collectiveSteps(program);
    EXPECT_EQ(steps.size(), 2u);  // the start and the wait
    for (const rt::CollectiveStep& c : steps) EXPECT_EQ(c.reduce, word);
  }
}

// The runtime step keeps its axis names and group size; the lowering reads both from the
// grid the collective names (the tp axis, index 1, of the 2 x 4 mesh: ["tp"], 4 ranks; the
// dp axis: ["dp"], 2; both: ["dp", "tp"], 8), and the grid becomes the program's mesh.
TEST(IrVocabulary, LoweringDerivesAxesAndGroupFromTheGrid) {
  LoweredAllReduce l;
  using Axes = std::vector<std::string>;
  for (auto [axes, names, group] : {std::tuple{"[1]", Axes{"tp"}, 4}, std::tuple{"[0]", Axes{"dp"}, 2},
                                    std::tuple{"[0, 1]", Axes{"dp", "tp"}, 8}}) {
    rt::Program program;
    ASSERT_TRUE(l.lower("sum", axes, program)) << l.errors;
    EXPECT_EQ(program.mesh, (std::vector<rt::MeshAxis>{{"dp", 2}, {"tp", 4}}));
    std::vector<rt::CollectiveStep> steps = collectiveSteps(program);
    EXPECT_EQ(steps.size(), 2u);  // the start and the wait
    for (const rt::CollectiveStep& c : steps) {
      EXPECT_EQ(c.axes, names) << axes;
      EXPECT_EQ(c.group, group) << axes;
    }
  }
}

/// Facts of function @`name` (and its module) in the IR `source`.
struct Staged {
  std::unique_ptr<mlir::MLIRContext> context = makeContext();
  mlir::OwningOpRef<mlir::ModuleOp> module;
  explicit Staged(const char* source)
      : module(mlir::parseSourceString<mlir::ModuleOp>(source, context.get())) {}
  PipelineStage facts(const char* name) { return PipelineStage(*module, name); }
};

constexpr const char* kForward = R"(
  func.func @forward(%x: tensor<4x8xf32> {tessel.input = "x"}) -> (tensor<f32> {tessel.output = "loss"}) {
    %l = tessel.reduce_mean %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  })";

TEST(PipelineStage, ForwardAsBuiltHasNoFacts) {
  Staged s(kForward);
  ASSERT_TRUE(s.module);
  PipelineStage stage = s.facts("forward");
  for (StageFact f : {StageFact::TrainStep, StageFact::AccumulateStep, StageFact::BatchSharded,
                      StageFact::MixedPrecision, StageFact::GradientsReduced,
                      StageFact::GradientsBucketed, StageFact::CollectivesInterleaved,
                      StageFact::Optimizer, StageFact::ClassifierFused, StageFact::Fused})
    EXPECT_FALSE(stage.has(f)) << stage.describe(f, true);
}

TEST(PipelineStage, ReadsCollectivesAndTheirPlacement) {
  // Two single-gradient all-reduces, the first one's result used between them.
  Staged s(R"(
    shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
    func.func @train_step(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
        attributes {tessel.batch_shards = 2 : i64} {
      %f0 = tessel.all_reduce_start %a reduce avg on @mesh grid_axes = [0] bucket 0 params ["a"] : tensor<4xf32>
      %r0 = tessel.all_reduce_wait %f0 : tensor<4xf32>
      %s = tessel.scale %r0, 2.0 : tensor<4xf32>
      %f1 = tessel.all_reduce_start %b reduce avg on @mesh grid_axes = [0] bucket 1 params ["b"] : tensor<4xf32>
      %r1 = tessel.all_reduce_wait %f1 : tensor<4xf32>
      return %s, %r1 : tensor<4xf32>, tensor<4xf32>
    })");
  ASSERT_TRUE(s.module);
  PipelineStage stage = s.facts("train_step");
  EXPECT_TRUE(stage.has(StageFact::TrainStep));
  EXPECT_TRUE(stage.has(StageFact::BatchSharded));
  EXPECT_TRUE(stage.has(StageFact::GradientsReduced));
  EXPECT_FALSE(stage.has(StageFact::GradientsBucketed));
  EXPECT_TRUE(stage.has(StageFact::CollectivesInterleaved));
  EXPECT_FALSE(stage.has(StageFact::Optimizer));
  EXPECT_EQ(stage.describe(StageFact::BatchSharded, true),
            "@train_step already runs on a local batch (tessel.batch_shards = 2)");
}

TEST(PipelineStage, CollectivesBeforeTheirUsersAreNotInterleaved) {
  // One bucket of two gradients, waited for before the norm that uses it.
  Staged s(R"(
    shard.grid @mesh(shape = 2) {tessel.axis_names = ["dp"]}
    func.func @train_step(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<f32> {
      %f:2 = tessel.all_reduce_start %a, %b reduce avg on @mesh grid_axes = [0] bucket 0 params ["a", "b"] : tensor<4xf32>, tensor<4xf32>
      %r:2 = tessel.all_reduce_wait %f#0, %f#1 : tensor<4xf32>, tensor<4xf32>
      %n = tessel.global_norm %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
      return %n : tensor<f32>
    })");
  ASSERT_TRUE(s.module);
  PipelineStage stage = s.facts("train_step");
  EXPECT_TRUE(stage.has(StageFact::GradientsBucketed));
  EXPECT_FALSE(stage.has(StageFact::CollectivesInterleaved));
  EXPECT_TRUE(stage.has(StageFact::Optimizer));
}

TEST(PipelineStage, RequireNamesThePassTheFactAndTheOrder) {
  Staged s(kForward);
  ASSERT_TRUE(s.module);
  std::string message;
  mlir::ScopedDiagnosticHandler handler(s.context.get(), [&](mlir::Diagnostic& d) {
    message = d.str();
    return mlir::success();
  });
  auto f = *s.module->getOps<mlir::func::FuncOp>().begin();
  PipelineStage stage = s.facts("forward");
  EXPECT_TRUE(mlir::succeeded(stage.require("p", f, {}, {StageFact::TrainStep}, "first")));
  EXPECT_TRUE(message.empty());
  EXPECT_TRUE(mlir::failed(stage.require("tessel-optimizer", f, {StageFact::TrainStep}, {},
                                         "after tessel-autodiff")));
  EXPECT_EQ(message, "tessel-optimizer: there is no @train_step (run tessel-autodiff first); "
                     "it runs after tessel-autodiff");
  tessel::setMixedPrecision(f);
  EXPECT_TRUE(mlir::failed(PipelineStage(*s.module, "forward")
                               .require("tessel-mixed-precision", f, {},
                                        {StageFact::TrainStep, StageFact::MixedPrecision},
                                        "once, before tessel-autodiff")));
  EXPECT_EQ(message, "tessel-mixed-precision: @forward already computes in bf16 "
                     "(tessel.mixed_precision); it runs once, before tessel-autodiff");
}

}  // namespace
