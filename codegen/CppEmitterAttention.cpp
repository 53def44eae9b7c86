// C++ kernel of tessel.rope (rotary position embedding). The cosines and sines depend only on
// the position and the pair: a table [T, D/2] of them is computed first (angles in double, as
// the reference, rounded to float once), then every row [b, t] turns its pairs with row t of
// the table. Each iteration reads both elements of a pair before writing them, so the output
// may share the input's buffer.
#include "codegen/CppEmitterInternal.h"
#include "codegen/KernelCommonAttention.h"  // defines: declareRope, ropeAngleExpr

namespace tessel::cppgen {

void emitRope(KernelWriter& w) {
  auto op = mlir::cast<RopeOp>(w.op());
  kernelcommon::declareRope(w);
  std::vector<int64_t> shape = shapeOf(op.getInput());
  int64_t rows = shape[0] * shape[1], pairs = shape[2] / 2;
  w.code(R"cpp(std::unique_ptr<float[]> cs(new float[T * HALF * 2]);  // [T, HALF] of (cos, sin)
$PART
for (int64_t t = 0; t < T; ++t)
  for (int64_t i = 0; i < HALF; ++i) {
    const double a = $ANGLE;
    cs[(t * HALF + i) * 2] = static_cast<float>(std::cos(a));
    cs[(t * HALF + i) * 2 + 1] = static_cast<float>(std::sin(a));
  }
$PAR
for (int64_t r = 0; r < ROWS; ++r) {
  const float* c = cs.get() + r % T * HALF * 2;
  const auto* x = inp + r * NH * D;
  auto* y = out + r * NH * D;
  for (int64_t h = 0; h < NH; ++h)
    for (int64_t i = 0; i < HALF; ++i) {
      const float x1 = x[h * D + i], x2 = x[h * D + i + HALF];
      const float cosA = c[2 * i], sinA = c[2 * i + 1];
      y[h * D + i] = x1 * cosA - x2 * sinA;
      y[h * D + i + HALF] = x2 * cosA + x1 * sinA;
    }
}
)cpp",
         {{"PART", parallelFor(shape[1] * shape[2] * 8, shape[1])},
          {"ANGLE", kernelcommon::ropeAngleExpr(op, "t", "i")},
          {"PAR", parallelFor(rows * pairs * 4, rows)}});
}

}  // namespace tessel::cppgen
