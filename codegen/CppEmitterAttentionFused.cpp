// C++ kernels of causal_attention, grouped_attention and their gradients (one fused kernel
// each, compiler/TesselOps.td and TesselAttentionOps.td), with no layout copies: q, k and v
// are read in place from their [B, T, ...] layouts (the packed qkv of causal_attention at
// column offsets 0, C and 2C) and y, dq, dk, dv are written in place the same way.
//
// Forward: one task per (batch, query head), OpenMP over B * NH. The task gathers its kv
// head's K and V into two contiguous f32 [T, D] buffers (in L1/L2: 32 KiB for T = 64,
// D = 64), then per query row i keeps one row of scores s[0..i] (T floats) and an f32
// accumulator of D: s_j = (q_i . k_j) / sqrt(D), softmax max-subtracted, y_i = sum_j p_j v_j.
// A row of scores is never more than T floats, so no key-block tiling is needed for the
// scores to stay in cache (4 KiB at T = 1024); K and V of one head are T * D each.
//
// Backward: one task per (batch, kv head), handling its G = NH / NKV query heads in order,
// so dk and dv of a kv head are summed by one task in a fixed order (deterministic, no
// atomics). Per query row i the probabilities are recomputed from q and k (nothing is saved
// by the forward): p_j, dp_j = dy_i . v_j, r = sum_j p_j dp_j, ds_j = p_j (dp_j - r) / sqrt(D),
// dq_i = sum_j ds_j k_j, dk_j += ds_j q_i, dv_j += p_j dy_i (the composition of the softmax
// and matmul VJPs). Every inner loop runs over D contiguous floats (omp simd).
#include "codegen/CppEmitterInternal.h"
#include "codegen/KernelCommonAttention.h"  // defines: declareAttention, attentionLayout


namespace tessel::cppgen {
namespace {

/// Gathers kv head g of batch b from `src` (row stride KS, column offset `offset`) into the
/// contiguous f32 [T, D] buffer `dst`.
constexpr const char* kGatherHead = R"cpp(
auto gatherHead = [](float* dst, const auto* src, int64_t b, int64_t g, int64_t offset) {
  for (int64_t t = 0; t < T; ++t) {
    const auto* row = src + (b * T + t) * KS + offset + g * D;
    #pragma omp simd
    for (int64_t e = 0; e < D; ++e) dst[t * D + e] = static_cast<float>(row[e]);
  }
};
)cpp";

constexpr const char* kForward = R"cpp(
$PAR
for (int64_t task = 0; task < B * NH; ++task) {
  const int64_t b = task / NH, h = task % NH, g = h / G;
  std::unique_ptr<float[]> buf(new float[2 * T * D + T]);
  float* kh = buf.get();
  float* vh = kh + T * D;
  float* s = vh + T * D;  // one row of scores, then of exp(s - max)
  gatherHead(kh, kp, b, g, KO);
  gatherHead(vh, vp, b, g, VO);
  for (int64_t i = 0; i < T; ++i) {
    const auto* qrow = qp + (b * T + i) * QS + QO + h * D;
    float qi[D], acc[D];
    #pragma omp simd
    for (int64_t e = 0; e < D; ++e) qi[e] = static_cast<float>(qrow[e]);
    float mx = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      float dot = 0.0f;
      #pragma omp simd reduction(+ : dot)
      for (int64_t e = 0; e < D; ++e) dot += qi[e] * kh[j * D + e];
      s[j] = dot * SCALE;
      mx = s[j] > mx ? s[j] : mx;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j <= i; ++j) sum += s[j] = tessel_exp(s[j] - mx);
    #pragma omp simd
    for (int64_t e = 0; e < D; ++e) acc[e] = 0.0f;
    for (int64_t j = 0; j <= i; ++j) {
      const float pj = s[j];
      #pragma omp simd
      for (int64_t e = 0; e < D; ++e) acc[e] += pj * vh[j * D + e];
    }
    auto* yrow = out + (b * T + i) * NH * D + h * D;
    for (int64_t e = 0; e < D; ++e) yrow[e] = acc[e] / sum;
  }
}
)cpp";

