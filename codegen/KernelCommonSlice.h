// Internal to the kernel emitters (CppEmitterLayout.cpp, CudaEmitterLayout.cpp): the
// description, arguments and constants of tessel.dynamic_slice's kernel
// (compiler/TesselSliceOps.td) for either emitter's writer, so that the C++ and CUDA twins
// take the same arguments in the same order. Not part of the public API.
#pragma once

#include "codegen/CppEmitterInternal.h"

namespace tessel::kernelcommon {

/// Declares `out` (the block), `inp` and `offset` (an i32 scalar, one-element pointer) and the
/// constants D (rows of the input), R (rows of the block) and ROW (elements of a row); the
/// kernel body copies rows [first, first + R) with first = offset clamped into [0, D - R].
template <class Writer>
void declareDynamicSlice(Writer& w) {
  auto op = mlir::cast<DynamicSliceOp>(w.op());
  std::vector<int64_t> in = cppgen::shapeOf(op.getInput()), out = cppgen::shapeOf(op.getResult());
  cppgen::Letters letters = cppgen::genericLetters(in.size());
  w.describe("out = rows [offset, offset + R) of inp (dimension 0), the offset clamped into [0, D - R]");
  w.output("out", op.getResult(), letters);
  w.input("inp", op.getInput(), letters);
  w.input("offset", op.getOffset(), {});
  w.constant("D", in[0], "rows of the input");
  w.constant("R", out[0], "rows of the block");
  w.constant("ROW", cppgen::product(in, 1, in.size()), "elements of a row");
}

}  // namespace tessel::kernelcommon
