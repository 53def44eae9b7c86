// C++ kernels of rms_norm and rms_norm_grad. As layer_norm's (CppEmitterRows.cpp,
// CppEmitterGrad.cpp): one thread owns a row, the inner loops run over the contiguous last
// dimension under `#pragma omp simd` with float accumulators (per-lane partial sums, so the
// rounding error grows like C / lanes), and dweight is summed over fixed chunks of rows, so
// the result does not depend on the thread count.
#include "codegen/CppEmitterInternal.h"
#include "codegen/KernelCommonNorm.h"

namespace tessel::cppgen {

void emitRmsNorm(KernelWriter& w) {
  auto op = mlir::cast<RmsNormOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  Letters letters = rowLetters(shape.size());
  int64_t c = shape.back(), rows = numel(shape) / std::max<int64_t>(c, 1);
  kernelcommon::declareRmsNorm(w, op, letters, rows, c);
  // No shift as in layer_norm: the mean of squares has no cancellation to guard against.
  w.code(R"cpp($PAR
for (int64_t r = 0; r < N; ++r) {
  const auto* x = inp + r * C;
  auto* y = out + r * C;
  float ss = 0.0f;
  #pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < C; ++i) ss += static_cast<float>(x[i]) * x[i];
  const float rstd = 1.0f / std::sqrt(ss / C + EPS);
  #pragma omp simd
  for (int64_t i = 0; i < C; ++i) y[i] = static_cast<float>(x[i]) * rstd * weight[i];
}
)cpp",
         {{"PAR", parallelFor(rows * c * 3, rows)}});
}

void emitRmsNormGrad(KernelWriter& w) {
  auto op = mlir::cast<RmsNormGradOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  Letters letters = rowLetters(shape.size());
  int64_t c = shape.back(), rows = numel(shape) / std::max<int64_t>(c, 1);
  // As layer_norm_grad: chunks of 32 rows sum their dweight contributions in f32, and the
  // chunk sums are added in chunk order in double; no f32 sum runs over more than 32 terms.
  int64_t chunkRows = std::min<int64_t>(32, std::max<int64_t>(rows, 1));
  int64_t chunks = (rows + chunkRows - 1) / chunkRows;
  kernelcommon::declareRmsNormGrad(w, op, letters, rows, c);
  w.constant("CHUNK", chunkRows, "rows per chunk of the dweight sums");
  w.constant("CHUNKS", chunks);
  w.constant("CB", 64, "channels per block when the chunk sums are combined");
  w.code(R"cpp(// partial[ch * C + i] holds chunk ch's dweight sum of channel i.
std::unique_ptr<float[]> partial(new float[CHUNKS * C + 1]);
$PAR
for (int64_t ch = 0; ch < CHUNKS; ++ch) {
  float* pw = partial.get() + ch * C;
  for (int64_t i = 0; i < C; ++i) pw[i] = 0.0f;
  const int64_t rEnd = (ch + 1) * CHUNK < N ? (ch + 1) * CHUNK : N;
  for (int64_t r = ch * CHUNK; r < rEnd; ++r) {
    const auto* x = inp + r * C;
    const auto* dy = dout + r * C;
    auto* dx = dinp + r * C;
    float ss = 0.0f;  // rstd as rms_norm computes it
    #pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < C; ++i) ss += static_cast<float>(x[i]) * x[i];
    const float rstd = 1.0f / std::sqrt(ss / C + EPS);
    float sgx = 0.0f;
    #pragma omp simd reduction(+ : sgx)
    for (int64_t i = 0; i < C; ++i) {
      const float xhat = x[i] * rstd;
      sgx += dy[i] * weight[i] * xhat;
      pw[i] += dy[i] * xhat;
    }
    const float m = sgx / C;
    #pragma omp simd
    for (int64_t i = 0; i < C; ++i) dx[i] = rstd * (dy[i] * weight[i] - x[i] * rstd * m);
  }
}
$PARC
for (int64_t c0 = 0; c0 < C; c0 += CB) {
  const int64_t n = c0 + CB < C ? CB : C - c0;
  double g[CB] = {};
  for (int64_t ch = 0; ch < CHUNKS; ++ch) {
    const float* pw = partial.get() + ch * C + c0;
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) g[i] += pw[i];
  }
  for (int64_t i = 0; i < n; ++i) dweight[c0 + i] = static_cast<float>(g[i]);
}
)cpp",
         {{"PAR", parallelFor(rows * c * 6, chunks)},
          {"PARC", parallelFor(chunks * c, (c + 63) / 64)}});
}

}  // namespace tessel::cppgen