constexpr const char* kBackward = R"cpp(
$PAR
for (int64_t task = 0; task < B * NKV; ++task) {
  const int64_t b = task / NKV, g = task % NKV;
  std::unique_ptr<float[]> buf(new float[4 * T * D + 2 * T]());
  float* kh = buf.get();
  float* vh = kh + T * D;
  float* dkh = vh + T * D;  // sums over the G query heads, in head order
  float* dvh = dkh + T * D;
  float* p = dvh + T * D;
  float* dp = p + T;
  gatherHead(kh, kp, b, g, KO);
  gatherHead(vh, vp, b, g, VO);
  for (int64_t h = g * G; h < (g + 1) * G; ++h)
    for (int64_t i = 0; i < T; ++i) {
      const auto* qrow = qp + (b * T + i) * QS + QO + h * D;
      const auto* dyrow = dy + (b * T + i) * NH * D + h * D;
      float qi[D], dyi[D], dqi[D];
      #pragma omp simd
      for (int64_t e = 0; e < D; ++e) {
        qi[e] = static_cast<float>(qrow[e]);
        dyi[e] = static_cast<float>(dyrow[e]);
        dqi[e] = 0.0f;
      }
      float mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        float dot = 0.0f, dpj = 0.0f;
        #pragma omp simd reduction(+ : dot, dpj)
        for (int64_t e = 0; e < D; ++e) {
          dot += qi[e] * kh[j * D + e];
          dpj += dyi[e] * vh[j * D + e];
        }
        p[j] = dot * SCALE;
        dp[j] = dpj;
        mx = p[j] > mx ? p[j] : mx;
      }
      float sum = 0.0f;
      for (int64_t j = 0; j <= i; ++j) sum += p[j] = tessel_exp(p[j] - mx);
      float r = 0.0f;
      for (int64_t j = 0; j <= i; ++j) r += (p[j] /= sum) * dp[j];
      for (int64_t j = 0; j <= i; ++j) {
        const float pj = p[j], ds = pj * (dp[j] - r) * SCALE;
        float* dkj = dkh + j * D;
        float* dvj = dvh + j * D;
        const float* kj = kh + j * D;
        #pragma omp simd
        for (int64_t e = 0; e < D; ++e) {
          dqi[e] += ds * kj[e];
          dkj[e] += ds * qi[e];
          dvj[e] += pj * dyi[e];
        }
      }
      auto* dqrow = dqp + (b * T + i) * QS + QO + h * D;
      for (int64_t e = 0; e < D; ++e) dqrow[e] = dqi[e];
    }
  for (int64_t t = 0; t < T; ++t) {
    auto* dkrow = dkp + (b * T + t) * KS + KO + g * D;
    auto* dvrow = dvp + (b * T + t) * KS + VO + g * D;
    for (int64_t e = 0; e < D; ++e) {
      dkrow[e] = dkh[t * D + e];
      dvrow[e] = dvh[t * D + e];
    }
  }
}
)cpp";

/// The parallel-for pragma of one attention kernel: B * tasks tasks of about T^2 / 2 * D
/// multiply-adds each.
std::string attentionPar(const kernelcommon::AttentionLayout& l, int64_t tasks) {
  return parallelFor(l.batch * tasks * l.seq * l.seq * l.headSize, l.batch * tasks);
}

}  // namespace

void emitAttention(KernelWriter& w) {
  kernelcommon::AttentionLayout l = kernelcommon::attentionLayout(w.op());
  w.code(kernelcommon::declareAttention(w));
  w.code(kGatherHead);
  w.code(kForward, {{"PAR", attentionPar(l, l.heads)}});
}

void emitAttentionGrad(KernelWriter& w) {
  kernelcommon::AttentionLayout l = kernelcommon::attentionLayout(w.op());
  w.code(kernelcommon::declareAttention(w));
  w.code(kGatherHead);
  w.code(kBackward, {{"PAR", attentionPar(l, l.kvHeads)}});
}

}  // namespace tessel::cppgen
