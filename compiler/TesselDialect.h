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

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <span>

#include "compiler/TesselDialect.h.inc"

#include "compiler/TesselEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "compiler/TesselAttrs.h.inc"

#include "compiler/TesselInterfaces.h.inc"

#define GET_OP_CLASSES
#include "compiler/TesselOps.h.inc"

namespace mlir {
class DialectRegistry;
}

namespace tessel {
/// Registers the tessel dialect and every upstream dialect Tessel programs use (func,
/// shard, tensor, arith) in `registry`.
void registerTesselDialects(mlir::DialectRegistry& registry);

/// Checks, for the collective `op`, that `grid` names a `shard.grid` of the module with
/// static sizes >= 1 and `tessel.axis_names`, and that `axes` is a non-empty list of
/// distinct axes of it; emits the op's error naming the first violation otherwise. Every
/// collective op's verifier calls it (compiler/TesselCommOps.cpp).
/// The static shape of `v`, a ranked tensor, as the span the shape rules (compiler/Shapes.h)
/// take. Used by the ops' verifiers.
std::span<const int64_t> tensorShape(mlir::Value v);

mlir::LogicalResult verifyGridAxes(mlir::Operation* op, mlir::FlatSymbolRefAttr grid,
                                   llvm::ArrayRef<int16_t> axes);

/// The number of ranks in a collective's replica group: the product of the sizes of the
/// `shard.grid` that `grid` names (looked up from `op`) along `axes`; 0 when `grid` does not
/// resolve to a grid (>= 1 on verified IR).
int64_t gridGroupSize(mlir::Operation* op, mlir::FlatSymbolRefAttr grid,
                      llvm::ArrayRef<int16_t> axes);

/// The names of `axes` in the `tessel.axis_names` of the grid that `grid` names from `op`, in
/// order (the runtime addresses a replica group by them); empty when unresolved.
llvm::SmallVector<llvm::StringRef> gridAxisNames(mlir::Operation* op, mlir::FlatSymbolRefAttr grid,
                                                 llvm::ArrayRef<int16_t> axes);
}  // namespace tessel
