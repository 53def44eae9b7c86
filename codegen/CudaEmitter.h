// The CUDA kernel emitter: one `tessel` op (or one tessel.fused region) in, the CUDA C++
// source of one GPU kernel and its launch configuration out. The twin of CppEmitter.h and
// FusedEmitter.h: the same ops, the same argument order, the same numerics.
//
// Promise:
// - Every op hasCudaKernel accepts gets `extern "C" __global__ void <symbol>(float* out0, ...,
//   const float* in0, ...)`: one pointer per result, then one per operand, in op order
//   (int32_t* for i32 tensors, const for operands; a 0-d tensor is a pointer to one element).
//   Shapes are compile-time constants in the source, and the launch configuration is
//   derived from them; the kernel is correct for any grid (grid-stride loops), but its
//   block size must be the one in CudaLaunch (block reductions size their shared memory by it).
// - Above each kernel a comment names the op and its location ("// tessel.add at loc(...)",
//   first in the line, so NVRTC errors name the op: codegen/Nvrtc.h); every parameter line
//   has an llm.c shape comment (`// out [B, T, C] = [4, 32, 64]`).
// - Numerics follow the C++ kernels (CppEmitter.h, FusedEmitter.h) operation by operation:
//   the same exp/gelu approximations (tessel_exp), max-subtracted softmax and log-sum-exp,
//   two-pass layer norm (shifted by the row's first element, as the unfused C++ kernel; plain
//   in fused regions, as the fused C++ kernel), AdamW and SGD in torch's order, reductions
//   across rows and global_norm accumulated in double. Elementwise and layout kernels compute
//   exactly what the C++ kernels compute; row reductions differ only in summation order.
//   (Compiled by NVRTC, a*b+c may contract to an FMA; compiled as host C++ it does not.)
// - Deterministic: no float atomics. Every value is summed by one thread, or by a fixed tree
//   (warp shuffles, then one partial per warp in shared memory) whose shape depends only on
//   the block size. Sums across blocks (layer_norm_grad's dgamma/dbeta, cross_entropy's and
//   fused_classifier's mean,
//   global_norm, reduce_sum/mean with few outputs) are two-level: partial sums of chunks that
//   the shapes fix, then the chunks in order, by the block that finishes last.
// - Elementwise kernels may run in place (an output buffer equal to an input buffer).
//   128-bit (float4) accesses are used when the sizes allow and every pointer is 16-byte
//   aligned (checked at run time; otherwise a scalar loop does the same work).
// - Out-of-range indices behave as in the C++ kernels: NaN rows in embedding, cross_entropy,
//   its grad and fused_classifier, skipped by embedding_grad; nothing is read out of bounds.
// - Reentrant: no kernel has module-scope state. A two-level sum keeps its chunk sums and
//   its count of finished blocks in a scratch buffer passed as its last parameter
//   (`unsigned char* scratch`, CudaKernel::scratchBytes bytes; Lowering gives it a temp in
//   the arena). The counter, the first 4 bytes, must be 0 at launch and is 0 again when the
//   kernel ends (its last block resets it), so one scratch serves any number of such
//   kernels in turn after one emitScratchReset launch (Lowering: one per function), and
//   launches on different scratch may overlap (two streams, graph replays).
//
// A CUDA kernel file is cudaKernelPreamble() followed by any number of kernels; it compiles
// with NVRTC (codegen/Nvrtc.h) and, after `#include "test/simt/Simt.h"`, as host C++ for the
// SIMT harness. f32, bf16 (stored as tessel_bf16: 16 bits, computed in f32, rounded to
// nearest even on store; see KernelCommon.h) and i32 (indices, layout) tensors.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir {
class Operation;
}

namespace tessel {

/// How a kernel is launched: the grid and block dimensions, and the dynamic shared memory
/// in bytes (0 for every kernel so far: they use static __shared__ arrays only).
struct CudaLaunch {
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
};

/// What shape of work a kernel does (for reports and checks, e.g. "no elementwise or row
/// kernel spills").
enum class CudaKernelKind {
  Elementwise,       // one thread per element (or float4): add, gelu, adamw, constant, ...
  Layout,            // one thread per element moving data: transpose, split, concat, ...
  Row,               // one block per row with block reductions: layer_norm, softmax, ...
  Reduction,         // sums across rows, one thread per output or a fixed tree
  Scalar,            // one thread: clip_coefficient
  FusedElementwise,  // a tessel.fused region without row reductions, flattened
  FusedRow,          // a tessel.fused region with row reductions, one block per row
};

/// "elementwise", "layout", "row", "reduction", "scalar", "fused-elementwise", "fused-row".
const char* kindName(CudaKernelKind kind);

/// One generated kernel.
struct CudaKernel {
  std::string source;
  CudaLaunch launch;
  CudaKernelKind kind;
  /// Bytes of the scratch buffer the kernel takes as its last parameter, after the op's
  /// operands; 0 if it takes none (every kernel but the two-level sums).
  int64_t scratchBytes = 0;
};

/// Where a two-level sum's chunk sums start in its scratch: after the 4-byte counter of
/// finished blocks, padded so that doubles are aligned.
inline constexpr int64_t kScratchHeaderBytes = 16;

/// True if emitCudaKernel supports `op`: every op hasCppKernel accepts, plus tessel.fused
/// regions whose members are row-local (compiler/RowLocal.h) in one shape and whose inputs
/// and results are static f32 tensors. False for bf16 anywhere.
bool hasCudaKernel(mlir::Operation* op);

/// The CUDA source of the kernel `symbol` computing `op`, and how to launch it (see the
/// promise above). Throws std::invalid_argument naming the op and its location if
/// !hasCudaKernel(op).
CudaKernel emitCudaKernel(mlir::Operation* op, llvm::StringRef symbol);

/// The kernel `symbol(unsigned char* scratch)` that sets a scratch's counter of finished
/// blocks to 0 (one thread), launched before the first kernel with scratchBytes > 0 that
/// uses the scratch, on the same stream. Its C++ twin is emitScratchResetCpp (CppEmitter.h).
CudaKernel emitScratchReset(llvm::StringRef symbol);

/// The preamble every CUDA kernel file starts with: the NVRTC-only includes and typedefs
/// (guarded by __CUDACC_RTC__, so the same text compiles as host C++ with test/simt/Simt.h),
/// and the device helpers (tessel_exp, gelu, warp reductions).
std::string cudaKernelPreamble();

}  // namespace tessel
