// The mesh side of lowering (codegen/Lowering.cpp): the module's `shard.grid` becomes
// Program::mesh, a sharded `tessel.param`'s `tessel.shardings` its buffer's layout in the
// global tensor (runtime/exec/Program.h ShardDim), and a synchronous `tessel.all_reduce` the
// start and wait steps of a one-tensor bucket.
#pragma once

#include "compiler/TesselDialect.h"
#include "runtime/exec/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace tessel {

/// The module's mesh: the `shard.grid` (with `tessel.axis_names`) that its collectives and
/// shardings name, axes in grid order, sizes from its shape; the module's only named grid when
/// nothing names one; empty without a named grid. Emits an error and fails when they name more
/// than one grid (a program runs on one mesh) or the grid has a dynamic size.
mlir::FailureOr<std::vector<rt::MeshAxis>> lowerMesh(mlir::ModuleOp module);

/// Sets `buffer`'s globalShape and sharding from `param`'s `tessel.shardings` (its result type
/// is the local shard; each dimension's global size is local x the product of its axes'
/// sizes). No attribute, or a replicated sharding, leaves the buffer unsharded. Emits an error at
/// the param and fails for a partial sharding (a parameter holds values, not pending sums),
/// a grid other than the program's, or blocks that do not divide a local dimension.
mlir::LogicalResult lowerParamSharding(ParamOp param, rt::Buffer& buffer);

/// The names of `axes` of the grid `grid` names from `op` (its `tessel.axis_names`).
std::vector<std::string> axisNames(mlir::Operation* op, mlir::FlatSymbolRefAttr grid, llvm::ArrayRef<int16_t> axes);

/// The parameter path of a `NameLoc` location ("blocks.0.mlp.proj"), or "" for other locations.
std::string locationPath(mlir::Location loc);

}  // namespace tessel
