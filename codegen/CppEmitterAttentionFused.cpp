// C++ kernels of causal_attention, grouped_attention and their gradients (one fused kernel
// each, compiler/TesselOps.td and TesselAttentionOps.td), with no layout copies: q, k and v
// are read in place from their [B, T, ...] layouts (the packed qkv of causal_attention at
// column offsets 0, C and 2C) and y, dq, dk, dv are written in place the same way.
//
// Both kernels gather the heads they use into zero-padded f32 buffers of the task (T and D
// rounded up to 16; [TP, DP] = 16 KiB at T = D = 64) and walk the query rows in blocks of
// L = 16, one row per vector lane: the scores of a block are kept transposed, st[j, l] for
// key j and row i0 + l, computed as a register tile from the row-major keys (broadcast) and
// the transposed queries qt [DP, TP] (one vector load per channel). The causal softmax then
// runs down the keys with a max and a sum per lane (vertical, no reduction across lanes), and
// the products with V (or K, q, dy) are register tiles whose inner loop runs over 16-32
// contiguous channels. The earlier kernels (one query row at a time, a horizontal dot-product
// reduction over D per (i, j), scalar exp loops) ran at about 117 GFLOP/s. Measured on one Zen 5
// core (thread CPU time, GCC 12, T = D = 64, 6 heads, old and new kernel text side by side):
// per 2 batch rows (in L2), forward 0.17-0.18 -> 0.063 ms, backward 0.38-0.40 -> 0.15 ms; per
// 32 batch rows (q, k, v from memory) 3.2-3.4 -> 1.4-1.5 ms and 6.8-7.1 -> 3.2-3.3 ms.
//
// Forward: one task per (batch, query head), OpenMP over B * NH. Per block: s = q k^T /
// sqrt(D), max-subtracted exp per row, y_i = (sum_j p_j v_j) / sum_j p_j, j in order (p_j = 0
// for j > i).
//
// Backward: one task per (batch, kv head), handling its G = NH / NKV query heads in order,
// so dk and dv of a kv head are summed by one task in a fixed order (deterministic, no
// atomics: the rows are added in the order of i, head after head). Per block the
// probabilities are recomputed from q and k (nothing is saved by the forward): p, dp = dy v^T,
// r = rowsum(p dp), ds = p (dp - r) / sqrt(D), dq = ds k, dk += ds^T q, dv += p^T dy (the
// composition of the softmax and matmul VJPs). Probabilities and score gradients are exactly
// 0 past each row's last key, so the tiles need no mask: y, dq, dk and dv sum whole tiles of
// up to 15 keys (or rows) past the causal boundary, whose terms are 0 * x. So an inf or NaN in
// v, k, q or dy may also reach, as NaN, results of rows or keys that do not see it, in the
// same block of 16; the loss is not finite then anyway (the row that does see it is NaN).
// Skipping the masked triangle exactly instead cost 13-15% of the kernels' time.
//
// The element type of q, k, v, dy and the results (f32 or bf16) is the kernels' `auto`; all
// arithmetic is f32. The tiles' unroll pragmas keep their accumulators in registers (GCC 12
// otherwise leaves a 16 x 16 tile in memory once the lambda is inlined into the kernel), as
// does always_inline on the tile helpers (clang 14 otherwise calls them with the tile in
// memory, 6x slower).
#include "codegen/CppEmitterInternal.h"
#include "codegen/KernelCommonAttention.h"  // defines: declareAttention, attentionLayout


