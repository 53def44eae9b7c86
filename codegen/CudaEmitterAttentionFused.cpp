// CUDA kernels of causal_attention, grouped_attention and their gradients, the twins of
// CppEmitterAttentionFused.cpp: the same arguments (KernelCommonAttention.h), the same
// in-place [B, T, ...] layouts (no transposes, no split of the packed qkv), f32 inside.
//
// Forward: one thread per (batch, query head, query row), grid-stride: a first pass over the
// keys j <= i finds the largest score, a second sums exp(s - max) and accumulates
// exp(s - max) v_j into D registers; y = acc / sum. Each output element is one thread's sum
// in key order, so the result does not depend on the launch.
//
// Backward: one block per (batch, kv head), handling its G query heads, with no atomics:
//   1. one thread per query row (h, i) of the block: the row's log-sum-exp m + log(l) and
//      r = sum_j p_j (dy_i . v_j), into shared memory, and dq_i = sum_j ds_j k_j / sqrt(D)
//      with p_j = exp(s_j - lse), ds_j = p_j (dp_j - r);
//   2. after a barrier, one thread per key j: dk_j = sum over the G heads and rows i >= j of
//      ds_ij q_i / sqrt(D) and dv_j = sum of p_ij dy_i, in head and row order.
// The shared statistics take 2 G T floats, so the kernel serves G T <= kMaxAttentionBlockRows
// (a larger GQA group times sequence is refused by hasCudaKernel, named by lowering). These
// kernels are straightforward (one thread per row, K and V read through the cache, no tensor
// cores); the GPU trainer still decomposes attention until they are timed on a GPU.
//
// Against the C++ kernel (which normalises by dividing by the sum rather than through the
// log-sum-exp, and sums the gradients in the same orders), results agree within the
// attention tolerances of test/unit/CppEmitterAttentionCases.h, not bitwise: exp and log
// differ by an ulp or two between the device and host libraries.
#include "codegen/CudaEmitterInternal.h"
#include "codegen/KernelCommonAttention.h"  // defines: declareAttention, attentionLayout

#include <algorithm>

namespace tessel::cudagen {

bool attentionFitsCuda(mlir::Operation* op) {
  kernelcommon::AttentionLayout l = kernelcommon::attentionLayout(op);
  return l.heads / l.kvHeads * l.seq <= kMaxAttentionBlockRows && l.headSize <= 256;
}

void emitAttention(CudaWriter& w) {
  kernelcommon::AttentionLayout l = kernelcommon::attentionLayout(w.op());
  // Reduction: per-thread accumulators of D floats (they may spill at large D; no Row promise).
  w.kind(CudaKernelKind::Reduction);
  w.code(kernelcommon::declareAttention(w));
  flatLoop(w, l.batch * l.heads * l.seq, R"cuda(const idx_t i = j % T, h = j / T % NH, b = j / (T * NH), g = h / G;
const auto* qrow = qp + (b * T + i) * QS + QO + h * D;
float qi[D], acc[D];
for (idx_t e = 0; e < D; ++e) {
  qi[e] = static_cast<float>(qrow[e]);
  acc[e] = 0.0f;
}
auto score = [&](idx_t key) {
  const auto* krow = kp + (b * T + key) * KS + KO + g * D;
  float dot = 0.0f;
  for (idx_t e = 0; e < D; ++e) dot += qi[e] * static_cast<float>(krow[e]);
  return dot * SCALE;
};
float mx = -INFINITY;
for (idx_t key = 0; key <= i; ++key) mx = fmaxf(mx, score(key));
float sum = 0.0f;
for (idx_t key = 0; key <= i; ++key) {
  const float p = tessel_exp(score(key) - mx);
  sum += p;
  const auto* vrow = vp + (b * T + key) * KS + VO + g * D;
  for (idx_t e = 0; e < D; ++e) acc[e] += p * static_cast<float>(vrow[e]);
}
auto* yrow = out + (b * T + i) * NH * D + h * D;
for (idx_t e = 0; e < D; ++e) yrow[e] = acc[e] / sum;
)cuda",
           "one thread per query row of each (batch, head)");
}

