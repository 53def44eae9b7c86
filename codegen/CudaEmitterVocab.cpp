// CUDA kernels of the vocab-parallel ops (TesselVocabParallelOps.td), the twins of
// CppEmitterVocab.cpp with the same arguments (kernelcommon::declareVocab): the gathers and
// scatters one thread per element (embedding_shard, target_logit, target_logit_grad) or per
// channel and range of table rows (embedding_shard_grad, as embedding_grad), the row
// statistics one block per row with block reductions (row_max, sum_exp: the C++ kernels' sums
// in another order), sum_exp_grad and cross_entropy_from_stats_grad elementwise (the same
// operations as in C++, so the same bits), and the loss's mean one block in double.
#include "codegen/CudaEmitterInternal.h"
#include "codegen/KernelCommonVocab.h"

#include <algorithm>

namespace tessel::cudagen {

void emitEmbeddingShard(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.kind(CudaKernelKind::Layout);
  flatLoop(w, s.rows * s.len,
           "const int32_t id = indices[j / C], row = id - offset[0];\n"
           "out[j] = id < 0 || id >= VOCAB     ? NAN\n"
           "         : row >= 0 && row < V     ? static_cast<float>(table[row * C + j % C])\n"
           "                                   : 0.0f;  // another shard's row\n",
           "one thread per element");
}

void emitEmbeddingShardGrad(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  // Indices of other shards fall outside [0, V) and are skipped, as out-of-range ones are.
  scatterRows(w, s.shardRows, s.len, "(indices[n] - offset[0])");
}

void emitRowMax(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  rowLaunch(w, s.rows, s.len);
  w.code(R"cuda(for (idx_t r = blockIdx.x; r < N; r += gridDim.x) {
  const auto* x = inp + r * V;
  float mx = -INFINITY;
  for (idx_t i = threadIdx.x; i < V; i += THREADS) mx = x[i] > mx ? x[i] : mx;
$MAX  if (threadIdx.x == 0) out[r] = mx;
}
)cuda",
         {{"MAX", indent(blockReduce("mx", "max"), 2)}});
}

void emitSumExp(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  rowLaunch(w, s.rows, s.len);
  w.code(R"cuda(for (idx_t r = blockIdx.x; r < N; r += gridDim.x) {
  const auto* x = inp + r * V;
  const float m = shift[r];
  float sum = 0.0f;
  for (idx_t i = threadIdx.x; i < V; i += THREADS) sum += tessel_exp(x[i] - m);
$SUM  if (threadIdx.x == 0) out[r] = sum;
}
)cuda",
         {{"SUM", indent(blockReduce("sum", "sum"), 2)}});
}

void emitSumExpGrad(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.kind(CudaKernelKind::Elementwise);
  flatLoop(w, s.rows * s.len,
           "const idx_t r = j / V;\n"
           "const float m = shift[r], g = dout[r];\n"
           "dinp[j] = g * tessel_exp(inp[j] - m);\n",
           "one thread per element");
}

void emitTargetLogit(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.kind(CudaKernelKind::Layout);
  flatLoop(w, s.rows,
           "const int32_t t = targets[j], k = t - offset[0];\n"
           "out[j] = t < 0 || t >= VOCAB   ? NAN\n"
           "         : k >= 0 && k < V     ? static_cast<float>(logits[j * V + k])\n"
           "                               : 0.0f;  // another shard holds the target\n",
           "one thread per row");
}

void emitMaskVocabPadding(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.kind(CudaKernelKind::Elementwise);
  const double fill = mlir::cast<MaskVocabPaddingOp>(w.op()).getFill().convertToDouble();
  flatLoop(w, s.rows * s.len,
           "out[j] = offset[0] + static_cast<int64_t>(j % V) >= VOCAB ? " + cppgen::floatLit(fill) +
               " : static_cast<float>(inp[j]);\n",
           "one thread per element");
}

void emitTargetLogitGrad(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.kind(CudaKernelKind::Layout);
  flatLoop(w, s.rows * s.len,
           "const idx_t r = j / V;\n"
           "dlogits[j] = j % V == targets[r] - offset[0] ? dout[r] : 0.0f;\n",
           "one thread per element");
}

void emitCrossEntropyFromStats(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  // One block: the rows are few (one per token) and each costs a log. Per-row losses in f32
  // as in C++, summed in double by each thread over its rows, then across the block: the
  // C++ kernel's double sum in another order.
  unsigned threads = static_cast<unsigned>(std::clamp<int64_t>((s.rows + 31) / 32 * 32, 64, 256));
  w.launch(1, threads, "one block: a sum over every row");
  w.kind(CudaKernelKind::Reduction);
  w.useBlockReductions(false, true);
  w.code(R"cuda(double total = 0.0;
for (idx_t n = threadIdx.x; n < N; n += THREADS)
  total += static_cast<double>((row_max[n] - target_logit[n]) + logf(sum_exp[n]));
$TOTALif (threadIdx.x == 0) loss[0] = static_cast<float>(total / N);
)cuda",
         {{"TOTAL", blockReduce("total", "dsum")}});
}

void emitCrossEntropyFromStatsGrad(CudaWriter& w) {
  kernelcommon::VocabSizes s = kernelcommon::declareVocab(w);
  w.kind(CudaKernelKind::Elementwise);
  flatLoop(w, s.rows,
           "const float factor = dloss[0] / static_cast<float>(N);\n"
           "dsum_exp[j] = factor / sum_exp[j];\n"
           "dtarget_logit[j] = -factor;\n",
           "one thread per row");
}

}  // namespace tessel::cudagen
