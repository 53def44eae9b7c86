// C++ kernels of the backward ops with a row structure: softmax_grad, layer_norm_grad,
// embedding_grad, cross_entropy_grad, fused_classifier (the loss and cross_entropy_grad in
// one pass; gelu_grad and relu_grad are elementwise). Sums across
// rows (dgamma, dbeta, the embedding scatter-add) are deterministic: every output element is
// accumulated by one thread in a fixed order, whatever the number of threads.
#include "codegen/CppEmitterInternal.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessel::cppgen {

void emitSoftmaxGrad(KernelWriter& w) {
  auto op = mlir::cast<SoftmaxGradOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getOutput());
  Letters letters = rowLetters(shape.size());
  int64_t len = shape.back(), rows = numel(shape) / std::max<int64_t>(len, 1);
  w.describe("dinp = out * (dout - sum_j(dout * out)) over the last dimension, with out the");
  w.describe("forward softmax (masked entries have out = 0 and get 0)");
  w.output("dinp", op.getResult(), letters);
  w.input("out", op.getOutput(), letters);
  w.input("dout", op.getGrad(), letters);
  w.constant("N", rows, "rows");
  w.constant("C", len);
  w.code(R"cpp($PAR
for (int64_t r = 0; r < N; ++r) {
  const auto* y = out + r * C;
  const auto* dy = dout + r * C;
  auto* dx = dinp + r * C;
  float dot = 0.0f;
  #pragma omp simd reduction(+ : dot)
  for (int64_t i = 0; i < C; ++i) dot += dy[i] * y[i];
  #pragma omp simd
  for (int64_t i = 0; i < C; ++i) dx[i] = y[i] * (dy[i] - dot);
}
)cpp",
         {{"PAR", parallelFor(rows * len * 2, rows)}});
}

void emitLayerNormGrad(KernelWriter& w) {
  auto op = mlir::cast<LayerNormGradOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  Letters letters = rowLetters(shape.size());
  int64_t c = shape.back(), rows = numel(shape) / std::max<int64_t>(c, 1);
  // Rows go in fixed chunks of 32; each chunk sums its rows' dgamma and dbeta contributions
  // in f32, and the chunk sums are added in chunk order in double. The chunking depends only
  // on the shape, so the result does not depend on the thread count, and no f32 sum runs
  // over more than 32 terms. The partial sums take N C / 16 floats; adding them up costs
  // 2 C N / 32 additions, next to ~40 C N flops for the rows.
  int64_t chunkRows = std::min<int64_t>(32, std::max<int64_t>(rows, 1));
  int64_t chunks = (rows + chunkRows - 1) / chunkRows;
  kernelcommon::declareLayerNormGrad(w, op, letters, rows, c);
  w.constant("CHUNK", chunkRows, "rows per chunk of the dgamma/dbeta sums");
  w.constant("CHUNKS", chunks);
  w.constant("CB", 64, "channels per block when the chunk sums are combined");
  w.constantF("EPS", op.getEpsilon().convertToDouble());
  w.code(R"cpp(// partial[ch] holds chunk ch's sums: dgamma in [0, C), dbeta in [C, 2C).
std::unique_ptr<float[]> partial(new float[CHUNKS * 2 * C + 1]);
$PAR
for (int64_t ch = 0; ch < CHUNKS; ++ch) {
  float* pg = partial.get() + ch * 2 * C;
  float* pb = pg + C;
  for (int64_t i = 0; i < C; ++i) pg[i] = pb[i] = 0.0f;
  const int64_t rEnd = (ch + 1) * CHUNK < N ? (ch + 1) * CHUNK : N;
  for (int64_t r = ch * CHUNK; r < rEnd; ++r) {
    const auto* x = inp + r * C;
    const auto* dy = dout + r * C;
    auto* dx = dinp + r * C;
    const float x0 = x[0];  // mean and variance as layer_norm computes them (shifted)
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
    float sdx = 0.0f, sdxx = 0.0f;
    #pragma omp simd reduction(+ : sdx, sdxx)
    for (int64_t i = 0; i < C; ++i) {
      const float xhat = ((x[i] - x0) - m) * rstd;
      const float g = dy[i] * gamma[i];
      sdx += g;
      sdxx += g * xhat;
      pg[i] += dy[i] * xhat;
      pb[i] += dy[i];
    }
    const float mdx = sdx / C, mdxx = sdxx / C;
    #pragma omp simd
    for (int64_t i = 0; i < C; ++i) {
      const float xhat = ((x[i] - x0) - m) * rstd;
      dx[i] = rstd * (dy[i] * gamma[i] - mdx - xhat * mdxx);
    }
  }
}
$PARC
for (int64_t c0 = 0; c0 < C; c0 += CB) {
  const int64_t n = c0 + CB < C ? CB : C - c0;
  double g[CB] = {}, b[CB] = {};
  for (int64_t ch = 0; ch < CHUNKS; ++ch) {
    const float* pg = partial.get() + ch * 2 * C + c0;
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      g[i] += pg[i];
      b[i] += pg[C + i];
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    dgamma[c0 + i] = static_cast<float>(g[i]);
    dbeta[c0 + i] = static_cast<float>(b[i]);
  }
}
)cpp",
         {{"PAR", parallelFor(rows * c * 8, chunks)},
          {"PARC", parallelFor(chunks * c * 2, (c + 63) / 64)}});
}

