// The plan inside the compiler: its lines (compiler/PlanSite.h: "file:line:col" sites become
// FileLineColLocs, anything else the fallback; the tp-versus-heads check reports at the
// plan's site with a note at the attention it does not fit), and the plan's PipelineOptions
// that the pipeline refuses.
#include "compiler/Pipeline.h"
#include "compiler/PlanSite.h"
#include "compiler/TesselDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace {

/// The tests' context, with the dialects a Tessel module uses.
class PlanSite : public ::testing::Test {
 protected:
  PlanSite() : ctx_(std::make_unique<mlir::MLIRContext>(registry())) { ctx_->loadAllAvailableDialects(); }
  static mlir::DialectRegistry registry() {
    mlir::DialectRegistry r;
    tessel::registerTesselDialects(r);
    return r;
  }
  std::unique_ptr<mlir::MLIRContext> ctx_;
};

TEST_F(PlanSite, SitesBecomeFileLineColumnLocations) {
  auto& ctx = ctx_;
  mlir::Location fallback = mlir::UnknownLoc::get(ctx.get());
  struct Case {
    std::string site, file;
    unsigned line, column;
  };
  // The file may hold ':' itself (a drive letter, a flag name): line and column are the
  // last two fields.
  for (const Case& c : {Case{"examples/gpt/plans.h:12:7", "examples/gpt/plans.h", 12, 7},
                        Case{"--plan:1:6", "--plan", 1, 6}, Case{"C:/src/a.h:3:40", "C:/src/a.h", 3, 40},
                        Case{tessel::planSiteString("m.h", 9, 2), "m.h", 9, 2}}) {
    auto loc = mlir::dyn_cast<mlir::FileLineColLoc>(tessel::planSiteLocation(ctx.get(), c.site, fallback));
    ASSERT_TRUE(loc) << c.site;
    EXPECT_EQ(loc.getFilename().str(), c.file) << c.site;
    EXPECT_EQ(loc.getLine(), c.line) << c.site;
    EXPECT_EQ(loc.getColumn(), c.column) << c.site;
  }
  for (const char* bad : {"", "plans.h", "plans.h:12", ":1:2", "plans.h:x:2", "plans.h:1:", "plans.h:-1:2"})
    EXPECT_EQ(tessel::planSiteLocation(ctx.get(), bad, fallback), fallback) << "'" << bad << "'";
}

TEST_F(PlanSite, HeadsCheckReportsAtThePlanWithANoteAtTheAttention) {
  auto& ctx = ctx_;
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @forward(%qkv: tensor<2x4x36xf32>) -> tensor<2x4x12xf32> {
      %y = tessel.causal_attention %qkv heads 6 : tensor<2x4x36xf32> -> tensor<2x4x12xf32> loc("model.h":45:9)
      return %y : tensor<2x4x12xf32>
    }
  )mlir", ctx.get());
  ASSERT_TRUE(module);
  std::string error, note;
  mlir::ScopedDiagnosticHandler handler(ctx.get(), [&](mlir::Diagnostic& d) {
    std::string loc;
    llvm::raw_string_ostream os(loc);
    d.getLocation().print(os);
    error = loc + " " + d.str();
    for (mlir::Diagnostic& n : d.getNotes()) {
      std::string noteLoc;
      llvm::raw_string_ostream ns(noteLoc);
      n.getLocation().print(ns);
      note = noteLoc + " " + n.str();
    }
    return mlir::success();
  });
  mlir::Location site = tessel::planSiteLocation(ctx.get(), "plans.h:20:8", mlir::UnknownLoc::get(ctx.get()));
  // 6 heads: tp = 1, 2, 3 and 6 divide them, 4 and 5 do not.
  for (int64_t tp : {1, 2, 3, 6}) {
    EXPECT_TRUE(mlir::succeeded(tessel::checkTensorParallelHeads(*module, "tp", tp, site))) << tp;
    EXPECT_EQ(error, "");
  }
  for (int64_t tp : {4, 5}) {
    error.clear();
    EXPECT_TRUE(mlir::failed(tessel::checkTensorParallelHeads(*module, "tp", tp, site))) << tp;
    EXPECT_EQ(error.rfind("loc(\"plans.h\":20:8) tensor_parallel(\"tp\"): tp=" + std::to_string(tp) +
                              " does not divide the 6 attention heads",
                          0),
              0u)
        << error;
    EXPECT_EQ(note, "loc(\"model.h\":45:9) the attention with 6 heads");
  }
}

TEST(PlanOptions, ThePipelineRefusesMeshesItCannotRun) {
  using Mesh = std::vector<std::pair<std::string, int64_t>>;
  auto check = [](auto edit) {
    tessel::PipelineOptions o;
    edit(o);
    return tessel::checkPipelineOptions(o);
  };
  EXPECT_EQ(check([](auto& o) {
              o.dp = 2;
              o.mesh = Mesh{{"dp", 2}, {"tp", 2}};
              o.tensorParallelAxis = "tp";
              o.sequenceParallel = true;
            }),
            "");
  EXPECT_EQ(check([](auto& o) { o.mesh = Mesh{{"dp", 2}, {"dp", 2}}; }), "mesh axis 'dp' appears twice");
  EXPECT_EQ(check([](auto& o) { o.mesh = Mesh{{"", 2}}; }), "mesh: an axis has no name");
  EXPECT_EQ(check([](auto& o) { o.mesh = Mesh{{"tp", 0}}; }), "mesh axis tp=0: must be in [1, 2^20]");
  EXPECT_EQ(check([](auto& o) {
              o.dp = 2;
              o.mesh = Mesh{{"data", 2}, {"tp", 2}};
            }),
            "dp=2: the mesh has no axis 'dp' of that size");
  EXPECT_EQ(check([](auto& o) {
              o.dp = 2;
              o.batchAxis = "data";
              o.mesh = Mesh{{"data", 2}, {"tp", 2}};
            }),
            "");
  EXPECT_EQ(check([](auto& o) {
              o.mesh = Mesh{{"dp", 2}};
              o.tensorParallelAxis = "tp";
            }),
            "tensor-parallel=tp: not an axis of the mesh");
  // Without a mesh (tessel-opt) the passes check the axis against the module's grid.
  EXPECT_EQ(check([](auto& o) { o.tensorParallelAxis = "tp"; }), "");
  EXPECT_EQ(check([](auto& o) { o.sequenceParallel = true; }),
            "sequence-parallel: needs tensor parallelism (tensor-parallel=<axis>)");
}

}  // namespace
