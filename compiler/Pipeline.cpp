// The pass-pipeline driver; see Pipeline.h.
//
// Stages run one PassManager each, so the IR after every stage can be written out. The
// stage table below is the single place that says what the compiler does and in what order.
#include "compiler/Pipeline.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>

namespace tessel {
namespace {

struct Stage {
  const char* name;
  void (*addPasses)(mlir::OpPassManager& pm);  // nullptr: nothing to run (the input)
};

// The compiler's stages so far. Later passes (autodiff, optimizer, sharding, fusion,
// memory planning) are appended here as they arrive.
const Stage kStages[] = {
    {"dsl", nullptr},
    {"canonicalize",
     [](mlir::OpPassManager& pm) {
       pm.addPass(mlir::createCanonicalizerPass());
       pm.addPass(mlir::createCSEPass());
     }},
};

}  // namespace

std::vector<std::string> pipelineStageNames() {
  std::vector<std::string> names;
  for (const Stage& s : kStages) names.push_back(s.name);
  return names;
}

bool writeModule(mlir::ModuleOp module, const std::string& path, std::string& error) {
  std::ofstream out(path);
  if (!out) {
    error = fmt::format("cannot write '{}'", path);
    return false;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, mlir::OpPrintingFlags().enableDebugInfo(/*enable=*/true,
                                                            /*prettyForm=*/false));
  out << text;
  if (!out.good()) {
    error = fmt::format("failed writing '{}'", path);
    return false;
  }
  return true;
}

mlir::LogicalResult runPipeline(mlir::ModuleOp module, const PipelineOptions& options) {
  if (!options.dumpIrDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.dumpIrDir, ec);
    if (ec)
      return module.emitError() << "cannot create IR dump folder '" << options.dumpIrDir
                                << "': " << ec.message();
  }
  int index = 0;
  for (const Stage& stage : kStages) {
    if (stage.addPasses) {
      mlir::PassManager pm(module->getContext());
      stage.addPasses(pm);
      if (mlir::failed(pm.run(module))) return mlir::failure();
    }
    if (!options.dumpIrDir.empty()) {
      std::string path = fmt::format("{}/{:02d}-{}.mlir", options.dumpIrDir, index, stage.name);
      std::string error;
      if (!writeModule(module, path, error)) return module.emitError() << error;
    }
    ++index;
  }
  return mlir::success();
}

}  // namespace tessel
