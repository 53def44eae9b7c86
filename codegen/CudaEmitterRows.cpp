// CUDA kernels of the row-wise ops: layer_norm, softmax, softmax_grad, cross_entropy_grad
// (one block per row, grid-stride over rows), cross_entropy (one block, one warp per row,
// the mean in double), fused_classifier (the loss and cross_entropy_grad: one block per row,
// the mean in double over chunks of rows) and layer_norm_grad (one block per chunk of rows, dgamma/dbeta by a
// fixed two-level sum). Threads stride over a row (coalesced), re-reading it from cache in
// each pass rather than holding it in registers, so no row length makes them spill. Row
// sums are block reductions (blockReduce: warp shuffles, then one partial per warp in shared
// memory), so they differ from the C++ kernels' sums only in order. The formulas are the
// C++ kernels' (CppEmitterRows.cpp, CppEmitterGrad.cpp).
#include "codegen/CudaEmitterInternal.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessel::cudagen {

namespace {

/// Letters of a causal softmax input [..., T, T]: [B, NH, T, T] for rank 4.
Letters causalLetters(size_t rank) {
  if (rank == 4) return {"B", "NH", "T", "T"};
  Letters out = cppgen::leadingLetters(rank - 2);
  out.push_back("T");
  out.push_back("T");
  return out;
}

}  // namespace

void rowLaunch(CudaWriter& w, int64_t rows, int64_t len) {
  unsigned threads = rowThreads(len);
  unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>(rows, 1, kResidentThreads / threads));
  w.launch(blocks, threads, "one block per row (grid-stride over rows)");
  w.kind(CudaKernelKind::Row);
  w.useBlockReductions(true);
}

int64_t chunkedRowLaunch(CudaWriter& w, int64_t rows, int64_t c, const std::string& sums) {
  int64_t chunkRows = std::min<int64_t>(32, std::max<int64_t>(rows, 1));
  int64_t chunks = (rows + chunkRows - 1) / chunkRows;
  unsigned threads = static_cast<unsigned>(std::clamp<int64_t>((c + 31) / 32 * 32, 64, 256));
  unsigned blocks =
      static_cast<unsigned>(std::clamp<int64_t>(chunks, 1, kResidentThreads / threads));
  w.constant("CHUNK", chunkRows, "rows per chunk of the " + sums + " sums");
  w.constant("CHUNKS", chunks);
  w.launch(blocks, threads, "one block per chunk of rows (grid-stride over chunks)");
  w.kind(CudaKernelKind::Row);
  w.useBlockReductions(false);
  return chunks;
}

void emitLayerNorm(CudaWriter& w) {
  auto op = mlir::cast<LayerNormOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  Letters letters = rowLetters(shape.size());
  int64_t c = shape.back(), rows = numel(shape) / std::max<int64_t>(c, 1);
  kernelcommon::declareLayerNorm(w, op, letters, rows, c);
  rowLaunch(w, rows, c);
  w.code(
      R"cuda(for (idx_t r = blockIdx.x; r < N; r += gridDim.x) {
  const auto* x = inp + r * C;
  auto* y = out + r * C;
  // Statistics of x - x[0]; m is the mean minus x[0]. Two passes: no E[x^2] - mean^2.
  const float x0 = x[0];
  float sum = 0.0f;
  for (idx_t i = threadIdx.x; i < C; i += THREADS) sum += x[i] - x0;
$SUM  const float m = sum / C;
  float ss = 0.0f;
  for (idx_t i = threadIdx.x; i < C; i += THREADS) {
    const float d = (x[i] - x0) - m;
    ss += d * d;
  }
$SS  const float rstd = 1.0f / sqrtf(ss / C + EPS);
  for (idx_t i = threadIdx.x; i < C; i += THREADS) y[i] = ((x[i] - x0) - m) * rstd * gamma[i] + beta[i];
}
)cuda",
      {{"SUM", indent(blockReduce("sum", "sum"), 2)}, {"SS", indent(blockReduce("ss", "sum"), 2)}});
}

