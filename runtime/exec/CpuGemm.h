// One GEMM step (Program.h's GemmStep) on the CPU, with OpenBLAS or oneDNN.
//
//   OpenBLAS: cblas_sgemm (row-major) per batch item. A bf16 operand is widened exactly to f32
//             into the caller's scratch (MemoryBreakdown.h's GemmScratch: one batch item's A,
//             B and C), the product accumulates in f32, and a bf16 C is rounded once, to
//             nearest even.
//   oneDNN:   one dnnl::matmul primitive over the whole batch, made once (at construction),
//             on the CPU's own ISA (AVX-512, AVX512_BF16, AMX where present). Transposes are
//             memory strides; a batch stride of 0 is a broadcast batch dimension of 1; f32,
//             or bf16 A and B with f32 accumulation and an f32 or bf16 C (rounded once, to
//             nearest even); accumulate is the post-op sum (C += A B, in f32 before the one
//             rounding). The numerics of gemmThroughF32 up to the order of the k-sums.
//
// The step's epilogue (Program.h GemmEpilogue) is applied by run() too. With oneDNN and f32
// buffers throughout, its parts oneDNN 2.6 computes on the product in registers go into the
// primitive: the bias as the matmul's bias argument (DNNL_ARG_BIAS, [1, n] or [1, 1, n],
// added to the f32 accumulator as the unfused add does: bitwise the same sum), the residual
// as a binary add post-op (after the bias, in f32: bitwise the unfused add), a GELU without
// pre-activation as the eltwise gelu_tanh post-op (oneDNN's tanh approximation of the same
// formula, within f32 rounding of tessel_gelu, not bitwise), and with a pre-activation the
// primitive writes P + bias straight into the pre-activation buffer, from which one pass
// computes C = gelu(pre) (GemmEpilogue.h applyGeluFrom: the epilogue's own GELU). What is
// left (a bias gradient, bf16 buffers, OpenBLAS) runs after the product with
// applyGemmEpilogue (GemmEpilogue.h). A primitive oneDNN refuses with the epilogue falls
// back to the plain matmul and applyGemmEpilogue.
//
// Both use the process's OpenMP thread pool (Debian's OpenBLAS OpenMP build and oneDNN's
// OpenMP runtime): the threads are omp_get_max_threads() when the step runs. oneDNN keeps its
// own scratchpad (outside the executor's AllocationCounter). Not thread-safe: one run() at a
// time per CpuGemmContext.
#pragma once

#include <memory>
#include <string>

#include "runtime/exec/GemmEpilogue.h"
#include "runtime/exec/MemoryBreakdown.h"
#include "runtime/exec/Program.h"

namespace tessel::rt {

/// The element types of a GEMM's A, B and C (F32 or BF16 each).
struct GemmDTypes {
  DType a = DType::F32, b = DType::F32, c = DType::F32;
  bool anyBF16() const { return a == DType::BF16 || b == DType::BF16 || c == DType::BF16; }
};

/// Whether oneDNN's matmul runs these types here: f32 A, B and C, or bf16 A and B with an f32
/// or bf16 C. Mixed A/B types (one f32, one bf16) are OpenBLAS only.
bool oneDnnSupports(const GemmDTypes& types);

/// The oneDNN CPU engine and its in-order stream, made once per executor (or tuner) and shared
/// by its GEMMs. Throws std::runtime_error when oneDNN cannot make a CPU engine.
class CpuGemmContext {
 public:
  CpuGemmContext();
  ~CpuGemmContext();
  CpuGemmContext(const CpuGemmContext&) = delete;
  CpuGemmContext& operator=(const CpuGemmContext&) = delete;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// The f32 scratch of the OpenBLAS path for bf16 operands: `base` holds `sizes` (a, b and c
/// parts, each aligned as GemmScratch::bytes() counts them); may be null when no operand is bf16.
struct GemmF32Scratch {
  float* base = nullptr;
  GemmScratch sizes;
};

/// One GEMM step bound to its operands, ready to run with `backend` (Default = OpenBLAS).
/// The pointers must stay valid (and the scratch at least GemmScratch{m k, k n, m n}) while
/// the CpuGemm lives. `epilogue`: the buffers of `step.epilogue` (GemmEpilogue.h; every field
/// the epilogue uses, with its dtype). Throws std::runtime_error, naming the step's location,
/// when oneDNN is asked for types it does not run (oneDnnSupports) or a layout it refuses (e.g.
/// strideC 0 with batch > 1), or when a bf16 OpenBLAS step has no or too small scratch.
class CpuGemm {
 public:
  CpuGemm(const GemmStep& step, GemmDTypes types, GemmBackend backend, const void* a, const void* b, void* c,
          GemmF32Scratch scratch, CpuGemmContext* context, const GemmEpilogueOperands& epilogue = {});
  ~CpuGemm();
  CpuGemm(const CpuGemm&) = delete;
  CpuGemm& operator=(const CpuGemm&) = delete;
  /// C[b] = op(A[b]) op(B[b]) (+ C[b] with accumulate) for every batch item, then the step's
  /// epilogue (see the top of this file).
  void run() const;
  /// The library that runs (OpenBlas for Default).
  GemmBackend backend() const { return backend_; }
  /// The part of the step's epilogue oneDNN computes in the primitive (empty with OpenBLAS):
  /// bias, gelu (by the post-op, or from the pre-activation it writes) and residual set as
  /// fused; the rest runs after the product.
  const GemmEpilogue& fusedEpilogue() const { return fused_; }

 private:
  void runOpenBlas() const;
  struct OneDnn;
  GemmStep step_;
  GemmDTypes types_;
  GemmBackend backend_;
  const void* a_;
  const void* b_;
  void* c_;
  GemmF32Scratch scratch_;
  GemmEpilogueOperands epilogue_;
  GemmStep rest_;      // step_ with the epilogue left for applyGemmEpilogue
  GemmEpilogue fused_;  // what the primitive computes
  std::unique_ptr<OneDnn> oneDnn_;
};

/// Sets the OpenMP and OpenBLAS thread counts (threads > 0; the Executor's `threads`).
void setCpuGemmThreads(int threads);
/// omp_get_max_threads(): the threads a GEMM run now would use.
int cpuGemmThreads();
/// "openblas <openblas_get_config()>; onednn <major.minor.patch> <git hash>", for cache keys.
std::string cpuGemmLibraryVersions();
/// The CPU's model name (/proc/cpuinfo's first "model name"; "unknown" if none).
std::string cpuModelName();

/// Scratch elements one GEMM's OpenBLAS path needs (one batch item's A, B and C; zeros
/// without a bf16 operand).
GemmScratch gemmScratchFor(const GemmStep& step, const GemmDTypes& types);

}  // namespace tessel::rt
