// Internal to the kernel emitters (CppEmitter*.cpp, CudaEmitter*.cpp): the helpers that do not
// depend on the target language, so the C++ and CUDA kernels describe, index and compute the
// same way. Not part of the public API; include CppEmitter.h or CudaEmitter.h instead.
#pragma once

#include "compiler/TesselDialect.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::kernelcommon {

// ---- index spaces of the layout ops ----------------------------------------------------------

/// One coordinate group of a layout op after merging: `size` elements, a flag whose meaning
/// is the op's (reduced, inserted), and the group's strides in the input and the output.
struct Group {
  int64_t size;
  bool flag;
  int64_t inStride;
  int64_t outStride;
};

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape);

/// Drops size-1 groups and merges neighbours with the same flag whose input strides nest
/// (the outer stride equals the inner stride times the inner size). Output strides are then
/// recomputed row-major over the groups whose flag is `outFlag` (the ones the output has).
std::vector<Group> simplify(const std::vector<Group>& in, bool outFlag);

/// Elements of the index space of `groups`: the product of their sizes.
int64_t sizeOf(const std::vector<Group>& groups);

/// The index space of a reduce_sum or reduce_mean: the dimensions summed (flag true in
/// `groups`, simplified with the kept ones as the output's), the elements averaged, the
/// dimension letters of the input and of the output (its kept dimensions).
struct ReducePlan {
  bool mean = false;
  int64_t count = 1;
  std::vector<int64_t> dims;
  std::vector<std::string> inLetters, outLetters;
  std::vector<Group> groups;
};
/// `inLetters`: the input's dimension letters (genericLetters of its rank).
ReducePlan reducePlan(mlir::Operation* op, const std::vector<std::string>& inLetters);
/// The description of a reduction and the `constexpr double SCALE = ...;` line of its body.
std::string reduceDescription(const ReducePlan& plan);
std::string reduceScaleLine(const ReducePlan& plan);

/// The description, the arguments (out, inp) and the SCALE constant of a reduction kernel,
/// for either emitter's writer.
template <class Writer>
void declareReduce(Writer& w, const ReducePlan& plan) {
  w.describe(reduceDescription(plan));
  w.output("out", w.op()->getResult(0), plan.outLetters);
  w.input("inp", w.op()->getOperand(0), plan.inLetters);
  w.code(reduceScaleLine(plan));
}

// ---- bf16 storage ----------------------------------------------------------------------------

/// The preamble text that defines `tessel_bf16`, the storage type of bf16 tensors in both
/// languages: 16 bits, read as float (exact), assigned from float with round-to-nearest-even
/// (NaN stays NaN, overflow gives infinity), the arithmetic of runtime/numeric/BFloat16.h.
/// Its constructor from float is explicit, so `cond ? bf16 : 0.0f` is a float and a compound
/// assignment (`out[i] += x`, which would round every partial sum) does not compile; it also
/// defines `tessel_round_bf16(float)`, the value a bf16 store keeps. `fn` prefixes the free
/// functions ("static inline" or "static __device__ __forceinline__"), `member` the member
/// functions ("" or "__device__ __forceinline__"); the preamble must already define
/// `tessel_bits_to_float(int32_t)` and `tessel_float_to_bits(float)`.
std::string bf16Preamble(const std::string& fn, const std::string& member);

/// The element type kernels declare for `v`'s elements: "float", "tessel_bf16" or "int32_t".
std::string storageType(mlir::Value v);

// ---- text ------------------------------------------------------------------------------------

/// Every line of `text` indented by `spaces`.
std::string indent(const std::string& text, int spaces);

/// The llm.c shape comment of a kernel argument `name`: "// out [B, T, C] = [4, 32, 64]" with
/// one letter per dimension, "// out [4, 32, 64]" when `letters` do not match the rank, and
/// "// out scalar" for a 0-d tensor. Both emitters and the fused kernels write arguments so.
std::string shapeComment(std::string_view name, const std::vector<int64_t>& shape,
                         const std::vector<std::string>& letters);

