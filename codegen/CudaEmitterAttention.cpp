// CUDA kernel of tessel.rope (rotary position embedding), the twin of the C++ kernel
// (CppEmitterAttention.cpp): one thread per rotated pair, the angle in double as the
// reference computes it, its cosine and sine rounded to float once, the turn in f32. Each
// thread reads both elements of its pair before writing them, so the output may share the
// input's buffer.
#include "codegen/CudaEmitterInternal.h"
#include "codegen/KernelCommonAttention.h"  // defines: declareRope, ropeAngleExpr

namespace tessel::cudagen {

void emitRope(CudaWriter& w) {
  auto op = mlir::cast<RopeOp>(w.op());
  std::vector<int64_t> shape = shapeOf(op.getInput());
  w.kind(CudaKernelKind::Elementwise);
  kernelcommon::declareRope(w);
  flatLoop(w, shape[0] * shape[1] * shape[2] / 2,
           "const idx_t i = j % HALF, h = j / HALF % NH, r = j / (HALF * NH), t = r % T;\n"
           "const double a = " + kernelcommon::ropeAngleExpr(op, "t", "i") + ";\n"
           "const float cosA = static_cast<float>(cos(a)), sinA = static_cast<float>(sin(a));\n"
           "const idx_t p = r * NH * D + h * D + i;\n"
           "const float x1 = inp[p], x2 = inp[p + HALF];\n"
           "out[p] = x1 * cosA - x2 * sinA;\n"
           "out[p + HALF] = x2 * cosA + x1 * sinA;\n",
           "one thread per rotated pair (grid-stride)");
}

}  // namespace tessel::cudagen
