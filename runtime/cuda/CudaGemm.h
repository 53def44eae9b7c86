// GEMM steps on cuBLASLt (internal to runtime/cuda).
//
// Promise: a GemmStep (row-major, optional transposes, strided batches including stride 0
// for a shared operand, accumulate) becomes one cublasLtMatmul through the operand swap of
// CudaPlan.h ltGemmShape, with data types taken from the buffers (f32 -> CUDA_R_32F, bf16 ->
// CUDA_R_16BF), compute type CUBLAS_COMPUTE_32F (f32 accumulation; no TF32) and f32 alpha
// and beta. The algorithm is chosen once, at preparation, by cuBLASLt's heuristic for the
// operands' actual alignment and the workspace given. No epilogue (bias, GELU) is used:
// biases and activations are separate generated kernels. Written against the CUDA 13
// cuBLASLt API and not yet run on a GPU.
#pragma once

#include "runtime/cuda/CudaApi.h"
#include "runtime/exec/Program.h"

#include <string>

namespace tessel::rt::cuda {

/// One prepared GemmStep: descriptors, layouts, the chosen algorithm and device pointers.
class LtGemm {
 public:
  /// Prepares `g` on operands at device addresses a, b, c of dtypes da, db, dc. Throws
  /// std::runtime_error naming the step's location if cuBLASLt offers no algorithm.
  LtGemm(const BlasLtApi& api, cublasLtHandle_t handle, const GemmStep& g, CUdeviceptr a, DType da,
         CUdeviceptr b, DType db, CUdeviceptr c, DType dc, CUdeviceptr workspace, size_t workspaceBytes);
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
  CUdeviceptr pa_, pb_, pd_, workspace_;
  size_t workspaceBytes_;
  int64_t serialBatches_ = 0;  // > 0: issue this many batch-1 matmuls, advancing a and b
  int64_t strideABytes_ = 0, strideBBytes_ = 0;
  float beta_ = 0.0f;
  std::string where_;
};

}  // namespace tessel::rt::cuda
