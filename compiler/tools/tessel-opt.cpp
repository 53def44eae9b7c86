// tessel-opt: MLIR's opt driver with the tessel dialect, the upstream dialects Tessel
// programs use, the upstream passes, every Tessel pass, and the whole compile pipeline as
// one named pipeline (`--tessel-pipeline='dp=2 optimizer=sgd'`, compiler/Pipeline.h).
#include "compiler/Pipeline.h"
#include "compiler/TesselDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  tessel::registerTesselDialects(registry);
  mlir::registerTransformsPasses();  // canonicalize, cse, ...
  tessel::registerTesselPasses();
  tessel::registerTesselPipeline();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Tessel optimizer driver\n", registry));
}
