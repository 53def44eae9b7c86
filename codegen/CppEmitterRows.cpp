// C++ kernels of the row-wise forward ops: layer_norm, softmax, cross_entropy, and the
// embedding gather. One thread owns a row; the inner loops run over the contiguous last
// dimension under `#pragma omp simd`, with float accumulators (per-lane partial sums, so the
// rounding error grows like C / lanes, not C) and the numerically careful forms: two-pass
// mean and variance, max-subtracted exponentials, and log-sum-exp.
#include "codegen/CppEmitterInternal.h"

#include <fmt/format.h>

namespace tessel::cppgen {

namespace {

/// Letters of a causal softmax input [..., T, T]: [B, NH, T, T] for rank 4.
Letters causalLetters(size_t rank) {
  if (rank == 4) return {"B", "NH", "T", "T"};
  Letters out = leadingLetters(rank - 2);
  out.push_back("T");
  out.push_back("T");
  return out;
}

}  // namespace

void emitLayerNorm(KernelWriter& w) {
  auto op = mlir::cast<LayerNormOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  Letters letters = rowLetters(shape.size());
  int64_t c = shape.back(), rows = numel(shape) / std::max<int64_t>(c, 1);
  kernelcommon::declareLayerNorm(w, op, letters, rows, c);
  w.code(R"cpp($PAR
for (int64_t r = 0; r < N; ++r) {
  const auto* x = inp + r * C;
  auto* y = out + r * C;
  // Statistics of x - x[0] (exact for nearby values), so that a large common offset costs
  // no precision; m is the mean minus x[0]. Two passes: no E[x^2] - mean^2 cancellation.
  const float x0 = x[0];
  float sum = 0.0f;
  #pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < C; ++i) sum += x[i] - x0;
  const float m = sum / C;
  float ss = 0.0f;
  #pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < C; ++i) {
    const float d = (x[i] - x0) - m;
    ss += d * d;
  }
  const float rstd = 1.0f / std::sqrt(ss / C + EPS);
  #pragma omp simd
  for (int64_t i = 0; i < C; ++i) y[i] = ((x[i] - x0) - m) * rstd * gamma[i] + beta[i];
}
)cpp",
         {{"PAR", parallelFor(rows * c * 4, rows)}});
}

void emitSoftmax(KernelWriter& w) {
  auto op = mlir::cast<SoftmaxOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  bool causal = op.getCausal();
  Letters letters = causal ? causalLetters(shape.size()) : rowLetters(shape.size());
  int64_t len = shape.back(), rows = numel(shape) / std::max<int64_t>(len, 1);
  if (causal) {
    w.describe("out = softmax over the last dimension T of entries j <= i (query i = row % T);");
    w.describe("entries j > i are exactly 0. Max-subtracted.");
  } else {
    w.describe("out = softmax over the last dimension, max-subtracted");
  }
  w.output("out", op.getResult(), letters);
  w.input("inp", op.getInput(), letters);
  w.constant("N", rows, "rows");
  w.constant("L", len, causal ? "T: keys per query" : "the softmax length");
  w.code(R"cpp($PAR
for (int64_t r = 0; r < N; ++r) {
  const auto* x = inp + r * L;
  auto* y = out + r * L;
  const int64_t valid = $VALID;
  float mx = -INFINITY;
  #pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < valid; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
  #pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < valid; ++i) sum += tessel_exp(x[i] - mx);
  // exp again rather than reading y back: a bf16 y would round twice.
  #pragma omp simd
  for (int64_t i = 0; i < valid; ++i) y[i] = tessel_exp(x[i] - mx) / sum;
  $MASK
}
)cpp",
         {{"PAR", parallelFor(rows * len * 8, rows)},
          {"VALID", causal ? "r % L + 1" : "L"},
          {"MASK", causal ? "for (int64_t i = valid; i < L; ++i) y[i] = 0.0f;" : ""}});
}

void emitCrossEntropy(KernelWriter& w) {
  auto op = mlir::cast<CrossEntropyOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getLogits());
  Letters letters = rowLetters(shape.size(), "V");
  int64_t v = shape.back(), tokens = numel(shapeOf(op.getTargets()));
  w.describe("loss = mean over tokens n of logsumexp(logits[n, :]) - logits[n, targets[n]];");
  w.describe("per-token losses in f32 (max-subtracted), their mean in double, in token order.");
  w.describe("A target outside [0, V) makes the loss NaN.");
  kernelcommon::declareClassifier(w, op.getResult(), {}, op.getLogits(), op.getTargets(), {},
                                  letters, tokens, v);
  w.code(R"cpp(std::unique_ptr<float[]> rowLoss(new float[N > 0 ? N : 1]);
$PAR
for (int64_t n = 0; n < N; ++n) {
  const auto* x = logits + n * V;
  const int32_t t = targets[n];
  float mx = -INFINITY;
  #pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < V; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
  #pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < V; ++i) sum += tessel_exp(x[i] - mx);
  rowLoss[n] = t >= 0 && t < V ? (mx - x[t]) + std::log(sum) : NAN;
}
double total = 0.0;  // a fixed order: the same bits for any thread count
for (int64_t n = 0; n < N; ++n) total += rowLoss[n];
loss[0] = static_cast<float>(total / N);
)cpp",
         {{"PAR", parallelFor(tokens * v * 8, tokens)}});
}

void emitEmbedding(KernelWriter& w) {
  auto op = mlir::cast<EmbeddingOp>(w.op());
  std::vector<int64_t> table = shapeOf(op.getTable());
  Letters idx = leadingLetters(shapeOf(op.getIndices()).size());
  Letters outLetters = idx;
  outLetters.push_back("C");
  int64_t n = numel(shapeOf(op.getIndices()));
  w.describe("out[n, :] = table[indices[n], :]; an index outside [0, V) gives a NaN row");
  w.output("out", op.getResult(), outLetters);
  w.input("table", op.getTable(), {"V", "C"});
  w.input("indices", op.getIndices(), idx);
  w.constant("N", n, "indices");
  w.constant("V", table[0]);
  w.constant("C", table[1]);
  w.code(R"cpp($PAR
for (int64_t n = 0; n < N; ++n) {
  const int32_t v = indices[n];
  auto* o = out + n * C;
  if (v >= 0 && v < V) {
    std::memcpy(o, table + v * C, C * sizeof(*o));
  } else {
    for (int64_t i = 0; i < C; ++i) o[i] = NAN;
  }
}
)cpp",
         {{"PAR", parallelFor(n * table[1], n)}});
}

}  // namespace tessel::cppgen