void emitEmbeddingGrad(KernelWriter& w) {
  auto op = mlir::cast<EmbeddingGradOp>(w.op());
  std::vector<int64_t> table = shapeOf(op.getResult());
  Letters idx = leadingLetters(shapeOf(op.getIndices()).size());
  Letters gradLetters = idx;
  gradLetters.push_back("C");
  int64_t n = numel(shapeOf(op.getIndices()));
  w.describe("dtable[v, :] = sum of dout[n, :] over n with indices[n] == v, in index order;");
  w.describe("deterministic: each thread owns a range of vocabulary rows and scans every index");
  w.describe("in order (no atomics). Indices outside [0, V) are skipped.");
  w.output("dtable", op.getResult(), {"V", "C"});
  w.input("indices", op.getIndices(), idx);
  w.input("dout", op.getGrad(), gradLetters);
  w.constant("N", n, "indices");
  w.constant("V", table[0]);
  w.constant("C", table[1]);
  scatterRows(w, n, table[0], table[1], "indices[n]");
}

void scatterRows(KernelWriter& w, int64_t n, int64_t v, int64_t c, std::string_view index) {
  const bool f32 = elementType(w.op()->getResult(0)) == "float";
  std::string par = (n + v) * c >= (int64_t{1} << 15) && v > 1 ? "#pragma omp parallel" : "";
  w.code(R"cpp($PAR
{
  const int64_t threads = tessel_thread_count(), t = tessel_thread_index();
  const int64_t v0 = V * t / threads, v1 = V * (t + 1) / threads;
$ACC
  std::memset(acc, 0, (v1 - v0) * C * sizeof(float));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t v = $INDEX;
    if (v < v0 || v >= v1) continue;
    float* o = acc + (v - v0) * C;
    const auto* g = dout + n * C;
    #pragma omp simd
    for (int64_t i = 0; i < C; ++i) o[i] += g[i];
  }
$STORE}
)cpp",
         {{"PAR", par},
          {"INDEX", std::string(index)},
          // Sums run in f32: in place for an f32 table, else in a per-thread f32 block that
          // is rounded once at the end.
          {"ACC", f32 ? "  float* acc = dtable + v0 * C;"
                      : "  std::unique_ptr<float[]> accRows(new float[(v1 - v0) * C + 1]);\n"
                        "  float* acc = accRows.get();"},
          {"STORE", f32 ? "" : "  for (int64_t i = 0; i < (v1 - v0) * C; ++i) dtable[v0 * C + i] = acc[i];\n"}});
}

