// C++ kernels of the vocab-parallel ops (TesselVocabParallelOps.td): one shard's embedding
// gather and scatter, and the row statistics of the vocab-parallel cross-entropy. Arguments
// and constants come from kernelcommon::declareVocab (shared with the CUDA twins); row
// reductions use the same float forms as cross_entropy's kernels (CppEmitterRows.cpp), so a
// single shard's statistics are those cross_entropy computes.
#include "codegen/KernelCommonVocab.h"

namespace tessel::cppgen {

void emitEmbeddingShard(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.code(R"cpp(const int64_t first = offset[0];
$PAR
for (int64_t n = 0; n < N; ++n) {
  const int64_t id = indices[n], row = id - first;
  auto* o = out + n * C;
  if (id < 0 || id >= VOCAB) {
    for (int64_t i = 0; i < C; ++i) o[i] = NAN;
  } else if (row >= 0 && row < V) {
    std::memcpy(o, table + row * C, C * sizeof(*o));
  } else {  // another shard's row: this shard's addend is zero
    for (int64_t i = 0; i < C; ++i) o[i] = 0.0f;
  }
}
)cpp",
         {{"PAR", parallelFor(s.rows * s.len, s.rows)}});
}

void emitEmbeddingShardGrad(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  // Indices of other shards fall outside [0, V) and are skipped, as out-of-range ones are.
  scatterRows(w, s.rows, s.shardRows, s.len, "indices[n] - static_cast<int64_t>(offset[0])");
}

void emitRowMax(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.code(R"cpp($PAR
for (int64_t r = 0; r < N; ++r) {
  const auto* x = inp + r * V;
  float mx = -INFINITY;
  #pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < V; ++i) mx = x[i] > mx ? x[i] : mx;
  out[r] = mx;
}
)cpp",
         {{"PAR", parallelFor(s.rows * s.len, s.rows)}});
}

void emitSumExp(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.code(R"cpp($PAR
for (int64_t r = 0; r < N; ++r) {
  const auto* x = inp + r * V;
  const float m = shift[r];
  float sum = 0.0f;
  #pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < V; ++i) sum += tessel_exp(x[i] - m);
  out[r] = sum;
}
)cpp",
         {{"PAR", parallelFor(s.rows * s.len * 8, s.rows)}});
}

void emitSumExpGrad(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.code(R"cpp($PAR
for (int64_t r = 0; r < N; ++r) {
  const auto* x = inp + r * V;
  auto* dx = dinp + r * V;
  const float m = shift[r], g = dout[r];
  #pragma omp simd
  for (int64_t i = 0; i < V; ++i) dx[i] = g * tessel_exp(x[i] - m);
}
)cpp",
         {{"PAR", parallelFor(s.rows * s.len * 8, s.rows)}});
}

void emitTargetLogit(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.code(R"cpp(const int64_t first = offset[0];
$PAR
for (int64_t n = 0; n < N; ++n) {
  const int64_t t = targets[n], j = t - first;
  out[n] = t < 0 || t >= VOCAB      ? NAN
           : j >= 0 && j < V        ? static_cast<float>(logits[n * V + j])
                                    : 0.0f;  // another shard holds the target
}
)cpp",
         {{"PAR", parallelFor(s.rows * 4, s.rows)}});
}

void emitMaskVocabPadding(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  // Columns [valid, V) of every row are padding; valid may be 0 (a shard past the end).
  w.code(R"cpp(const int64_t left = VOCAB - static_cast<int64_t>(offset[0]);
const int64_t valid = left < 0 ? 0 : left > V ? V : left;
$PAR
for (int64_t r = 0; r < N; ++r) {
  const auto* x = inp + r * V;
  auto* o = out + r * V;
  for (int64_t i = 0; i < valid; ++i) o[i] = x[i];
  for (int64_t i = valid; i < V; ++i) o[i] = $FILL;
}
)cpp",
         {{"PAR", parallelFor(s.rows * s.len, s.rows)},
          {"FILL", floatLit(mlir::cast<MaskVocabPaddingOp>(w.op()).getFill().convertToDouble())}});
}

void emitTargetLogitGrad(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.code(R"cpp(const int64_t first = offset[0];
$PAR
for (int64_t n = 0; n < N; ++n) {
  auto* d = dlogits + n * V;
  const int64_t j = targets[n] - first;
  #pragma omp simd
  for (int64_t i = 0; i < V; ++i) d[i] = 0.0f;
  if (j >= 0 && j < V) d[j] = dout[n];
}
)cpp",
         {{"PAR", parallelFor(s.rows * s.len, s.rows)}});
}

void emitCrossEntropyFromStats(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.code(R"cpp(std::unique_ptr<float[]> rowLoss(new float[N]);
$PAR
for (int64_t n = 0; n < N; ++n) rowLoss[n] = (row_max[n] - target_logit[n]) + std::log(sum_exp[n]);
double total = 0.0;  // a fixed order: the same bits for any thread count
for (int64_t n = 0; n < N; ++n) total += rowLoss[n];
loss[0] = static_cast<float>(total / N);
)cpp",
         {{"PAR", parallelFor(s.rows * 16, s.rows)}});
}

void emitCrossEntropyFromStatsGrad(KernelWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.code(R"cpp(const float factor = dloss[0] / static_cast<float>(N);
$PAR
for (int64_t n = 0; n < N; ++n) {
  dsum_exp[n] = factor / sum_exp[n];
  dtarget_logit[n] = -factor;
}
)cpp",
         {{"PAR", parallelFor(s.rows * 4, s.rows)}});
}

}  // namespace tessel::cppgen