void emitSoftmax(CudaWriter& w) {
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
  rowLaunch(w, rows, len);
  w.code(R"cuda(for (idx_t r = blockIdx.x; r < N; r += gridDim.x) {
  const auto* x = inp + r * L;
  auto* y = out + r * L;
  const idx_t valid = $VALID;
  float mx = -INFINITY;
  for (idx_t i = threadIdx.x; i < valid; i += THREADS) mx = x[i] > mx ? x[i] : mx;
$MAX  float sum = 0.0f;
  for (idx_t i = threadIdx.x; i < valid; i += THREADS) sum += tessel_exp(x[i] - mx);
$SUM  // Each thread rescales the entries it wrote itself: no barrier needed.
  for (idx_t i = threadIdx.x; i < L; i += THREADS) y[i] = i < valid ? tessel_exp(x[i] - mx) / sum : 0.0f;  // exp again: a bf16 y rounds once
}
)cuda",
         {{"VALID", causal ? "r % L + 1" : "L"},
          {"MAX", indent(blockReduce("mx", "max"), 2)},
          {"SUM", indent(blockReduce("sum", "sum"), 2)}});
}

void emitSoftmaxGrad(CudaWriter& w) {
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
  rowLaunch(w, rows, len);
  w.code(R"cuda(for (idx_t r = blockIdx.x; r < N; r += gridDim.x) {
  const auto* y = out + r * C;
  const auto* dy = dout + r * C;
  auto* dx = dinp + r * C;
  float dot = 0.0f;
  for (idx_t i = threadIdx.x; i < C; i += THREADS) dot += dy[i] * y[i];
$DOT  for (idx_t i = threadIdx.x; i < C; i += THREADS) dx[i] = y[i] * (dy[i] - dot);
}
)cuda",
         {{"DOT", indent(blockReduce("dot", "sum"), 2)}});
}

void emitCrossEntropyGrad(CudaWriter& w) {
  auto op = mlir::cast<CrossEntropyGradOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getLogits());
  Letters letters = rowLetters(shape.size(), "V");
  int64_t v = shape.back(), tokens = numel(shapeOf(op.getTargets()));
  w.describe("dlogits = dloss * (softmax(logits) - onehot(targets)) / N, N = tokens;");
  w.describe("max-subtracted; a target outside [0, V) gives a NaN row");
  kernelcommon::declareClassifier(w, {}, op.getResult(), op.getLogits(), op.getTargets(),
                                  op.getDloss(), letters, tokens, v);
  rowLaunch(w, tokens, v);
  w.code(R"cuda(const float factor = dloss[0] / static_cast<float>(N);
for (idx_t n = blockIdx.x; n < N; n += gridDim.x) {
  const auto* x = logits + n * V;
  auto* dx = dlogits + n * V;
  const int32_t t = targets[n];
  if (t < 0 || t >= V) {  // the same for the whole block: no barrier is skipped by some only
    for (idx_t i = threadIdx.x; i < V; i += THREADS) dx[i] = NAN;
    continue;
  }
  float mx = -INFINITY;
  for (idx_t i = threadIdx.x; i < V; i += THREADS) mx = x[i] > mx ? x[i] : mx;
$MAX  float sum = 0.0f;
  for (idx_t i = threadIdx.x; i < V; i += THREADS) sum += tessel_exp(x[i] - mx);
$SUM  for (idx_t i = threadIdx.x; i < V; i += THREADS)
    dx[i] = i == t ? factor * (tessel_exp(x[i] - mx) / sum - 1.0f)  // exp again: a bf16 dx
                   : factor * (tessel_exp(x[i] - mx) / sum);       // rounds once
}
)cuda",
         {{"MAX", indent(blockReduce("mx", "max"), 2)},
          {"SUM", indent(blockReduce("sum", "sum"), 2)}});
}

/// The loss mean of cross_entropy and fused_classifier, deterministic: with one chunk, thread
/// 0 writes total / N; with several, each block stores its chunk's double sum (`total`) and
/// the last block to finish adds the chunk sums in chunk order (lastBlockCombine).
static std::string lossMeanStore(int64_t chunks) {
  return chunks == 1 ? "  if (threadIdx.x == 0) loss[0] = static_cast<float>(total / N);\n"
                     : std::string("  if (threadIdx.x == 0) chunkSums[ch] = total;\n");
}

