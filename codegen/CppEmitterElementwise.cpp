// C++ kernels of the elementwise ops: add, sub, mul (with suffix broadcasting), scale, gelu,
// relu, their grads, and constant. Flat loops under `parallel for simd`; every iteration
// reads its inputs before writing, so an output may share its buffer with an input.
#include "codegen/CppEmitterInternal.h"

#include <fmt/format.h>

namespace tessel::cppgen {

void emitBinary(KernelWriter& w) {
  mlir::Operation* op = w.op();
  mlir::Value lhs = op->getOperand(0), rhs = op->getOperand(1), res = op->getResult(0);
  const char* sign = kernelcommon::binarySign(op);
  std::vector<int64_t> out = shapeOf(res);
  Letters letters = genericLetters(out.size());
  int64_t n = numel(out), na = numel(shapeOf(lhs)), nb = numel(shapeOf(rhs));
  w.output("out", res, letters);
  w.input("a", lhs, suffixLetters(letters, shapeOf(lhs).size()));
  w.input("b", rhs, suffixLetters(letters, shapeOf(rhs).size()));
  w.constant("N", n);
  Subst subst{{"OP", sign}};
  w.describe(kernelcommon::binaryDescription(sign, na, nb, n));
  if (na == n && nb == n) {
    subst["PAR"] = parallelFor(n, n, /*simd=*/true);
    w.code(R"cpp($PAR
for (int64_t i = 0; i < N; ++i) out[i] = a[i] $OP b[i];
)cpp",
           subst);
    return;
  }
  // Suffix broadcasting: the shorter operand (M elements) repeats over R = N / M rows.
  bool aShort = na < n;
  int64_t m = aShort ? na : nb;
  if (m == 1) {
    subst["PAR"] = parallelFor(n, n, /*simd=*/true);
    subst["A"] = aShort ? "a[0]" : "a[i]";
    subst["B"] = aShort ? "b[i]" : "b[0]";
    w.code(R"cpp($PAR
for (int64_t i = 0; i < N; ++i) out[i] = $A $OP $B;
)cpp",
           subst);
    return;
  }
  w.constant("M", m, "elements of the repeated operand");
  w.constant("R", n / m, "rows");
  subst["PAR"] = parallelFor(n, n / m);
  subst["A"] = aShort ? "a[i]" : "a[r * M + i]";
  subst["B"] = aShort ? "b[r * M + i]" : "b[i]";
  w.code(R"cpp($PAR
for (int64_t r = 0; r < R; ++r) {
  auto* o = out + r * M;
  #pragma omp simd
  for (int64_t i = 0; i < M; ++i) o[i] = $A $OP $B;
}
)cpp",
         subst);
}

void emitUnary(KernelWriter& w) {
  mlir::Operation* op = w.op();
  mlir::Value res = op->getResult(0);
  Letters letters = genericLetters(shapeOf(res).size());
  int64_t n = numel(shapeOf(res));
  const kernelcommon::UnaryForm form = kernelcommon::unaryForm(op);
  const bool isGrad = form.isGrad;
  w.describe(form.description);
  w.output(isGrad ? "dinp" : "out", res, letters);
  w.input("inp", op->getOperand(0), letters);
  if (isGrad) w.input("dout", op->getOperand(1), letters);
  w.constant("N", n);
  if (auto scale = mlir::dyn_cast<ScaleOp>(op))
    w.constantF("FACTOR", scale.getFactor().convertToDouble());
  Subst subst{{"PAR", parallelFor(n * form.cost, n, /*simd=*/true)},
              {"LOAD", isGrad ? "const float x = inp[i], dy = dout[i];"
                              : "const float x = inp[i];"},
              {"OUT", isGrad ? "dinp" : "out"},
              {"EXPR", form.expr}};
  w.code(R"cpp($PAR
for (int64_t i = 0; i < N; ++i) {
  $LOAD
  $OUT[i] = $EXPR;
}
)cpp",
         subst);
}

void emitConstant(KernelWriter& w) {
  auto op = mlir::cast<ConstantOp>(w.op());
  int64_t n = numel(shapeOf(op.getResult()));
  w.describe("out = value, every element");
  w.output("out", op.getResult(), genericLetters(shapeOf(op.getResult()).size()));
  w.constant("N", n);
  w.constantF("VALUE", op.getValue().convertToDouble());
  w.code(R"cpp($PAR
for (int64_t i = 0; i < N; ++i) out[i] = VALUE;
)cpp",
         {{"PAR", parallelFor(n, n, /*simd=*/true)}});
}

}  // namespace tessel::cppgen
