// C++ kernels of the optimizer ops: adamw, sgd, global_norm, clip_coefficient. The
// hyper-parameters are runtime scalars (tensor<f32> operands); whatever depends only on them
// (bias corrections, the decay factor) is computed once per call in double, and the
// per-element update runs in f32 in the operation order of PyTorch's single-tensor
// implementations, as the reference kernels (runtime/reference/ReferenceGrad.cpp) do.
// Every element reads all its inputs before writing, so updates may run in place.
#include "codegen/CppEmitterInternal.h"

#include <fmt/format.h>

namespace tessel::cppgen {

void emitAdamW(KernelWriter& w) {
  auto op = mlir::cast<AdamWOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getParam());
  Letters letters = genericLetters(shape.size());
  int64_t n = numel(shape);
  kernelcommon::declareAdamW(w, op, letters);
  w.constant("N", n);
  // sqrt stays scalar here: GCC vectorises it only with -fno-math-errno, which the host
  // compiler's flags do not include. The loop is memory-bound (28 bytes per element) anyway.
  w.code(R"cpp(const double t = step[0];
const float decay = $DECAY;
const float b1 = beta1[0], b2 = beta2[0], e = eps[0];
const float omb1 = static_cast<float>(1.0 - beta1[0]), omb2 = static_cast<float>(1.0 - beta2[0]);
const float stepSize = static_cast<float>(lr[0] / (1.0 - std::pow(static_cast<double>(b1), t)));
const float c2 = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
$PAR
for (int64_t i = 0; i < N; ++i) {
  const float g = grad[i];
  const float p = param[i] * decay;
  const float m = b1 * exp_avg[i] + omb1 * g;
  const float v = b2 * exp_avg_sq[i] + omb2 * g * g;
  new_param[i] = p - stepSize * m / (std::sqrt(v) / c2 + e);
  new_exp_avg[i] = m;
  new_exp_avg_sq[i] = v;
}
)cpp",
         {{"DECAY", kernelcommon::adamWDecayExpr(op)},
          {"PAR", parallelFor(n * 8, n, /*simd=*/true)}});
}

void emitSGD(KernelWriter& w) {
  auto op = mlir::cast<SGDOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getParam());
  Letters letters = genericLetters(shape.size());
  int64_t n = numel(shape);
  kernelcommon::declareSGD(w, op, letters);
  w.describe("p = p - lr * buf. With momentum 0 the buffer is passed through unchanged and");
  w.describe("p = p - lr * g, as torch (which keeps no buffer) and the reference do.");
  w.constant("N", n);
  w.code(R"cpp(const float rate = lr[0], mom = momentum[0], wd = $WD;
const bool useMomentum = mom != 0.0f, first = step[0] == 1.0f;
$PAR
for (int64_t i = 0; i < N; ++i) {
  const float p = param[i];
  float d = grad[i];
  d = wd != 0.0f ? d + wd * p : d;
  float b = momentum_buffer[i];
  b = useMomentum ? (first ? d : b * mom + d) : b;
  d = useMomentum ? b : d;
  new_param[i] = p + -rate * d;
  new_momentum_buffer[i] = b;
}
)cpp",
         {{"WD", op.getDecay() ? "weight_decay[0]" : "0.0f"},
          {"PAR", parallelFor(n * 2, n, /*simd=*/true)}});
}

void emitGlobalNorm(KernelWriter& w) {
  auto op = mlir::cast<GlobalNormOp>(w.op());
  std::vector<int64_t> sizes;
  std::vector<Letters> letters;
  for (mlir::Value v : op.getInputs()) {
    sizes.push_back(numel(shapeOf(v)));
    letters.push_back(genericLetters(shapeOf(v).size()));
  }
  w.describe("norm = sqrt(sum of x^2 over every element of every input), summed in double in");
  w.describe("fixed blocks (tessel_sum_squares), so the result does not depend on the threads");
  w.output("norm", op.getResult(), {});
  if (!sizes.empty()) w.inputs("grads", op.getInputs(), letters);
  w.constant("K", static_cast<int64_t>(sizes.size()), "inputs");
  if (sizes.empty()) {
    w.code("norm[0] = 0.0f;\n");
    return;
  }
  w.code(R"cpp(constexpr int64_t SIZE[K] = {$SIZES};
double total = 0.0;
for (int64_t k = 0; k < K; ++k) total += tessel_sum_squares(grads[k], SIZE[k]);
norm[0] = static_cast<float>(std::sqrt(total));
)cpp",
         {{"SIZES", fmt::format("{}", fmt::join(sizes, ", "))}});
}

void emitClipCoefficient(KernelWriter& w) {
  auto op = mlir::cast<ClipCoefficientOp>(w.op());
  w.describe("out = min(1, max_norm / (norm + 1e-6)) in double, as clip_grad_norm_; an");
  w.describe("infinite max_norm gives exactly 1, a NaN norm or max_norm gives NaN");
  w.output("out", op.getResult(), {});
  w.input("norm", op.getNorm(), {});
  w.input("max_norm", op.getMaxNorm(), {});
  w.code(R"cpp(const double n = norm[0], m = max_norm[0];
const double c = m / (n + 1e-6);
out[0] = n != n || m != m ? NAN : static_cast<float>(c < 1.0 ? c : 1.0);
)cpp");
}

}  // namespace tessel::cppgen