void emitAttentionGrad(CudaWriter& w) {
  kernelcommon::AttentionLayout l = kernelcommon::attentionLayout(w.op());
  // Reduction: per-thread accumulators of D floats (they may spill at large D; no Row promise).
  w.kind(CudaKernelKind::Reduction);
  w.code(kernelcommon::declareAttention(w));
  int64_t rows = l.heads / l.kvHeads * l.seq;
  unsigned threads = static_cast<unsigned>(std::clamp<int64_t>((rows + 31) / 32 * 32, 32, 256));
  w.launch(static_cast<unsigned>(std::min<int64_t>(l.batch * l.kvHeads, kResidentThreads / threads)),
           threads, "one block per (batch, kv head), grid-stride");
  w.code(R"cuda(__shared__ float lse[G * T], rowDot[G * T];  // per query row (h - g G, i)
for (idx_t task = blockIdx.x; task < B * NKV; task += gridDim.x) {
  const idx_t b = task / NKV, g = task % NKV;
  const auto* kbase = kp + b * T * KS + KO + g * D;
  const auto* vbase = vp + b * T * KS + VO + g * D;
  // The scaled score s = (q_i . k_key) / sqrt(D) and dp = dy_i . v_key of query row `row`.
  auto dots = [&](idx_t row, idx_t key, float& s, float& dp) {
    const idx_t h = g * G + row / T, i = row % T;
    const auto* qrow = qp + (b * T + i) * QS + QO + h * D;
    const auto* dyrow = dy + (b * T + i) * NH * D + h * D;
    s = 0.0f;
    dp = 0.0f;
    for (idx_t e = 0; e < D; ++e) {
      s += static_cast<float>(qrow[e]) * static_cast<float>(kbase[key * KS + e]);
      dp += static_cast<float>(dyrow[e]) * static_cast<float>(vbase[key * KS + e]);
    }
    s *= SCALE;
  };
  // 1. Per query row: its log-sum-exp and r = sum_j p_j dp_j (shared), then dq.
  for (idx_t row = threadIdx.x; row < G * T; row += THREADS) {
    const idx_t h = g * G + row / T, i = row % T;
    float s, dp, mx = -INFINITY, sum = 0.0f, r = 0.0f;
    for (idx_t key = 0; key <= i; ++key) {
      dots(row, key, s, dp);
      mx = fmaxf(mx, s);
    }
    for (idx_t key = 0; key <= i; ++key) {
      dots(row, key, s, dp);
      sum += tessel_exp(s - mx);
    }
    const float rowLse = mx + logf(sum);
    for (idx_t key = 0; key <= i; ++key) {
      dots(row, key, s, dp);
      r += tessel_exp(s - rowLse) * dp;
    }
    lse[row] = rowLse;
    rowDot[row] = r;
    float dq[D];
    for (idx_t e = 0; e < D; ++e) dq[e] = 0.0f;
    for (idx_t key = 0; key <= i; ++key) {
      dots(row, key, s, dp);
      const float ds = tessel_exp(s - rowLse) * (dp - r) * SCALE;
      for (idx_t e = 0; e < D; ++e) dq[e] += ds * static_cast<float>(kbase[key * KS + e]);
    }
    auto* dqrow = dqp + (b * T + i) * QS + QO + h * D;
    for (idx_t e = 0; e < D; ++e) dqrow[e] = dq[e];
  }
  __syncthreads();
  // 2. Per key: dk and dv over the group's heads and the rows that see the key, in order.
  for (idx_t key = threadIdx.x; key < T; key += THREADS) {
    float dk[D], dv[D];
    for (idx_t e = 0; e < D; ++e) dk[e] = dv[e] = 0.0f;
    for (idx_t row = 0; row < G * T; ++row) {
      const idx_t h = g * G + row / T, i = row % T;
      if (i < key) continue;
      float s, dp;
      dots(row, key, s, dp);
      const float p = tessel_exp(s - lse[row]), ds = p * (dp - rowDot[row]) * SCALE;
      const auto* qrow = qp + (b * T + i) * QS + QO + h * D;
      const auto* dyrow = dy + (b * T + i) * NH * D + h * D;
      for (idx_t e = 0; e < D; ++e) {
        dk[e] += ds * static_cast<float>(qrow[e]);
        dv[e] += p * static_cast<float>(dyrow[e]);
      }
    }
    auto* dkrow = dkp + (b * T + key) * KS + KO + g * D;
    auto* dvrow = dvp + (b * T + key) * KS + VO + g * D;
    for (idx_t e = 0; e < D; ++e) {
      dkrow[e] = dk[e];
      dvrow[e] = dv[e];
    }
  }
  __syncthreads();  // the statistics are reused by the block's next task
}
)cuda");
}

}  // namespace tessel::cudagen