/// `code` padded to column 60 so that the comments of argument lines line up, then `comment`
/// and a newline.
std::string withComment(const std::string& code, const std::string& comment);

// ---- kernel names ----------------------------------------------------------------------------

/// The member ops of a tessel.fused region without the dialect, in body order, repeats kept
/// ("add", "layer_norm"): the kernel's header comment in both languages, and its name.
std::vector<std::string> fusedMemberNames(FusedOp op);

/// At most this many op names go into a fused kernel's name (fusedKernelName).
inline constexpr size_t kFusedNameOps = 4;

/// What a tessel.fused region computes, as the part of its kernel symbol after "k<n>_":
/// "fused_" and the names of its member ops without the dialect, in body order, each name
/// once ("fused_add_layer_norm"). Past kFusedNameOps names, the count of the others ends the
/// name instead ("fused_add_gelu_mul_scale_and_2_more"), so symbols stay short. A valid C
/// identifier, since op names are; the same for identical regions, so kernels the lowering
/// shares keep one symbol.
std::string fusedKernelName(FusedOp op);

// ---- elementwise ops -------------------------------------------------------------------------

/// The operator of add, sub or mul: "+", "-" or "*".
const char* binarySign(mlir::Operation* op);
/// The description of a binary op of `sign` with operands of `na` and `nb` elements and a
/// result of `n`: "out = a + b, elementwise[, a repeated over the leading dimensions]".
std::string binaryDescription(const char* sign, int64_t na, int64_t nb, int64_t n);

/// What a unary op (scale, gelu, relu, gelu_grad, relu_grad, cast) computes per element: its
/// description, the float expression of `x` (the input) and, for the grads, `dy` (dout), and
/// its cost relative to a copy (for the C++ kernels' parallel threshold).
struct UnaryForm {
  std::string description, expr;
  int64_t cost = 1;
  bool isGrad = false;
};
UnaryForm unaryForm(mlir::Operation* op);

// ---- layer norm ------------------------------------------------------------------------------

/// The description and arguments of a layer_norm kernel (out, then inp, gamma, beta) and its
/// N (rows), C and EPS constants, for either emitter's writer. `letters` name inp's dims.
template <class Writer>
void declareLayerNorm(Writer& w, LayerNormOp op, const std::vector<std::string>& letters,
                      int64_t rows, int64_t c) {
  w.describe("out = (inp - mean) * rstd * gamma + beta over the last dimension C, with the");
  w.describe("biased variance, rstd = 1 / sqrt(var + eps); two-pass, shifted by the row's first");
  w.describe("element, so the statistics keep their precision under a large common offset");
  w.output("out", op.getResult(), letters);
  w.input("inp", op.getInput(), letters);
  w.input("gamma", op.getGamma(), {"C"});
  w.input("beta", op.getBeta(), {"C"});
  w.constant("N", rows, "rows");
  w.constant("C", c);
  w.constantF("EPS", op.getEpsilon().convertToDouble());
}

/// The description and arguments of a layer_norm_grad kernel (dinp, dgamma, dbeta, then inp,
/// gamma, dout) and its N and C constants; the caller adds its own chunking constants.
template <class Writer>
void declareLayerNormGrad(Writer& w, LayerNormGradOp op, const std::vector<std::string>& letters,
                          int64_t rows, int64_t c) {
  w.describe("with xhat = (inp - mean) * rstd recomputed per row and dxhat = dout * gamma:");
  w.describe("dinp = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),");
  w.describe("dgamma = sum over rows of dout * xhat, dbeta = sum over rows of dout");
  w.output("dinp", op.getDinput(), letters);
  w.output("dgamma", op.getDgamma(), {"C"});
  w.output("dbeta", op.getDbeta(), {"C"});
  w.input("inp", op.getInput(), letters);
  w.input("gamma", op.getGamma(), {"C"});
  w.input("dout", op.getGrad(), letters);
  w.constant("N", rows, "rows");
  w.constant("C", c);
}

// ---- classifier ops -------------------------------------------------------------------------

