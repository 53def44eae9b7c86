// Internal to the kernel emitters (CppEmitterNorm.cpp, CudaEmitterNorm.cpp): the descriptions,
// arguments and constants of the rms_norm and rms_norm_grad kernels, for either emitter's
// writer, so that the C++ and CUDA twins describe the same arguments in the same order.
// Not part of the public API.
#pragma once

#include "compiler/TesselDialect.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::kernelcommon {

/// The description and arguments of an rms_norm kernel (out, then inp, weight) and its N
/// (rows), C and EPS constants. `letters` name inp's dims.
template <class Writer>
void declareRmsNorm(Writer& w, RmsNormOp op, const std::vector<std::string>& letters,
                    int64_t rows, int64_t c) {
  w.describe("out = inp * rstd * weight over the last dimension C, rstd = 1 / sqrt(mean(inp^2)");
  w.describe("+ eps), the mean of squares in f32 (no mean is subtracted)");
  w.output("out", op.getResult(), letters);
  w.input("inp", op.getInput(), letters);
  w.input("weight", op.getWeight(), {"C"});
  w.constant("N", rows, "rows");
  w.constant("C", c);
  w.constantF("EPS", op.getEpsilon().convertToDouble());
}

/// The description and arguments of an rms_norm_grad kernel (dinp, dweight, then inp,
/// weight, dout) and its N, C and EPS constants; the caller adds its own chunking constants.
template <class Writer>
void declareRmsNormGrad(Writer& w, RmsNormGradOp op, const std::vector<std::string>& letters,
                        int64_t rows, int64_t c) {
  w.describe("with rstd and xhat = inp * rstd recomputed per row, and g = dout * weight:");
  w.describe("dinp = rstd * (g - xhat * mean(g * xhat)), dweight = sum over rows of dout * xhat");
  w.output("dinp", op.getDinput(), letters);
  w.output("dweight", op.getDweight(), {"C"});
  w.input("inp", op.getInput(), letters);
  w.input("weight", op.getWeight(), {"C"});
  w.input("dout", op.getGrad(), letters);
  w.constant("N", rows, "rows");
  w.constant("C", c);
  w.constantF("EPS", op.getEpsilon().convertToDouble());
}

}  // namespace tessel::kernelcommon
