// The tessel dialect: registration.
#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

#include "compiler/TesselDialect.cpp.inc"
#include "compiler/TesselInterfaces.cpp.inc"

namespace tessel {

void TesselDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "compiler/TesselOps.cpp.inc"
      >();
}

void registerTesselDialects(mlir::DialectRegistry& registry) {
  registry.insert<TesselDialect, mlir::func::FuncDialect, mlir::shard::ShardDialect,
                  mlir::tensor::TensorDialect, mlir::arith::ArithDialect>();
}

}  // namespace tessel
