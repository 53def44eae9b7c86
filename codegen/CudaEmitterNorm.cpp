// CUDA kernels of rms_norm and rms_norm_grad, the twins of CppEmitterNorm.cpp, laid out as
// layer_norm's (CudaEmitterRows.cpp): rms_norm is one block per row (grid-stride over rows)
// with a block reduction of the squares; rms_norm_grad is one block per chunk of 32 rows, one
// warp per row for dinp, then one thread per channel for the chunk's dweight, and the chunk
// sums are added in chunk order in double by the block that finishes last, so the result
// does not depend on the grid.
#include "codegen/CudaEmitterInternal.h"
#include "codegen/KernelCommonNorm.h"

#include <algorithm>

namespace tessel::cudagen {

void emitRmsNorm(CudaWriter& w) {
  auto op = mlir::cast<RmsNormOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  Letters letters = rowLetters(shape.size());
  int64_t c = shape.back(), rows = numel(shape) / std::max<int64_t>(c, 1);
  kernelcommon::declareRmsNorm(w, op, letters, rows, c);
  rowLaunch(w, rows, c);
  w.code(
      R"cuda(for (idx_t r = blockIdx.x; r < N; r += gridDim.x) {
  const auto* x = inp + r * C;
  auto* y = out + r * C;
  float ss = 0.0f;
  for (idx_t i = threadIdx.x; i < C; i += THREADS) ss += static_cast<float>(x[i]) * x[i];
$SS  const float rstd = 1.0f / sqrtf(ss / C + EPS);
  for (idx_t i = threadIdx.x; i < C; i += THREADS) y[i] = static_cast<float>(x[i]) * rstd * weight[i];
}
)cuda",
      {{"SS", indent(blockReduce("ss", "sum"), 2)}});
}

void emitRmsNormGrad(CudaWriter& w) {
  auto op = mlir::cast<RmsNormGradOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  Letters letters = rowLetters(shape.size());
  int64_t c = shape.back(), rows = numel(shape) / std::max<int64_t>(c, 1);
  // Chunks of 32 rows, as the C++ kernel: the chunk sums ([CHUNKS][C]) are f32 sums over the
  // chunk's rows in order, added in chunk order in double.
  kernelcommon::declareRmsNormGrad(w, op, letters, rows, c);
  int64_t chunks = chunkedRowLaunch(w, rows, c, "dweight");
  w.code(
      R"cuda(__shared__ float rowRstd[CHUNK];  // the chunk's row statistics
for (idx_t ch = blockIdx.x; ch < CHUNKS; ch += gridDim.x) {
  const idx_t r0 = ch * CHUNK, rn = N - r0 < CHUNK ? N - r0 : CHUNK;
  // 1. One warp per row: rstd (as rms_norm) and dinp.
  for (idx_t k = warp; k < rn; k += NWARPS) {
    const auto* x = inp + (r0 + k) * C;
    const auto* dy = dout + (r0 + k) * C;
    auto* dx = dinp + (r0 + k) * C;
    float ss = 0.0f;
    #pragma unroll 4  // loops over C: registers do not grow with C
    for (idx_t i = lane; i < C; i += 32) ss += static_cast<float>(x[i]) * x[i];
    const float rstd = 1.0f / sqrtf(tessel_warp_sum(ss) / C + EPS);
    float sgx = 0.0f;
    #pragma unroll 4
    for (idx_t i = lane; i < C; i += 32) sgx += dy[i] * weight[i] * (x[i] * rstd);
    const float m = tessel_warp_sum(sgx) / C;
    #pragma unroll 4
    for (idx_t i = lane; i < C; i += 32) dx[i] = rstd * (dy[i] * weight[i] - x[i] * rstd * m);
    if (lane == 0) rowRstd[k] = rstd;
  }
  __syncthreads();
  // 2. One thread per channel: the chunk's dweight, over its rows in order.
  for (idx_t i = threadIdx.x; i < C; i += THREADS) {
    float g = 0.0f;
    #pragma unroll 4
    for (idx_t k = 0; k < rn; ++k) {
      const idx_t at = (r0 + k) * C + i;
      g += dout[at] * (inp[at] * rowRstd[k]);
    }
$STORE  }
  __syncthreads();  // the row statistics are reused by the next chunk
}
$COMBINE)cuda",
      {{"STORE", chunks == 1 ? "    dweight[i] = g;\n"
                             : std::string("    chunkSums[ch * C + i] = g;\n")},
       {"COMBINE", chunks == 1
                       ? ""
                       : lastBlockCombine(w, "float", chunks * c,
                                          R"cuda(for (idx_t i = threadIdx.x; i < C; i += THREADS) {
  double g = 0.0;  // in double, as the C++ kernel
  #pragma unroll 4  // a trip count that grows with the shapes: bounded registers
  for (idx_t ch = 0; ch < CHUNKS; ++ch) g += partial[ch * C + i];
  dweight[i] = static_cast<float>(g);
}
)cuda")}});
}

}  // namespace tessel::cudagen