static std::string lossMeanCombine(CudaWriter& w, int64_t chunks) {
  return chunks == 1 ? "" : lastBlockCombine(w, "double", chunks, R"cuda(if (threadIdx.x == 0) {
  double total = 0.0;
  #pragma unroll 4  // a trip count that grows with the shapes: bounded registers
  for (idx_t ch = 0; ch < CHUNKS; ++ch) total += partial[ch];
  loss[0] = static_cast<float>(total / N);
}
)cuda");
}

void emitCrossEntropy(CudaWriter& w) {
  auto op = mlir::cast<CrossEntropyOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getLogits());
  Letters letters = rowLetters(shape.size(), "V");
  int64_t v = shape.back(), tokens = numel(shapeOf(op.getTargets()));
  // Tokens go in chunks of NWARPS, one per warp of a block; a chunk's losses are summed by
  // a block reduction in double, and the chunk sums in chunk order (lastBlockCombine).
  unsigned warps = static_cast<unsigned>(std::clamp<int64_t>(tokens, 2, 8));
  int64_t chunks = std::max<int64_t>((tokens + warps - 1) / warps, 1);
  unsigned blocks =
      static_cast<unsigned>(std::clamp<int64_t>(chunks, 1, kResidentThreads / (32 * warps)));
  w.describe("loss = mean over tokens n of logsumexp(logits[n, :]) - logits[n, targets[n]];");
  w.describe("per-token losses in f32 (max-subtracted, one warp per token), their mean in double");
  w.describe("(per chunk of NWARPS tokens, then the chunks in order). A target outside [0, V)");
  w.describe("makes the loss NaN.");
  kernelcommon::declareClassifier(w, op.getResult(), {}, op.getLogits(), op.getTargets(), {},
                                  letters, tokens, v);
  w.constant("CHUNKS", chunks, "chunks of NWARPS tokens");
  w.launch(blocks, 32 * warps, "one warp per token, one block per chunk of tokens (grid-stride)");
  w.kind(CudaKernelKind::Row);
  w.useBlockReductions(false, true);
  w.code(
      R"cuda(for (idx_t ch = blockIdx.x; ch < CHUNKS; ch += gridDim.x) {
  const idx_t n = ch * NWARPS + warp;
  float rowLoss = 0.0f;
  if (n < N) {  // the same for a whole warp: its shuffles stay convergent
    const auto* x = logits + n * V;
    const int32_t t = targets[n];
    float mx = -INFINITY;
    for (idx_t i = lane; i < V; i += 32) mx = x[i] > mx ? x[i] : mx;
    mx = tessel_warp_max(mx);
    float sum = 0.0f;
    for (idx_t i = lane; i < V; i += 32) sum += tessel_exp(x[i] - mx);
    sum = tessel_warp_sum(sum);
    rowLoss = t >= 0 && t < V ? (mx - x[t]) + logf(sum) : NAN;
  }
  double total = lane == 0 ? static_cast<double>(rowLoss) : 0.0;  // each token once
$TOTAL$STORE}
$COMBINE)cuda",
      {{"TOTAL", indent(blockReduce("total", "dsum"), 2)},
       {"STORE", lossMeanStore(chunks)},
       {"COMBINE", lossMeanCombine(w, chunks)}});
}