namespace tessel::cppgen {
namespace {

/// The block sizes and padded buffer sizes of both kernels, the gather of one head from its
/// [B, T, ...] layout into a zero-padded f32 buffer [TP, DP] (row-major: t, e) and its
/// transpose [DP, TP] (e, t).
constexpr const char* kBuffers = R"cpp(
constexpr int64_t L = 16;                            // query rows per block: one per lane
constexpr int64_t TP = (T + L - 1) / L * L;          // positions, padded
constexpr int64_t DP = (D + 15) / 16 * 16;           // head size, padded
constexpr int64_t DW = DP % 32 == 0 ? 32 : 16;       // channels per output tile
constexpr int64_t KB = 8;                            // keys per gradient tile
auto gatherHead = [&](float* dst, const auto* src, int64_t stride, int64_t b, int64_t col) {
  for (int64_t t = 0; t < T; ++t) {
    const auto* row = src + (b * T + t) * stride + col;
    #pragma omp simd
    for (int64_t e = 0; e < D; ++e) dst[t * DP + e] = static_cast<float>(row[e]);
    for (int64_t e = D; e < DP; ++e) dst[t * DP + e] = 0.0f;
  }
  for (int64_t i = T * DP; i < TP * DP; ++i) dst[i] = 0.0f;
};
#if defined(__clang__) || __GNUC__ >= 12
// Blocks of 16 x 16 through registers: four rounds of interleaving pairs of rows (by 1, 2, 4
// and 8 elements); about 15x faster than element-wise copies (110 ns vs 1.6 us for 64 x 64).
typedef float tessel_f16v __attribute__((vector_size(64)));
auto transposeHead = [&](float* dst, const float* src) {
  for (int64_t t0 = 0; t0 < TP; t0 += 16)
    for (int64_t e0 = 0; e0 < DP; e0 += 16) {
      tessel_f16v r[16], a[16];
      for (int i = 0; i < 16; ++i) std::memcpy(&r[i], src + (t0 + i) * DP + e0, sizeof r[i]);
      for (int i = 0; i < 16; i += 2) {
        a[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
        a[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
      }
      for (int i = 0; i < 16; i += 4)
        for (int k = 0; k < 2; ++k) {
          r[i + 2 * k] = __builtin_shufflevector(a[i + k], a[i + k + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
          r[i + 2 * k + 1] = __builtin_shufflevector(a[i + k], a[i + k + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
        }
      for (int i = 0; i < 16; i += 8)
        for (int k = 0; k < 4; ++k) {
          a[i + k] = __builtin_shufflevector(r[i + k], r[i + k + 4], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
          a[i + k + 4] = __builtin_shufflevector(r[i + k], r[i + k + 4], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
        }
      for (int k = 0; k < 8; ++k) {
        r[k] = __builtin_shufflevector(a[k], a[k + 8], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        r[k + 8] = __builtin_shufflevector(a[k], a[k + 8], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
      }
      for (int i = 0; i < 16; ++i) std::memcpy(dst + (e0 + i) * TP + t0, &r[i], sizeof r[i]);
    }
};
#else
auto transposeHead = [&](float* dst, const float* src) {
  for (int64_t t = 0; t < TP; ++t)
    for (int64_t e = 0; e < DP; ++e) dst[e * TP + t] = src[t * DP + e];
};
#endif
)cpp";

/// The products of a block of L query rows i0 .. i0 + L - 1, whose scores are kept
/// transposed, st[j, l] = score of row i0 + l against key j ([TP, L]). Each product is a
/// register tile acc [K][W] updated by addOuter (acc[k][c] += x[k * xs] v[c]: K broadcasts, W
/// lanes) and written by storeTile (dst[k * ld + c] = acc[k][c] * scale):
/// scoreCols: st[j, l] = scale * sum_e bh[j, e] at[e, i0 + l] for j < nb (e in order);
/// rowsTimes: dst[l, e] = sum_j pt[j, l] m[j, e] over the keys j < i0 + 8 of the row's half
///   block (j in order; pt is 0 past each row's last key);
/// addColumns: dm[j, e] += sum_l pt[j, l] a[i0 + l, e] for j < nb (l in order, onto dm's
///   running sum, so rows are added in the order of i; pt is 0 where a row does not see j).
constexpr const char* kTiles = R"cpp(
auto addOuter = [&](auto& acc, const float* x, int64_t xs, const float* v) __attribute__((always_inline)) {
  constexpr int64_t K = sizeof(acc) / sizeof(acc[0]), W = sizeof(acc[0]) / sizeof(float);
  #pragma GCC unroll 16
  for (int64_t k = 0; k < K; ++k) {
    const float xk = x[k * xs];
    #pragma omp simd
    for (int64_t c = 0; c < W; ++c) acc[k][c] += xk * v[c];
  }
};
auto storeTile = [&](float* dst, int64_t ld, const auto& acc, float scale) __attribute__((always_inline)) {
  constexpr int64_t K = sizeof(acc) / sizeof(acc[0]), W = sizeof(acc[0]) / sizeof(float);
  #pragma GCC unroll 16
  for (int64_t k = 0; k < K; ++k) {
    #pragma omp simd
    for (int64_t c = 0; c < W; ++c) dst[k * ld + c] = acc[k][c] * scale;
  }
};
auto scoreCols = [&](float* st, const float* bh, const float* at, int64_t i0, int64_t nb, float scale) {
  for (int64_t j0 = 0; j0 < nb; j0 += L) {
    float acc[L][L] = {};
    for (int64_t e = 0; e < DP; ++e) addOuter(acc, bh + j0 * DP + e, DP, at + e * TP + i0);
    storeTile(st + j0 * L, L, acc, scale);
  }
};
auto rowsTimes = [&](float* dst, const float* pt, const float* m, int64_t i0) {
  for (int64_t h0 = 0; h0 < L; h0 += 8)
    for (int64_t e0 = 0; e0 < DP; e0 += DW) {
      float acc[8][DW] = {};
      for (int64_t j = 0; j < i0 + h0 + 8; ++j) addOuter(acc, pt + j * L + h0, 1, m + j * DP + e0);
      storeTile(dst + h0 * DP + e0, DP, acc, 1.0f);
    }
};
)cpp";

/// The backward's third product, addColumns (described with kTiles).
constexpr const char* kGradTiles = R"cpp(
auto addColumns = [&](float* dm, const float* pt, const float* a, int64_t i0, int64_t nb) {
  for (int64_t j0 = 0; j0 < nb; j0 += KB)
    for (int64_t e0 = 0; e0 < DP; e0 += DW) {
      float acc[KB][DW];
      #pragma GCC unroll 16
      for (int64_t k = 0; k < KB; ++k) {
        #pragma omp simd
        for (int64_t e = 0; e < DW; ++e) acc[k][e] = dm[(j0 + k) * DP + e0 + e];
      }
      for (int64_t l = 0; l < L; ++l) addOuter(acc, pt + j0 * L + l, L, a + (i0 + l) * DP + e0);
      storeTile(dm + j0 * DP + e0, DP, acc, 1.0f);
    }
};
)cpp";

/// The softmax numerators of a block in place: lane l (row i0 + l, if below T) of st [nb, L]
/// becomes exp(s - max) over its keys j <= i0 + l and exactly 0 elsewhere (other keys of the
/// block, rows past T); sum[l] is the lane's sum. last[l] is the row's last key (-1 past T).
constexpr const char* kSoftmax = R"cpp(
auto expCols = [&](float* st, float* sum, const int64_t* last, int64_t nb) {
  float mx[L];
  #pragma omp simd
  for (int64_t l = 0; l < L; ++l) mx[l] = -INFINITY, sum[l] = 0.0f;
  for (int64_t j = 0; j < nb; ++j) {
    #pragma omp simd
    for (int64_t l = 0; l < L; ++l) mx[l] = j <= last[l] && st[j * L + l] > mx[l] ? st[j * L + l] : mx[l];
  }
  for (int64_t j = 0; j < nb; ++j) {
    #pragma omp simd
    for (int64_t l = 0; l < L; ++l) {
      const float x = tessel_exp(st[j * L + l] - mx[l]);
      st[j * L + l] = j <= last[l] ? x : 0.0f;
      sum[l] += st[j * L + l];
    }
  }
};
)cpp";

constexpr const char* kForward = R"cpp(
$PAR
for (int64_t task = 0; task < B * NH; ++task) {
  const int64_t b = task / NH, h = task % NH, g = h / G;
  std::unique_ptr<float[]> buf(new float[4 * TP * DP + TP * L + L * DP]);
  float* qh = buf.get();     // [TP, DP]
  float* qt = qh + TP * DP;  // [DP, TP]
  float* kh = qt + DP * TP;  // [TP, DP]
  float* vh = kh + TP * DP;  // [TP, DP]
  float* st = vh + TP * DP;  // [TP, L] scores of a block, then exp(s - max)
  float* y = st + TP * L;    // [L, DP] unnormalised outputs
  gatherHead(qh, qp, QS, b, QO + h * D);
  transposeHead(qt, qh);
  gatherHead(kh, kp, KS, b, KO + g * D);
  gatherHead(vh, vp, KS, b, VO + g * D);
  for (int64_t i0 = 0; i0 < T; i0 += L) {
    const int64_t rows = T - i0 < L ? T - i0 : L, nb = i0 + L;
    int64_t last[L];
    float sum[L];
    for (int64_t l = 0; l < L; ++l) last[l] = l < rows ? i0 + l : -1;
    scoreCols(st, kh, qt, i0, nb, SCALE);
    expCols(st, sum, last, nb);
    rowsTimes(y, st, vh, i0);
    for (int64_t l = 0; l < rows; ++l) {
      auto* yrow = out + (b * T + i0 + l) * NH * D + h * D;
      #pragma omp simd
      for (int64_t e = 0; e < D; ++e) yrow[e] = y[l * DP + e] / sum[l];
    }
  }
}
)cpp";

constexpr const char* kBackward = R"cpp(
$PAR
for (int64_t task = 0; task < B * NKV; ++task) {
  const int64_t b = task / NKV, g = task % NKV;
  std::unique_ptr<float[]> buf(new float[8 * TP * DP + 2 * TP * L + L * DP]);
  float* dkh = buf.get();      // [TP, DP] sums over the G query heads, in head order
  float* dvh = dkh + TP * DP;
  float* kh = dvh + TP * DP;   // [TP, DP]
  float* vh = kh + TP * DP;
  float* qh = vh + TP * DP;    // [TP, DP] of query head h
  float* qt = qh + TP * DP;    // [DP, TP]
  float* dyh = qt + DP * TP;
  float* dyt = dyh + TP * DP;
  float* pt = dyt + DP * TP;   // [TP, L] probabilities of a block of rows
  float* dst = pt + TP * L;    // [TP, L] dy . v, then the score gradients
  float* dq = dst + TP * L;    // [L, DP]
  for (int64_t i = 0; i < 2 * TP * DP; ++i) dkh[i] = 0.0f;
  gatherHead(kh, kp, KS, b, KO + g * D);
  gatherHead(vh, vp, KS, b, VO + g * D);
  for (int64_t h = g * G; h < (g + 1) * G; ++h) {
    gatherHead(qh, qp, QS, b, QO + h * D);
    transposeHead(qt, qh);
    gatherHead(dyh, dy, NH * D, b, h * D);
    transposeHead(dyt, dyh);
    for (int64_t i0 = 0; i0 < T; i0 += L) {
      const int64_t rows = T - i0 < L ? T - i0 : L, nb = i0 + L;
      int64_t last[L];
      float sum[L], rs[L];
      for (int64_t l = 0; l < L; ++l) last[l] = l < rows ? i0 + l : -1;
      scoreCols(pt, kh, qt, i0, nb, SCALE);
      scoreCols(dst, vh, dyt, i0, nb, 1.0f);
      expCols(pt, sum, last, nb);  // rows past T add nothing to dk, dv: p = ds = 0
      #pragma omp simd
      for (int64_t l = 0; l < L; ++l) rs[l] = 0.0f;
      for (int64_t j = 0; j < nb; ++j) {
        #pragma omp simd
        for (int64_t l = 0; l < L; ++l) {
          pt[j * L + l] = j <= last[l] ? pt[j * L + l] / sum[l] : 0.0f;
          rs[l] += pt[j * L + l] * dst[j * L + l];
        }
      }
      for (int64_t j = 0; j < nb; ++j) {
        #pragma omp simd
        for (int64_t l = 0; l < L; ++l) {
          const float d = pt[j * L + l] * (dst[j * L + l] - rs[l]) * SCALE;
          dst[j * L + l] = j <= last[l] ? d : 0.0f;
        }
      }
      rowsTimes(dq, dst, kh, i0);
      for (int64_t l = 0; l < rows; ++l) {
        auto* dqrow = dqp + (b * T + i0 + l) * QS + QO + h * D;
        #pragma omp simd
        for (int64_t e = 0; e < D; ++e) dqrow[e] = dq[l * DP + e];
      }
      addColumns(dkh, dst, qh, i0, nb);
      addColumns(dvh, pt, dyh, i0, nb);
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    auto* dkrow = dkp + (b * T + t) * KS + KO + g * D;
    auto* dvrow = dvp + (b * T + t) * KS + VO + g * D;
    #pragma omp simd
    for (int64_t e = 0; e < D; ++e) dkrow[e] = dkh[t * DP + e];
    #pragma omp simd
    for (int64_t e = 0; e < D; ++e) dvrow[e] = dvh[t * DP + e];
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
  w.code(kBuffers);
  w.code(kTiles);
  w.code(kSoftmax);
  w.code(kForward, {{"PAR", attentionPar(l, l.heads)}});
}

void emitAttentionGrad(KernelWriter& w) {
  kernelcommon::AttentionLayout l = kernelcommon::attentionLayout(w.op());
  w.code(kernelcommon::declareAttention(w));
  w.code(kBuffers);
  w.code(kTiles);
  w.code(kGradTiles);
  w.code(kSoftmax);
  w.code(kBackward, {{"PAR", attentionPar(l, l.kvHeads)}});
}

}  // namespace tessel::cppgen
