// The fused-kernel emitter: one tessel.fused region in, one C++ kernel out.
//
// Promise: the kernel `extern "C" void <symbol>(void** args)` (args: the fused op's results,
// then its inputs) computes every member op row by row: rows of [rows..., C] are split across
// OpenMP threads (static schedule, so results do not depend on the thread count), and for
// each row every member runs in body order on C contiguous floats. Values that are not
// yielded live in a per-thread scratch row and never reach memory. Numerics follow the f64
// reference kernels up to f32 rounding (max-subtracted softmax, two-pass layer norm, AdamW
// and SGD in torch's order of operations).
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>

namespace tessel {

class FusedOp;

/// The C++ source of the kernel for `op`. Throws std::invalid_argument naming the op and its
/// location if a member is not row-local (compiler/RowLocal.h).
std::string emitFusedCppKernel(FusedOp op, llvm::StringRef symbol);

/// What fused kernels need beyond cppKernelPreamble() (whose math helpers they share);
/// emitted once per kernel file, after it.
std::string fusedKernelPreamble();

}  // namespace tessel