void emitFusedClassifier(CudaWriter& w) {
  auto op = mlir::cast<FusedClassifierOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getLogits());
  Letters letters = rowLetters(shape.size(), "V");
  int64_t v = shape.back(), tokens = numel(shapeOf(op.getTargets()));
  // One block per row, as cross_entropy_grad, for rows of any length; the rows go in chunks
  // of CHUNK consecutive tokens, one chunk per block at a time, so that thread 0 sums its
  // chunk's losses in double in token order and the chunk sums are added in chunk order
  // (lastBlockCombine): deterministic, no float atomics. CHUNK is the fewest tokens per
  // chunk that leave at most one chunk per resident block (a function of the shapes only),
  // so the second level adds at most that many values.
  unsigned threads = rowThreads(v);
  int64_t maxBlocks = kResidentThreads / threads;
  int64_t chunkRows = std::max<int64_t>((tokens + maxBlocks - 1) / maxBlocks, 1);
  int64_t chunks = std::max<int64_t>((tokens + chunkRows - 1) / chunkRows, 1);
  w.describe("loss = mean over tokens n of logsumexp(logits[n, :]) - logits[n, targets[n]];");
  w.describe("dlogits = dloss * (softmax(logits) - onehot(targets)) / N, N = tokens.");
  w.describe("One block per row: max and sum of exp(x - max) once, then dlogits (exp again, no");
  w.describe("stored probabilities). Per-token losses in f32, their mean in double (per chunk of");
  w.describe("CHUNK tokens in order, then the chunks in order). A target outside [0, V) makes the");
  w.describe("loss NaN and its row of dlogits NaN.");
  kernelcommon::declareClassifier(w, op.getLoss(), op.getDlogits(), op.getLogits(),
                                  op.getTargets(), op.getDloss(), letters, tokens, v);
  w.constant("CHUNK", chunkRows, "tokens per chunk of the loss sum");
  w.constant("CHUNKS", chunks);
  w.launch(static_cast<unsigned>(chunks), threads,
           "one block per row, a chunk of CHUNK rows per block (grid-stride over chunks)");
  w.kind(CudaKernelKind::Row);
  w.useBlockReductions(true);
  w.code(
      R"cuda(const float factor = dloss[0] / static_cast<float>(N);
for (idx_t ch = blockIdx.x; ch < CHUNKS; ch += gridDim.x) {
  const idx_t n1 = (ch + 1) * CHUNK < N ? (ch + 1) * CHUNK : N;
  double total = 0.0;  // thread 0's sum of the chunk's token losses, in token order
  for (idx_t n = ch * CHUNK; n < n1; ++n) {
    const auto* x = logits + n * V;
    auto* dx = dlogits + n * V;
    const int32_t t = targets[n];
    if (t < 0 || t >= V) {  // the same for the whole block: no barrier is skipped by some only
      for (idx_t i = threadIdx.x; i < V; i += THREADS) dx[i] = NAN;
      total += NAN;
      continue;
    }
    float mx = -INFINITY;
    for (idx_t i = threadIdx.x; i < V; i += THREADS) mx = x[i] > mx ? x[i] : mx;
$MAX    float sum = 0.0f;
    for (idx_t i = threadIdx.x; i < V; i += THREADS) sum += tessel_exp(x[i] - mx);
$SUM    if (threadIdx.x == 0) total += static_cast<double>((mx - x[t]) + logf(sum));
    for (idx_t i = threadIdx.x; i < V; i += THREADS)
      dx[i] = i == t ? factor * (tessel_exp(x[i] - mx) / sum - 1.0f)  // exp again: a bf16 dx
                     : factor * (tessel_exp(x[i] - mx) / sum);       // rounds once
  }
$STORE}
$COMBINE)cuda",
      {{"MAX", indent(blockReduce("mx", "max"), 4)},
       {"SUM", indent(blockReduce("sum", "sum"), 4)},
       {"STORE", lossMeanStore(chunks)},
       {"COMBINE", lossMeanCombine(w, chunks)}});
}