void emitCrossEntropyGrad(KernelWriter& w) {
  auto op = mlir::cast<CrossEntropyGradOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getLogits());
  Letters letters = rowLetters(shape.size(), "V");
  int64_t v = shape.back(), tokens = numel(shapeOf(op.getTargets()));
  w.describe("dlogits = dloss * (softmax(logits) - onehot(targets)) / N, N = tokens;");
  w.describe("max-subtracted; a target outside [0, V) gives a NaN row");
  kernelcommon::declareClassifier(w, {}, op.getResult(), op.getLogits(), op.getTargets(),
                                  op.getDloss(), letters, tokens, v);
  w.code(R"cpp(const float factor = dloss[0] / static_cast<float>(N);
$PAR
for (int64_t n = 0; n < N; ++n) {
  const auto* x = logits + n * V;
  auto* dx = dlogits + n * V;
  const int32_t t = targets[n];
  if (t < 0 || t >= V) {
    for (int64_t i = 0; i < V; ++i) dx[i] = NAN;
    continue;
  }
  float mx = -INFINITY;
  #pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < V; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
  #pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < V; ++i) sum += tessel_exp(x[i] - mx);
  // exp again rather than storing it in dx first: a bf16 dx would round twice.
  #pragma omp simd
  for (int64_t i = 0; i < V; ++i) dx[i] = factor * (tessel_exp(x[i] - mx) / sum);
  dx[t] = factor * (tessel_exp(x[t] - mx) / sum - 1.0f);
}
)cpp",
         {{"PAR", parallelFor(tokens * v * 8, tokens)}});
}

void emitFusedClassifier(KernelWriter& w) {
  auto op = mlir::cast<FusedClassifierOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getLogits());
  Letters letters = rowLetters(shape.size(), "V");
  int64_t v = shape.back(), tokens = numel(shapeOf(op.getTargets()));
  // The operations of emitCrossEntropy and emitCrossEntropyGrad, in their order, on one
  // pass per row: the row's max and sum serve both the loss and the gradient, and each
  // probability is recomputed where dlogits is written rather than stored.
  w.describe("loss = mean over tokens n of logsumexp(logits[n, :]) - logits[n, targets[n]];");
  w.describe("dlogits = dloss * (softmax(logits) - onehot(targets)) / N, N = tokens.");
  w.describe("Per row: max, sum of exp(x - max) once, then dlogits; per-token losses in f32,");
  w.describe("their mean in double, in token order. A target outside [0, V) makes the loss NaN");
  w.describe("and its row of dlogits NaN.");
  kernelcommon::declareClassifier(w, op.getLoss(), op.getDlogits(), op.getLogits(),
                                  op.getTargets(), op.getDloss(), letters, tokens, v);
  w.code(R"cpp(const float factor = dloss[0] / static_cast<float>(N);
std::unique_ptr<float[]> rowLoss(new float[N > 0 ? N : 1]);
$PAR
for (int64_t n = 0; n < N; ++n) {
  const auto* x = logits + n * V;
  auto* dx = dlogits + n * V;
  const int32_t t = targets[n];
  if (t < 0 || t >= V) {
    rowLoss[n] = NAN;
    for (int64_t i = 0; i < V; ++i) dx[i] = NAN;
    continue;
  }
  float mx = -INFINITY;
  #pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < V; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
  #pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < V; ++i) sum += tessel_exp(x[i] - mx);
  rowLoss[n] = (mx - x[t]) + std::log(sum);
  // exp again rather than storing probabilities: a bf16 dx rounds once.
  #pragma omp simd
  for (int64_t i = 0; i < V; ++i) dx[i] = factor * (tessel_exp(x[i] - mx) / sum);
  dx[t] = factor * (tessel_exp(x[t] - mx) / sum - 1.0f);
}
double total = 0.0;  // a fixed order: the same bits for any thread count
for (int64_t n = 0; n < N; ++n) total += rowLoss[n];
loss[0] = static_cast<float>(total / N);
)cpp",
         {{"PAR", parallelFor(tokens * v * 8, tokens)}});
}

}  // namespace tessel::cppgen
