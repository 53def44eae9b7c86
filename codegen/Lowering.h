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

/// Which kernel sources a lowering produces.
struct LoweringOptions {
  /// Also emit every kernel as CUDA C++ (codegen/CudaEmitter.h): the program then carries
  /// cudaSource (cudaKernelPreamble() + one kernel per symbol) and every KernelStep its
  /// launch configuration. The steps and buffers are those without it, plus, in a function
  /// with CUDA kernels that sum across blocks, one scratch temp (their last argument; the
  /// C++ kernels ignore it) and a step before the first of them that zeroes the scratch's
  /// counter. One program runs on the CPU executor and on a GPU executor; a symbol names the
  /// C++ and the CUDA kernel of the same op (kernels are shared only when both sources
  /// agree).
  bool cuda = false;
  /// Clipped AdamW updates that may run in place become multi-tensor kernels writing the
  /// parameters and moments directly (codegen/MultiTensorAdamW.h), without the copies of
  /// their assignments. False keeps one kernel per parameter and the copies (the form whose
  /// results the multi-tensor kernels reproduce bit for bit; for tests).
  bool multiTensorAdamW = true;
  /// Gradient buckets whose tensors can be views of the bucket become in-place all-reduces,
  /// with no copies in or out (codegen/BucketViews.h). False keeps every bucket's copies.
  bool inPlaceBuckets = true;
};

/// Lowers every func.func of `module` into `program` (buffers shared by name across
/// functions for parameters and optimizer state). Emits diagnostics and fails on a module
/// without a func.func, on a tensor type that is not statically shaped, and on ops without a
/// kernel (with options.cuda: without a CUDA kernel).
mlir::LogicalResult lowerToProgram(mlir::ModuleOp module, rt::Program& program,
                                   const LoweringOptions& options = {});

}  // namespace tessel
