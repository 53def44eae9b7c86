// The CPU side of a GEMM step's fused epilogue (Program.h GemmEpilogue): bias, tanh-GELU
// with its pre-activation, residual and bias gradient, applied by the executor right after
// the product (runtime/exec/Executor.cpp's GEMM case), so that the GEMM's output is read
// and written once more by one pass instead of by two or three separate kernels.
//
// Numerics (f32 C): per element, in this order and in f32, as the unfused program's kernels
// compute them (add with a broadcast bias, gelu, add of the residual):
//   pre = C + bias[j];  C = gelu(pre) + residual
// with gelu the generated kernels' tessel_gelu (runtime/numeric/KernelMath.inc: the one
// definition, whose text the kernel preamble embeds). The adds are bitwise equal to the
// unfused kernels'. GELU is not always: the kernels are compiled with -march=native and
// the f32 row loop here is multiversioned (AVX-512, AVX2+FMA, baseline; chosen at load
// time), and the host compiler may contract a * b + c into FMAs differently in each; the
// two differ by at most twice the GELU error bound (gemm_epilogue_test: (8 + 4 |2u|) 2^-24
// relative). Also not bitwise:
//  - bf16 C: the product is rounded to bf16 once (as the executor stores it), then bias,
//    gelu and residual run in f32 and each stored output (C, the pre-activation) is rounded
//    once; an unfused bf16 program rounds every intermediate tensor to bf16 (these are the
//    numerics of cuBLASLt's epilogues, which also compute the activation unrounded).
//  - the bias gradient sums in double, rows in order, then rounds to f32; the reduce_sum
//    kernel also sums in double but may split the rows into chunks (codegen's
//    CppEmitterLayout.cpp), so the two can differ in the last bit of the f32 result.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/exec/Program.h"

namespace tessel::rt {

/// The base pointers of a GEMM epilogue's buffers (nullptr where the epilogue has none),
/// each with its dtype (f32 unless the flag says bf16). Shapes as Program.h GemmEpilogue.
struct GemmEpilogueOperands {
  const void* bias = nullptr;  // [n]
  bool biasBF16 = false;
  void* preActivation = nullptr;  // [batch, m, n], stride strideC between batches
  bool preActivationBF16 = false;
  const void* residual = nullptr;  // [batch, m, n], stride strideC between batches
  bool residualBF16 = false;
  float* biasGradient = nullptr;  // [m], f32
};

/// Applies `g.epilogue` to the product already stored in C (`c`, bf16 when cBF16), per
/// batch, rows in parallel (OpenMP); the bias gradient reads A (`a`, bf16 when aBF16).
/// Operands must be those `g.epilogue` names (ProgramCheck validated sizes and overlap);
/// a null pointer for a used field throws std::invalid_argument.
void applyGemmEpilogue(const GemmStep& g, const void* a, bool aBF16, void* c, bool cBF16,
                       const GemmEpilogueOperands& operands);

/// The epilogue's parts as profiles and listings print them after the GEMM: "bias",
/// "gelu", "pre" (the pre-activation), "residual", "bias_grad", joined by '+' ("" if empty).
std::string gemmEpilogueName(const GemmEpilogue& e);

/// c[b * stride + i] = gelu(pre[b * stride + i]) for i in [0, count), b in [0, batch), f32:
/// the epilogue's GELU computed out of place (in parallel, OpenMP), for a GEMM whose library
/// wrote P + bias into the pre-activation buffer (CpuGemm.h). The same operations as
/// applyGemmEpilogue's f32 row loop on the same pre-activation.
void applyGeluFrom(const float* pre, float* c, int64_t batch, int64_t count, int64_t stride);

/// tanh-approximate GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) as x * sigmoid(2u):
/// the generated kernels' tessel_gelu's f32 operations (PyTorch approximate="tanh"); equal to
/// it up to FMA contraction (see above).
float epilogueGelu(float x);

}  // namespace tessel::rt