void emitLayerNormGrad(CudaWriter& w) {
  auto op = mlir::cast<LayerNormGradOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  Letters letters = rowLetters(shape.size());
  int64_t c = shape.back(), rows = numel(shape) / std::max<int64_t>(c, 1);
  // Rows go in chunks of 32, as in the C++ kernel: a chunk's dgamma/dbeta sums run in f32
  // over its rows in order, and the chunk sums ([CHUNKS][2 C]: dgamma, then dbeta) are
  // added in chunk order in double, by the block that finishes last (lastBlockCombine). The
  // chunking depends only on the shape, so the result does not depend on the grid, and it matches
  // the C++ kernel's up to the row statistics.
  kernelcommon::declareLayerNormGrad(w, op, letters, rows, c);
  int64_t chunks = chunkedRowLaunch(w, rows, c, "dgamma/dbeta");
  w.constantF("EPS", op.getEpsilon().convertToDouble());
  w.code(
      R"cuda(__shared__ float rowX0[CHUNK], rowMean[CHUNK], rowRstd[CHUNK];  // the chunk's row statistics
for (idx_t ch = blockIdx.x; ch < CHUNKS; ch += gridDim.x) {
  const idx_t r0 = ch * CHUNK, rn = N - r0 < CHUNK ? N - r0 : CHUNK;
  // 1. One warp per row: the statistics (as layer_norm: shifted, two passes) and dinp.
  for (idx_t k = warp; k < rn; k += NWARPS) {
    const auto* x = inp + (r0 + k) * C;
    const auto* dy = dout + (r0 + k) * C;
    auto* dx = dinp + (r0 + k) * C;
    const float x0 = x[0];
    float sum = 0.0f;
    #pragma unroll 4  // loops over C: registers do not grow with C
    for (idx_t i = lane; i < C; i += 32) sum += x[i] - x0;
    const float m = tessel_warp_sum(sum) / C;
    float ss = 0.0f;
    #pragma unroll 4
    for (idx_t i = lane; i < C; i += 32) {
      const float d = (x[i] - x0) - m;
      ss += d * d;
    }
    const float rstd = 1.0f / sqrtf(tessel_warp_sum(ss) / C + EPS);
    float sdx = 0.0f, sdxx = 0.0f;
    #pragma unroll 4
    for (idx_t i = lane; i < C; i += 32) {
      const float xhat = ((x[i] - x0) - m) * rstd;
      const float g = dy[i] * gamma[i];
      sdx += g;
      sdxx += g * xhat;
    }
    const float mdx = tessel_warp_sum(sdx) / C, mdxx = tessel_warp_sum(sdxx) / C;
    #pragma unroll 4
    for (idx_t i = lane; i < C; i += 32) {
      const float xhat = ((x[i] - x0) - m) * rstd;
      dx[i] = rstd * (dy[i] * gamma[i] - mdx - xhat * mdxx);
    }
    if (lane == 0) {
      rowX0[k] = x0;
      rowMean[k] = m;
      rowRstd[k] = rstd;
    }
  }
  __syncthreads();
  // 2. One thread per channel: the chunk's dgamma and dbeta, over its rows in order.
  for (idx_t i = threadIdx.x; i < C; i += THREADS) {
    float g = 0.0f, b = 0.0f;
    #pragma unroll 4
    for (idx_t k = 0; k < rn; ++k) {
      const idx_t at = (r0 + k) * C + i;
      const float xhat = ((inp[at] - rowX0[k]) - rowMean[k]) * rowRstd[k];
      g += dout[at] * xhat;
      b += dout[at];
    }
$STORE  }
  __syncthreads();  // the row statistics are reused by the next chunk
}
$COMBINE)cuda",
      {{"STORE", chunks == 1 ? "    dgamma[i] = g;\n    dbeta[i] = b;\n"
                             : std::string("    chunkSums[ch * 2 * C + i] = g;\n"
                                           "    chunkSums[ch * 2 * C + C + i] = b;\n")},
       {"COMBINE", chunks == 1
                       ? ""
                       : lastBlockCombine(w, "float", chunks * 2 * c,
                                          R"cuda(for (idx_t i = threadIdx.x; i < C; i += THREADS) {
  double g = 0.0, b = 0.0;  // in double, as the C++ kernel
  #pragma unroll 4  // a trip count that grows with the shapes: bounded registers
  for (idx_t ch = 0; ch < CHUNKS; ++ch) {
    g += partial[ch * 2 * C + i];
    b += partial[ch * 2 * C + C + i];
  }
  dgamma[i] = static_cast<float>(g);
  dbeta[i] = static_cast<float>(b);
}
)cuda")}});
}

}  // namespace tessel::cudagen
