// The C++ kernel emitter: one `tessel` op in, the C++ source of one CPU kernel out.
//
// Promise:
// - Every op hasCppKernel accepts gets a kernel `extern "C" void <symbol>(void** args)` whose
//   args[i] are base pointers: the op's results first, then its operands, in order. f32
//   tensors are float*, bf16 tensors tessel_bf16* (16-bit storage read as float, stored with
//   round-to-nearest-even: KernelCommon.h), i32 tensors int32_t*, and a 0-d tensor<f32> is a
//   float* to one element. Arithmetic and accumulators are f32 (or double) for every type.
//   Shapes are compile-time constants in the source.
// - Above each function a comment names the op and its location, and every argument line has
//   a shape comment in the llm.c style: `// out [B, T, C] = [4, 32, 64]`.
// - The numerics are those of the f64 reference kernels (runtime/reference) up to f32
//   rounding: reductions are max-subtracted (softmax, log-sum-exp), two-pass (layer norm), or
//   accumulated in double (reduce_sum/mean, global_norm, the cross-entropy mean).
// - Results never depend on the number of OpenMP threads: no cross-thread reductions or
//   atomics, each output element is summed by one thread in a fixed order (bitwise
//   reproducible, so replicated tensors stay identical on every rank).
// - Elementwise kernels may run in place (an output buffer equal to an input buffer); partly
//   overlapping buffers are not supported.
// - An out-of-range index (embedding, cross_entropy, their grads, fused_classifier) makes the affected row
//   NaN in the forward kernels and is skipped by embedding_grad; it never reads out of bounds.
//
// A kernel file is cppKernelPreamble() followed by any number of kernels; compile it with
// buildKernelLibrary (codegen/HostCompiler.h).
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir {
class Operation;
}

namespace tessel {

/// True if emitCppKernel supports `op`: a tessel op other than param, assign, matmul (a
/// library GEMM), causal_attention and grouped_attention (decomposed before codegen) and
/// reshape (a buffer alias), with no bf16 operand or result.
bool hasCppKernel(mlir::Operation* op);

/// The C++ source of one kernel computing `op` (see the promise above). Throws
/// std::invalid_argument naming the op and its location if !hasCppKernel(op).
std::string emitCppKernel(mlir::Operation* op, llvm::StringRef symbol);

/// The C++ twin of emitScratchReset (CudaEmitter.h): `symbol(void** args)` zeroes the 4-byte
/// counter at args[0]. The C++ kernels keep no state across blocks, so on the CPU it only
/// keeps every kernel step of a program runnable by both executors.
std::string emitScratchResetCpp(llvm::StringRef symbol);

/// The shared preamble every kernel file starts with (includes, helpers such as gelu).
std::string cppKernelPreamble();

}  // namespace tessel
