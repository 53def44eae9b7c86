// The tessel dialect: declarations generated from TesselDialect.td and TesselOps.td.
// Include this (not the .inc files) to use the ops from C++. It pulls in MLIR headers, so
// only files that really build or inspect IR include it.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "compiler/TesselDialect.h.inc"

#include "compiler/TesselEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "compiler/TesselAttrs.h.inc"

#include "compiler/TesselInterfaces.h.inc"

namespace mlir::shard {
/// Upstream `shard.grid` (mlir/Dialect/Shard/IR/ShardOps.h): the device mesh the collective
/// ops name. Declared here so that the op classes need not include the shard dialect.
class GridOp;
}  // namespace mlir::shard

#define GET_OP_CLASSES
#include "compiler/TesselOps.h.inc"

namespace mlir {
class DialectRegistry;
}

namespace tessel {
/// Registers the tessel dialect and every upstream dialect Tessel programs use (func,
/// shard, tensor, arith) in `registry`.
void registerTesselDialects(mlir::DialectRegistry& registry);
}  // namespace tessel
