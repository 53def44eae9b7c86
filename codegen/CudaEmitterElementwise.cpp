// CUDA kernels of the elementwise ops: add, sub, mul (with suffix broadcasting), scale, gelu,
// relu, their grads, constant, the optimizer updates adamw and sgd, and clip_coefficient.
// One thread per element (float4 where sizes and alignment allow) in a grid-stride loop;
// each element reads its inputs before its outputs are written, so updates may run in place.
// The per-element expressions are the C++ kernels' (CppEmitterElementwise.cpp,
// CppEmitterOptim.cpp) token for token, so both compute the same floats.
#include "codegen/CudaEmitterInternal.h"

#include <fmt/format.h>

namespace tessel::cudagen {

void emitBinary(CudaWriter& w) {
  mlir::Operation* op = w.op();
  mlir::Value lhs = op->getOperand(0), rhs = op->getOperand(1), res = op->getResult(0);
  const char* sign = kernelcommon::binarySign(op);
  std::vector<int64_t> out = shapeOf(res);
  Letters letters = genericLetters(out.size());
  int64_t n = numel(out), na = numel(shapeOf(lhs)), nb = numel(shapeOf(rhs));
  w.kind(CudaKernelKind::Elementwise);
  w.describe(kernelcommon::binaryDescription(sign, na, nb, n));
  w.output("out", res, letters);
  w.input("a", lhs, suffixLetters(letters, shapeOf(lhs).size()));
  w.input("b", rhs, suffixLetters(letters, shapeOf(rhs).size()));
  w.constant("N", n);
  std::vector<EwInput> inputs;
  std::string prologue;
  // A one-element operand is read once; a shorter one repeats with its own period.
  auto operand = [&](const char* ptr, const char* var, int64_t count) {
    if (count == n) {
      inputs.push_back({ptr, var, 0});
    } else if (count == 1) {
      prologue += fmt::format("const float {}0 = {}[0];\n", var, ptr);
      return fmt::format("{}0", var);
    } else {
      inputs.push_back({ptr, var, count});
    }
    return std::string(var);
  };
  std::string a = operand("a", "va", na), b = operand("b", "vb", nb);
  w.code(prologue);
  emitElementwiseLoop(w, n, inputs, {{"out", "vo"}},
                      fmt::format("const float vo = {} {} {};\n", a, sign, b), true);
}

void emitUnary(CudaWriter& w) {
  mlir::Operation* op = w.op();
  mlir::Value res = op->getResult(0);
  Letters letters = genericLetters(shapeOf(res).size());
  int64_t n = numel(shapeOf(res));
  const kernelcommon::UnaryForm form = kernelcommon::unaryForm(op);
  const bool isGrad = form.isGrad;
  w.describe(form.description);
  w.kind(CudaKernelKind::Elementwise);
  const char* outName = isGrad ? "dinp" : "out";
  w.output(outName, res, letters);
  w.input("inp", op->getOperand(0), letters);
  if (isGrad) w.input("dout", op->getOperand(1), letters);
  w.constant("N", n);
  if (auto scale = mlir::dyn_cast<ScaleOp>(op))
    w.constantF("FACTOR", scale.getFactor().convertToDouble());
  std::vector<EwInput> inputs{{"inp", "x", 0}};
  if (isGrad) inputs.push_back({"dout", "dy", 0});
  emitElementwiseLoop(w, n, inputs, {{outName, "y"}}, fmt::format("const float y = {};\n", form.expr),
                      true);
}

void emitConstant(CudaWriter& w) {
  auto op = mlir::cast<ConstantOp>(w.op());
  int64_t n = numel(shapeOf(op.getResult()));
  w.kind(CudaKernelKind::Elementwise);
  w.describe("out = value, every element");
  w.output("out", op.getResult(), genericLetters(shapeOf(op.getResult()).size()));
  w.constant("N", n);
  w.constantF("VALUE", op.getValue().convertToDouble());
  emitElementwiseLoop(w, n, {}, {{"out", "v"}}, "const float v = VALUE;\n", true);
}

void emitAdamW(CudaWriter& w) {
  auto op = mlir::cast<AdamWOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getParam());
  Letters letters = genericLetters(shape.size());
  int64_t n = numel(shape);
  w.kind(CudaKernelKind::Elementwise);
  kernelcommon::declareAdamW(w, op, letters);
  w.constant("N", n);
  // What depends only on the hyper-parameters, in double as the C++ kernel (every thread
  // computes the same values).
  w.code(R"cuda(const double t = step[0];
const float decay = $DECAY;
const float b1 = beta1[0], b2 = beta2[0], e = eps[0];
const float omb1 = static_cast<float>(1.0 - beta1[0]), omb2 = static_cast<float>(1.0 - beta2[0]);
const float stepSize = static_cast<float>(lr[0] / (1.0 - pow(static_cast<double>(b1), t)));
const float c2 = static_cast<float>(sqrt(1.0 - pow(static_cast<double>(b2), t)));
)cuda",
         {{"DECAY", kernelcommon::adamWDecayExpr(op)}});
  emitElementwiseLoop(
      w, n, {{"param", "p0", 0}, {"grad", "g", 0}, {"exp_avg", "m0", 0}, {"exp_avg_sq", "v0", 0}},
      {{"new_param", "np"}, {"new_exp_avg", "m"}, {"new_exp_avg_sq", "v"}},
      "const float p = p0 * decay;\n"
      "const float m = b1 * m0 + omb1 * g;\n"
      "const float v = b2 * v0 + omb2 * g * g;\n"
      "const float np = p - stepSize * m / (sqrtf(v) / c2 + e);\n",
      true);
}

