// GEMM steps on cuBLASLt (internal to runtime/cuda).
//
// Promise: a GemmStep (row-major, optional transposes, strided batches including stride 0
// for a shared operand, accumulate) becomes one cublasLtMatmul through the operand swap of
// CudaPlan.h ltGemmShape, with data types taken from the buffers (f32 -> CUDA_R_32F, bf16 ->
// CUDA_R_16BF), compute type CUBLAS_COMPUTE_32F (f32 accumulation; no TF32) and f32 alpha
// and beta. The algorithm is chosen once, at preparation, by cuBLASLt's heuristic for the
// operands' actual alignment and the workspace given. A step's epilogue (Program.h
// GemmEpilogue) maps onto cuBLASLt's (ltEpilogue below; docs/gpu.md has the table), and
// what cuBLASLt cannot express is refused at preparation. Written against the CUDA 13
// cuBLASLt API and not yet run on a GPU.
#pragma once

#include "runtime/cuda/CudaApi.h"
#include "runtime/exec/Program.h"

#include <string>

namespace tessel::rt::cuda {

/// The device addresses of a GemmStep's epilogue buffers (0 where unused). Their dtypes are
/// Program.h's: C's for bias, pre-activation and residual, f32 for the bias gradient.
struct LtEpilogueBuffers {
  CUdeviceptr bias = 0, preActivation = 0, residual = 0, biasGradient = 0;
};

/// The cuBLASLt epilogue of `g.epilogue` with C of dtype `dc` (after the operand swap of
/// CudaPlan.h, cuBLASLt's D is C transposed: its rows are C's columns, so a bias over C's
/// columns is cuBLASLt's bias over D's rows, and the bias gradient over the rows of the
/// step's op(A), which is cuBLASLt's B, is BGRADB):
///   bias -> BIAS; gelu -> GELU; bias + gelu -> GELU_BIAS; with a pre-activation -> GELU_AUX
///   or GELU_AUX_BIAS (aux = the pre-activation, ld n, batch stride strideC); residual ->
///   C = the residual with beta = 1 (D = op(A) op(B) + residual + bias); bias gradient ->
///   BGRADB; nothing -> DEFAULT.
/// Throws std::runtime_error naming the step for what cuBLASLt cannot express: a residual
/// with gelu (cuBLASLt adds C before the activation), a bias gradient combined with another
/// epilogue, on more than one batch, or with a bf16 C (cuBLASLt writes it in C's type; the
/// program's is f32), a pre-activation whose leading dimension n or batch stride is not a
/// multiple of 8 (cuBLASLt's rule for the GELU aux buffer).
cublasLtEpilogue_t ltEpilogue(const GemmStep& g, DType dc);

/// One prepared GemmStep: descriptors, layouts, the chosen algorithm and device pointers.
class LtGemm {
 public:
  /// Prepares `g` on operands at device addresses a, b, c of dtypes da, db, dc. Throws
  /// std::runtime_error naming the step's location if cuBLASLt offers no algorithm.
  LtGemm(const BlasLtApi& api, cublasLtHandle_t handle, const GemmStep& g, CUdeviceptr a, DType da,
         CUdeviceptr b, DType db, CUdeviceptr c, DType dc, CUdeviceptr workspace, size_t workspaceBytes,
         const LtEpilogueBuffers& epilogue = {});
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  /// Enqueues the matmul(s) on `stream` (capturable: no allocation, no synchronisation).
  void enqueue(CUstream stream) const;

 private:
  const BlasLtApi& api_;
  cublasLtHandle_t handle_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  CUdeviceptr pa_, pb_, pd_, pc_, workspace_;  // pc_: cuBLASLt's C (the residual, else D)
  size_t workspaceBytes_;
  int64_t serialBatches_ = 0;  // > 0: issue this many batch-1 matmuls, advancing a and b
  int64_t strideABytes_ = 0, strideBBytes_ = 0;
  float beta_ = 0.0f;
  std::string where_;
};

}  // namespace tessel::rt::cuda
