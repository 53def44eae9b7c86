// Internal to the kernel emitters (CppEmitterAttention.cpp, CudaEmitterAttention.cpp): the
// description, arguments and constants of tessel.rope's kernel (compiler/TesselAttentionOps.td)
// for either emitter's writer, so that the C++ and CUDA twins take the same arguments in the
// same order and compute the angle the same way. Not part of the public API.
#pragma once

#include "codegen/CppEmitterInternal.h"

#include <fmt/format.h>

namespace tessel::kernelcommon {

/// Declares `out` and `inp` [B, T, N * D] and the constants T, NH (heads), D (head size),
/// HALF (D / 2) and ROWS (B * T). The angle of pair i at position t is
/// `ropeAngleExpr("t", "i")`, in double as the reference computes it.
template <class Writer>
void declareRope(Writer& w) {
  auto op = mlir::cast<RopeOp>(w.op());
  std::vector<int64_t> shape = cppgen::shapeOf(op.getInput());
  int64_t heads = static_cast<int64_t>(op.getNumHeads()), d = shape[2] / heads;
  w.describe("out = inp with each pair (x[h*D + i], x[h*D + i + D/2]) of each head");
  w.describe(fmt::format("turned by {}a, a = t * theta^(-2i/D), t the position (rotary embedding)",
                         op.getInverse() ? "-" : ""));
  w.output("out", op.getResult(), {"B", "T", "C"});
  w.input("inp", op.getInput(), {"B", "T", "C"});
  w.constant("T", shape[1], "positions");
  w.constant("NH", heads, "heads");
  w.constant("D", d, "head size");
  w.constant("HALF", d / 2, "rotated pairs per head");
  w.constant("ROWS", shape[0] * shape[1], "rows [b, t]");
}

/// The angle of pair `i` at position `t` (int expressions) of `op`, a double expression:
/// t * theta^(-2i/D), negated for the inverse rotation. theta is written with 17 digits, so
/// it reads back as the op's double.
inline std::string ropeAngleExpr(RopeOp op, std::string_view t, std::string_view i) {
  return fmt::format("{}static_cast<double>({}) * pow({:.17g}, -2.0 * static_cast<double>({}) / D)",
                     op.getInverse() ? "-" : "", t, op.getTheta().convertToDouble(), i);
}

}  // namespace tessel::kernelcommon