void emitSGD(CudaWriter& w) {
  auto op = mlir::cast<SGDOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getParam());
  Letters letters = genericLetters(shape.size());
  int64_t n = numel(shape);
  w.kind(CudaKernelKind::Elementwise);
  kernelcommon::declareSGD(w, op, letters);
  w.describe("p = p - lr * buf; with momentum 0 the buffer passes through and p = p - lr * g");
  w.constant("N", n);
  w.code(R"cuda(const float rate = lr[0], mom = momentum[0], wd = $WD;
const bool useMomentum = mom != 0.0f, first = step[0] == 1.0f;
)cuda",
         {{"WD", op.getDecay() ? "weight_decay[0]" : "0.0f"}});
  emitElementwiseLoop(w, n, {{"param", "p", 0}, {"grad", "g", 0}, {"momentum_buffer", "b0", 0}},
                      {{"new_param", "np"}, {"new_momentum_buffer", "b"}},
                      "float d = g;\n"
                      "d = wd != 0.0f ? d + wd * p : d;\n"
                      "float b = b0;\n"
                      "b = useMomentum ? (first ? d : b * mom + d) : b;\n"
                      "d = useMomentum ? b : d;\n"
                      "const float np = p + -rate * d;\n",
                      true);
}

void emitClipCoefficient(CudaWriter& w) {
  auto op = mlir::cast<ClipCoefficientOp>(w.op());
  w.kind(CudaKernelKind::Scalar);
  w.describe("out = min(1, max_norm / (norm + 1e-6)) in double, as clip_grad_norm_; an");
  w.describe("infinite max_norm gives exactly 1, a NaN norm or max_norm gives NaN");
  w.output("out", op.getResult(), {});
  w.input("norm", op.getNorm(), {});
  w.input("max_norm", op.getMaxNorm(), {});
  w.code(R"cuda(if (blockIdx.x == 0 && threadIdx.x == 0) {
  const double n = norm[0], m = max_norm[0];
  const double c = m / (n + 1e-6);
  out[0] = n != n || m != m ? NAN : static_cast<float>(c < 1.0 ? c : 1.0);
}
)cuda");
  w.launch(1, 32, "one thread computes the scalar");
}

}  // namespace tessel::cudagen
