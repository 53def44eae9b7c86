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
  const char* sign = mlir::isa<AddOp>(op) ? "+" : mlir::isa<SubOp>(op) ? "-" : "*";
  std::vector<int64_t> out = shapeOf(res);
  Letters letters = genericLetters(out.size());
  int64_t n = numel(out), na = numel(shapeOf(lhs)), nb = numel(shapeOf(rhs));
  w.kind(CudaKernelKind::Elementwise);
  w.describe(na == n && nb == n
                 ? fmt::format("out = a {} b, elementwise", sign)
                 : fmt::format("out = a {} b, elementwise, {} repeated over the leading dimensions",
                               sign, na < n ? "a" : "b"));
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
  bool isGrad = mlir::isa<GeluGradOp, ReluGradOp>(op);
  std::string expr;
  if (mlir::isa<ScaleOp>(op)) {
    w.describe("out = x * factor, elementwise");
    expr = "x * FACTOR";
  } else if (mlir::isa<GeluOp>(op)) {
    w.describe("out = gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise");
    expr = "tessel_gelu(x)";
  } else if (mlir::isa<ReluOp>(op)) {
    w.describe("out = max(x, 0), elementwise (NaN gives 0, as the reference)");
    expr = "x > 0.0f ? x : 0.0f";
  } else if (mlir::isa<GeluGradOp>(op)) {
    w.describe("dinp = dout * gelu'(inp), elementwise (tanh form)");
    expr = "tessel_gelu_grad(x, dy)";
  } else {
    w.describe("dinp = inp > 0 ? dout : 0, elementwise");
    expr = "x > 0.0f ? dy : 0.0f";
  }
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
  emitElementwiseLoop(w, n, inputs, {{outName, "y"}}, fmt::format("const float y = {};\n", expr),
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
  w.describe("torch.optim.AdamW, elementwise, t = step:");
  w.describe(op.getDecay() ? "p = p * (1 - lr * weight_decay);  m = beta1 m + (1 - beta1) g;"
                           : "(no weight decay)  m = beta1 m + (1 - beta1) g;");
  w.describe(
      "v = beta2 v + (1 - beta2) g^2;  p = p - lr / (1 - beta1^t) * m / (sqrt(v) / "
      "sqrt(1 - beta2^t) + eps)");
  w.output("new_param", op.getNewParam(), letters);
  w.output("new_exp_avg", op.getNewExpAvg(), letters);
  w.output("new_exp_avg_sq", op.getNewExpAvgSq(), letters);
  w.input("param", op.getParam(), letters);
  w.input("grad", op.getGrad(), letters);
  w.input("exp_avg", op.getExpAvg(), letters);
  w.input("exp_avg_sq", op.getExpAvgSq(), letters);
  for (auto [name, v] : {std::pair{"lr", op.getLr()},
                         {"beta1", op.getBeta1()},
                         {"beta2", op.getBeta2()},
                         {"eps", op.getEps()},
                         {"weight_decay", op.getWeightDecay()},
                         {"step", op.getStep()}})
    w.input(name, v, {});
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
         {{"DECAY", op.getDecay()
                        ? "static_cast<float>(1.0 - static_cast<double>(lr[0]) * weight_decay[0])"
                        : "1.0f"}});
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
  w.describe("torch.optim.SGD (dampening 0, not Nesterov), elementwise:");
  w.describe(op.getDecay() ? "g = g + weight_decay * p;  buf = step == 1 ? g : momentum buf + g;"
                           : "(no weight decay)  buf = step == 1 ? g : momentum buf + g;");
  w.describe("p = p - lr * buf; with momentum 0 the buffer passes through and p = p - lr * g");
  w.output("new_param", op.getNewParam(), letters);
  w.output("new_momentum_buffer", op.getNewMomentumBuffer(), letters);
  w.input("param", op.getParam(), letters);
  w.input("grad", op.getGrad(), letters);
  w.input("momentum_buffer", op.getMomentumBuffer(), letters);
  for (auto [name, v] : {std::pair{"lr", op.getLr()},
                         {"momentum", op.getMomentum()},
                         {"weight_decay", op.getWeightDecay()},
                         {"step", op.getStep()}})
    w.input(name, v, {});
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