/// The arguments and the N (tokens) and V constants of the classifier kernels, for either
/// emitter's writer: outputs `loss` (f32 scalar) and `dlogits` (like logits), then inputs
/// logits, targets and `dloss`; a null Value skips that argument (cross_entropy: loss only;
/// cross_entropy_grad: dlogits and dloss; fused_classifier: all). `letters` name the logits'
/// dimensions, the last one V.
template <class Writer>
void declareClassifier(Writer& w, mlir::Value loss, mlir::Value dlogits, mlir::Value logits,
                       mlir::Value targets, mlir::Value dloss,
                       const std::vector<std::string>& letters, int64_t tokens, int64_t v) {
  if (loss) w.output("loss", loss, {});
  if (dlogits) w.output("dlogits", dlogits, letters);
  w.input("logits", logits, letters);
  w.input("targets", targets, std::vector<std::string>(letters.begin(), letters.end() - 1));
  if (dloss) w.input("dloss", dloss, {});
  w.constant("N", tokens, "tokens");
  w.constant("V", v);
}

// ---- optimizer ops ---------------------------------------------------------------------------

/// The shared description lines and the arguments (outputs, then inputs, in the op's order)
/// of an adamw kernel, for either emitter's writer (describe/output/input).
template <class Writer>
void declareAdamW(Writer& w, AdamWOp op, const std::vector<std::string>& letters) {
  w.describe("torch.optim.AdamW, elementwise, t = step:");
  w.describe(op.getDecay() ? "p = p * (1 - lr * weight_decay);  m = beta1 m + (1 - beta1) g;"
                           : "(no weight decay)  m = beta1 m + (1 - beta1) g;");
  w.describe("v = beta2 v + (1 - beta2) g^2;  p = p - lr / (1 - beta1^t) * m / (sqrt(v) / "
             "sqrt(1 - beta2^t) + eps)");
  w.output("new_param", op.getNewParam(), letters);
  w.output("new_exp_avg", op.getNewExpAvg(), letters);
  w.output("new_exp_avg_sq", op.getNewExpAvgSq(), letters);
  w.input("param", op.getParam(), letters);
  w.input("grad", op.getGrad(), letters);
  w.input("exp_avg", op.getExpAvg(), letters);
  w.input("exp_avg_sq", op.getExpAvgSq(), letters);
  for (auto [name, v] : {std::pair{"lr", op.getLr()}, {"beta1", op.getBeta1()},
                         {"beta2", op.getBeta2()}, {"eps", op.getEps()},
                         {"weight_decay", op.getWeightDecay()}, {"step", op.getStep()}})
    w.input(name, v, {});
}

/// The first two description lines and the arguments of an sgd kernel (the caller adds the
/// rest of the description).
template <class Writer>
void declareSGD(Writer& w, SGDOp op, const std::vector<std::string>& letters) {
  w.describe("torch.optim.SGD (dampening 0, not Nesterov), elementwise:");
  w.describe(op.getDecay() ? "g = g + weight_decay * p;  buf = step == 1 ? g : momentum buf + g;"
                           : "(no weight decay)  buf = step == 1 ? g : momentum buf + g;");
  w.output("new_param", op.getNewParam(), letters);
  w.output("new_momentum_buffer", op.getNewMomentumBuffer(), letters);
  w.input("param", op.getParam(), letters);
  w.input("grad", op.getGrad(), letters);
  w.input("momentum_buffer", op.getMomentumBuffer(), letters);
  for (auto [name, v] : {std::pair{"lr", op.getLr()}, {"momentum", op.getMomentum()},
                         {"weight_decay", op.getWeightDecay()}, {"step", op.getStep()}})
    w.input(name, v, {});
}

/// The adamw decay factor's expression: 1 - lr * weight_decay in double, or 1 without decay.
inline const char* adamWDecayExpr(AdamWOp op) {
  return op.getDecay() ? "static_cast<float>(1.0 - static_cast<double>(lr[0]) * weight_decay[0])"
                       : "1.0f";
}

}  // namespace tessel::kernelcommon
