// tessel-opt: MLIR's opt driver with the tessel dialect, the upstream dialects Tessel
// programs use, the upstream passes, and every Tessel pass.
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
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Tessel optimizer driver\n", registry));
}
