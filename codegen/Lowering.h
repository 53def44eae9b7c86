// Lowering: a tessel module (after the pass pipeline) to an executable rt::Program.
//
// Promise: every function of the module becomes a flat list of steps (generated kernels,
// GEMMs, copies) over buffers with fixed sizes; temporaries get arena offsets from the
// liveness-based memory plan, so the peak bytes are known before anything runs. An op that
// cannot be lowered is a diagnostic at its location (the user's line), never a crash.
#pragma once

#include "runtime/exec/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace tessel {

/// Lowers every func.func of `module` into `program` (buffers shared by name across
/// functions for parameters and optimizer state). Emits diagnostics and fails on ops
/// without a kernel.
mlir::LogicalResult lowerToProgram(mlir::ModuleOp module, rt::Program& program);

}  // namespace tessel
