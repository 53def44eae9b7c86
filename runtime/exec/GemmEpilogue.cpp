// GEMM epilogues on the CPU (GemmEpilogue.h says what and with which numerics).
#include "runtime/exec/GemmEpilogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "runtime/numeric/BFloat16.h"

namespace tessel::rt {
namespace {

// tessel_exp and tessel_gelu: the generated C++ kernels' own definitions (KernelMath.inc is
// the text their preamble embeds), so the epilogue's GELU is the gelu kernel's operations.
inline float tessel_bits_to_float(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
#include "runtime/numeric/KernelMath.inc"

inline float load(const void* base, bool bf16, int64_t i) {
  return bf16 ? numeric::floatFromBF16(static_cast<const uint16_t*>(base)[i]) : static_cast<const float*>(base)[i];
}

inline void store(void* base, bool bf16, int64_t i, float v) {
  if (bf16)
    static_cast<uint16_t*>(base)[i] = numeric::bf16FromFloat(v);
  else
    static_cast<float*>(base)[i] = v;
}

// One row of n elements, f32 throughout: the common case, written as one simd loop, built
// for AVX-512 and AVX2+FMA as well as the baseline ISA and chosen when the process starts
// (GCC function multiversioning), as the runtime cannot assume the generated kernels'
// -march=native.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define TESSEL_ROW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSEL_ROW_CLONES
#endif
TESSEL_ROW_CLONES
void rowF32(float* c, const float* bias, float* pre, const float* residual, bool gelu, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    float v = c[j];
    if (bias) v = v + bias[j];
    if (pre) pre[j] = v;
    if (gelu) v = tessel_gelu(v);
    if (residual) v = v + residual[j];
    c[j] = v;
  }
}

// c[j] = gelu(pre[j]) for j in [0, n): rowF32's GELU, out of place.
TESSEL_ROW_CLONES
void geluRowF32(const float* pre, float* c, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) c[j] = tessel_gelu(pre[j]);
}

// The bias gradient: out[i] = sum over b, kk of op(A[b])[i, kk], in double, b then kk in
// order. Columns i are taken in blocks so that a transposed A (the usual dY stored
// [rows, m]) is read along its rows.
void biasGradient(const GemmStep& g, const void* a, bool aBF16, float* out) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (g.m + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t i0 = blk * kBlock, i1 = std::min(g.m, i0 + kBlock);
    double acc[kBlock] = {};
    for (int64_t b = 0; b < g.batch; ++b) {
      const int64_t base = b * g.strideA;
      if (g.transA) {  // stored k x m: op(A)[i, kk] = A[kk * m + i]
        for (int64_t kk = 0; kk < g.k; ++kk)
          for (int64_t i = i0; i < i1; ++i) acc[i - i0] += load(a, aBF16, base + kk * g.m + i);
      } else {  // stored m x k: op(A)[i, kk] = A[i * k + kk]
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t kk = 0; kk < g.k; ++kk) acc[i - i0] += load(a, aBF16, base + i * g.k + kk);
      }
    }
    for (int64_t i = i0; i < i1; ++i) out[i] = static_cast<float>(acc[i - i0]);
  }
}

}  // namespace

float epilogueGelu(float x) { return tessel_gelu(x); }

std::string gemmEpilogueName(const GemmEpilogue& e) {
  std::string out;
  auto add = [&](bool used, const char* part) {
    if (used) out += (out.empty() ? "" : "+") + std::string(part);
  };
  add(e.bias >= 0, "bias");
  add(e.gelu, "gelu");
  add(e.preActivation >= 0, "pre");
  add(e.residual >= 0, "residual");
  add(e.biasGradient >= 0, "bias_grad");
  return out;
}

void applyGeluFrom(const float* pre, float* c, int64_t batch, int64_t count, int64_t stride) {
  constexpr int64_t kChunk = 4096;  // elements per parallel item
  const int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < batch * chunks; ++t) {
    const int64_t b = t / chunks, j0 = (t % chunks) * kChunk, at = b * stride + j0;
    geluRowF32(pre + at, c + at, std::min(kChunk, count - j0));
  }
}

void applyGemmEpilogue(const GemmStep& g, const void* a, bool aBF16, void* c, bool cBF16,
                       const GemmEpilogueOperands& o) {
  const GemmEpilogue& e = g.epilogue;
  auto need = [&](bool used, const void* p, const char* what) {
    if (used && !p)
      throw std::invalid_argument(fmt::format("applyGemmEpilogue: the epilogue has a {} but no buffer was given "
                                              "(gemm at {})", what, g.location.empty() ? "?" : g.location));
  };
  need(e.bias >= 0, o.bias, "bias");
  need(e.preActivation >= 0, o.preActivation, "pre-activation");
  need(e.residual >= 0, o.residual, "residual");
  need(e.biasGradient >= 0, o.biasGradient, "bias gradient");
  need(e.biasGradient >= 0, a, "bias gradient (A)");
  if (e.biasGradient >= 0) biasGradient(g, a, aBF16, o.biasGradient);
  const bool rowWork = e.bias >= 0 || e.gelu || e.residual >= 0;
  if (!rowWork) return;
  const int64_t m = g.m, n = g.n, rows = g.batch * m;
  const bool allF32 = !cBF16 && !(o.bias && o.biasBF16) && !(o.preActivation && o.preActivationBF16) &&
                      !(o.residual && o.residualBF16);
  const float* biasF32 = nullptr;
  std::vector<float> widenedBias;
  if (o.bias) {
    if (o.biasBF16) {
      widenedBias.resize(static_cast<size_t>(n));
      numeric::bf16ToFloat(static_cast<const uint16_t*>(o.bias), widenedBias.data(), n);
      biasF32 = widenedBias.data();
    } else {
      biasF32 = static_cast<const float*>(o.bias);
    }
  }
#pragma omp parallel
  {
    std::vector<float> row, res;  // mixed-dtype rows go through f32 copies
    if (!allF32) row.resize(static_cast<size_t>(n)), res.resize(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = (r / m) * g.strideC + (r % m) * n;  // element offset of the row in C
      if (allF32) {
        rowF32(static_cast<float*>(c) + at, biasF32, o.preActivation ? static_cast<float*>(o.preActivation) + at : nullptr,
               o.residual ? static_cast<const float*>(o.residual) + at : nullptr, e.gelu, n);
        continue;
      }
      for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] = load(c, cBF16, at + j);
      if (o.residual)
        for (int64_t j = 0; j < n; ++j) res[static_cast<size_t>(j)] = load(o.residual, o.residualBF16, at + j);
      for (int64_t j = 0; j < n; ++j) {
        float v = row[static_cast<size_t>(j)];
        if (biasF32) v = v + biasF32[j];
        if (o.preActivation) store(o.preActivation, o.preActivationBF16, at + j, v);
        if (e.gelu) v = tessel_gelu(v);
        if (o.residual) v = v + res[static_cast<size_t>(j)];
        store(c, cBF16, at + j, v);
      }
    }
  }
}

}  // namespace tessel::rt
