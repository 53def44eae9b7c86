// The stand-in cuBLASLt's internals (BlasLtDescriptors.cpp: handles, descriptors, the
// heuristic; BlasLtMatmul.cpp: decoding a matmul and running it with OpenBLAS). Tests only.
//
// Only what Tessel's GEMM steps set (runtime/cuda/CudaGemm.cpp) is accepted; anything else is
// refused with CUBLAS_STATUS_NOT_SUPPORTED and a message naming it, never guessed:
// - matmul descriptor: compute CUBLAS_COMPUTE_32F, scale CUDA_R_32F, attributes TRANSA and
//   TRANSB (N or T); EPILOGUE DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS or
//   BGRADB with BIAS_POINTER, EPILOGUE_AUX_POINTER, EPILOGUE_AUX_LD (>= rows, a multiple of
//   8, as cuBLASLt requires) and EPILOGUE_AUX_BATCH_STRIDE; no scale pointers;
// - layouts: CUDA_R_32F or CUDA_R_16BF, column-major, ld >= rows, attributes BATCH_COUNT and
//   STRIDED_BATCH_OFFSET (>= 0);
// - preference: MAX_WORKSPACE_BYTES and MIN_ALIGNMENT_{A,B,C,D}_BYTES;
// - types (A, B, D): f32 f32 f32, bf16 bf16 bf16 or bf16 bf16 f32; C is D (the same layout
//   layout, and the same pointer unless an epilogue's residual is read from it); alpha and
//   beta host f32.
// Epilogues, in cuBLASLt's column-major terms (D is rows x cols): T = alpha op(A) op(B) +
// beta C; BIAS adds bias[row]; GELU applies the tanh-form GELU (computed in f64, rounded to
// f32: the stand-in's own, independent of Tessel's kernels) after the bias; the AUX forms
// store the GELU's input (T + bias) into aux[col * auxLd + row + batch * auxStride] in D's
// type; BGRADB stores bias[col] = sum over k of op(B)[k, col] (f64 sum, in D's type) and D = T.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <string>

namespace tessel::standin::lt {

/// A matmul descriptor's content, stored in cublasLtMatmulDescOpaque_t::data.
struct Desc {
  uint64_t magic;
  int32_t transA, transB;  // cublasOperation_t
  int32_t epilogue;        // cublasLtEpilogue_t
  uint64_t bias, aux;      // device addresses (0: not set)
  int64_t auxLd, auxStride;
};

/// A matrix layout's content, stored in cublasLtMatrixLayoutOpaque_t::data.
struct Layout {
  uint64_t magic;
  int32_t type;  // cudaDataType_t
  int32_t batch;
  uint64_t rows, cols;
  int64_t ld, stride;
};

/// A preference's content, stored in cublasLtMatmulPreferenceOpaque_t::data.
struct Preference {
  uint64_t magic;
  uint64_t workspace;
  uint32_t align[4];  // A, B, C, D
};

/// An algorithm's content, stored in cublasLtMatmulAlgo_t::data: the alignments it was chosen
/// for (a matmul on operands aligned less is refused, as such an algorithm may fault on a GPU).
struct Algo {
  uint64_t magic;
  uint32_t align[4];
};

inline constexpr uint64_t kDescMagic = 0x74657373656c4431, kLayoutMagic = 0x74657373656c4c31,
                          kPreferenceMagic = 0x74657373656c5031, kAlgoMagic = 0x74657373656c4131;

/// The decoded contents, or nullptr for a null or foreign object.
const Desc* desc(cublasLtMatmulDesc_t d);
const Layout* layout(cublasLtMatrixLayout_t l);

/// One matmul D = alpha op(A) op(B) + beta D in cuBLASLt's column-major terms.
struct Gemm {
  bool transA = false, transB = false;
  int32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  uint64_t bias = 0, aux = 0;
  int64_t auxLd = 0, auxStride = 0;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  Layout a{}, b{}, d{};
};

/// Checks the descriptors as cuBLASLt would and against what Tessel sets (see the file
/// comment); "" if accepted, else the reason.
std::string decode(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                   cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, Gemm* out);

/// Reports a refusal on stderr ("tessel stand-in cuBLASLt: <call>: <reason>") and returns `status`.
cublasStatus_t refuse(cublasStatus_t status, const std::string& call, const std::string& reason);

}  // namespace tessel::standin::lt
