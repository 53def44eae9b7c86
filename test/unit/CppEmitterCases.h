// Case builders of CppEmitterTest.cpp: one function per op, each returning a one-op MLIR
// function with its input ranges and its tolerance.
//
// Tolerances: u = 2^-24 (f32 unit roundoff). Each case's tolerance is the error bound of its
// f32 algorithm, stated next to it: k roundings give k u relative; a float sum of n terms
// errs by at most n u sum |terms|; the exp of the preamble errs by 1.5 u (measured), plus
// u |x| for the rounding of its argument x. Copies must be exact.
#pragma once

#include "test/unit/CppEmitterTestUtil.h"

#include <algorithm>

namespace tessel::cpptest {

// ---- case builders --------------------------------------------------------------------------

inline Case binary(const std::string& op, const Shape& a, const Shape& b) {
  Shape r = a.size() >= b.size() ? a : b;
  // One f32 rounding of the exact result, against f64: at most u relative (2u for slack
  // against the reference's own rounding).
  return makeCase(fmt::format("{}_{}_{}", op, nameOf(a), nameOf(b)), {{a}, {b}},
                  fmt::format("%r = tessel.{} %a0, %a1 : ({}, {}) -> {}", op, ty(a), ty(b), ty(r)),
                  {ty(r)}, {{2 * kU, 0}});
}

inline Case unary(const std::string& op, const Shape& s, double range, Tol tol,
                  const std::string& attr = "") {
  return makeCase(fmt::format("{}_{}", op, nameOf(s)), {{s, -range, range}},
                  fmt::format("%r = tessel.{} %a0{} : {}", op, attr, ty(s)), {ty(s)}, {tol});
}

inline Case unaryGrad(const std::string& op, const Shape& s, double range, Tol tol) {
  return makeCase(fmt::format("{}_{}", op, nameOf(s)), {{s, -range, range}, {s}},
                  fmt::format("%r = tessel.{} %a0, %a1 : {}", op, ty(s)), {ty(s)}, {tol});
}

// gelu and its grad: exp (1.5 u) of an argument z = 2 sqrt(2/pi) (x + 0.044715 x^3) that
// carries ~4 roundings, i.e. 4 |z| u in exp(-z), and ~6 more roundings. Where |z| is large
// the value is tiny (|gelu| <= |x| e^-|z|), so 32 u relative plus 32 u absolute (inputs are
// O(1..10)) covers the whole range; gelu' also crosses 0, hence the absolute part.
inline const Tol kGeluTol{32 * kU, 32 * kU};

inline Case layerNorm(const Shape& s, double lo = -2, double hi = 2, double eps = 1e-5) {
  int64_t c = s.back();
  // The row statistics are sums of C terms (mean, variance): at most C u relative error in
  // rstd and in x - mean, times |xhat * gamma| <= max|out|, plus ~6 roundings.
  return makeCase(fmt::format("layer_norm_{}{}", nameOf(s), lo > 50 ? "_offset" : ""),
                  {{s, lo, hi}, {{c}, 0.5, 1.5}, {{c}, -1, 1}},
                  fmt::format("%r = tessel.layer_norm %a0, %a1, %a2 {{epsilon = {:e} : f64}} : "
                              "({}, {}, {}) -> {}",
                              eps, ty(s), ty({c}), ty({c}), ty(s)),
                  {ty(s)}, {{8 * kU, (c + 8) * kU, kMax}});
}

inline Case softmax(const Shape& s, bool causal) {
  int64_t l = s.back();
  // Terms exp(x - max) with |x - max| <= 10: 1.5 u + 10 u each; their sum of L positive
  // terms: L u; the division: u. Every term is positive, so the bound is relative.
  return makeCase(fmt::format("softmax{}_{}", causal ? "_causal" : "", nameOf(s)), {{s, -5, 5}},
                  fmt::format("%r = tessel.softmax %a0{} : {}", causal ? " causal" : "", ty(s)),
                  {ty(s)}, {{(l + 16) * kU, 0}});
}

inline Case crossEntropy(const Shape& logits) {
  int64_t v = logits.back();
  Shape t(logits.begin(), logits.end() - 1);
  // Per token: log(sum) errs by the sum's relative error ((V + 12) u for V terms of
  // exp(x - max), |x - max| <= 10), max - x[t] and the log by u |loss| each; the mean is
  // taken in double. Losses are O(log V + 10), so (V + 48) u absolute.
  return makeCase(fmt::format("cross_entropy_{}", nameOf(logits)),
                  {{logits, -5, 5}, {t, 0, static_cast<double>(v), true}},
                  fmt::format("%r = tessel.cross_entropy %a0, %a1 : ({}, {}) -> tensor<f32>",
                              ty(logits), ty(t, "i32")),
                  {"tensor<f32>"}, {{0, (v + 48) * kU}});
}

inline Case crossEntropyGrad(const Shape& logits) {
  int64_t v = logits.back();
  Shape t(logits.begin(), logits.end() - 1);
  // dloss / N * (p - onehot): p as in softmax ((V + 16) u relative) and the target's
  // p - 1 with an absolute error of a few u times dloss / N <= max|dlogits|.
  return makeCase(fmt::format("cross_entropy_grad_{}", nameOf(logits)),
                  {{logits, -5, 5}, {t, 0, static_cast<double>(v), true}, {{}, 0.5, 2}},
                  fmt::format("%r = tessel.cross_entropy_grad %a0, %a1, %a2 : ({}, {}, "
                              "tensor<f32>) -> {}",
                              ty(logits), ty(t, "i32"), ty(logits)),
                  {ty(logits)}, {{(v + 16) * kU, 8 * kU, kMax}});
}

inline Case fusedClassifier(const Shape& logits) {
  int64_t v = logits.back();
  Shape t(logits.begin(), logits.end() - 1);
  // The loss as crossEntropy's and dlogits as crossEntropyGrad's: the same operations.
  return makeCase(fmt::format("fused_classifier_{}", nameOf(logits)),
                  {{logits, -5, 5}, {t, 0, static_cast<double>(v), true}, {{}, 0.5, 2}},
                  fmt::format("%r:2 = tessel.fused_classifier %a0, %a1, %a2 : ({}, {}, "
                              "tensor<f32>) -> (tensor<f32>, {})",
                              ty(logits), ty(t, "i32"), ty(logits)),
                  {"tensor<f32>", ty(logits)},
                  {{0, (v + 48) * kU}, {(v + 16) * kU, 8 * kU, kMax}});
}

inline Case embedding(const Shape& table, const Shape& idx) {
  Shape out = idx;
  out.push_back(table[1]);
  return makeCase(fmt::format("embedding_{}_{}", nameOf(table), nameOf(idx)),
                  {{table}, {idx, 0, static_cast<double>(table[0]), true}},
                  fmt::format("%r = tessel.embedding %a0, %a1 : ({}, {}) -> {}", ty(table),
                              ty(idx, "i32"), ty(out)),
                  {ty(out)}, {{0, 0}});  // a copy: exact
}

inline Case embeddingGrad(const Shape& idx, int64_t v, int64_t c) {
  Shape grad = idx;
  grad.push_back(c);
  // Row v is an f32 sum, in index order, of the k rows of dout whose index is v: at most
  // k u sum |terms|. Magnitude: k sum |terms| (k itself is the scatter of a tensor of ones).
  Case k = makeCase(fmt::format("embedding_grad_{}_{}x{}", nameOf(idx), v, c),
                    {{idx, 0, static_cast<double>(v), true}, {grad}},
                    fmt::format("%r = tessel.embedding_grad %a0, %a1 : ({}, {}) -> {}",
                                ty(idx, "i32"), ty(grad), ty({v, c})),
                    {ty({v, c})}, {{0, kU, kMagnitude}});
  k.magnitude = [v](const std::vector<ref::Tensor>& in) {
    ref::Tensor count = ref::embeddingBackward(in[0], ref::Tensor::filled(in[1].shape, 1.0), v);
    return std::vector<ref::Tensor>{
        ref::mul(count, ref::embeddingBackward(in[0], absOf(in[1]), v))};
  };
  return k;
}

inline Case softmaxGrad(const Shape& s) {
  int64_t c = s.back();
  // dot = sum_j dout_j out_j: C u sum_j |dout_j out_j|; then out_i (dout_i - dot): 2 more
  // roundings. Magnitude: |out_i| (sum_j |dout_j out_j| + |dout_i|).
  Case k = makeCase(fmt::format("softmax_grad_{}", nameOf(s)), {{s, 0, 1}, {s}},
                    fmt::format("%r = tessel.softmax_grad %a0, %a1 : {}", ty(s)), {ty(s)},
                    {{0, (c + 4) * kU, kMagnitude}});
  k.magnitude = [](const std::vector<ref::Tensor>& in) {
    ref::Tensor y = absOf(in[0]), dy = absOf(in[1]);
    int64_t last = y.rank() - 1;
    ref::Tensor dot = ref::broadcast(ref::reduceSum(ref::mul(y, dy), {last}), y.shape, {last});
    return std::vector<ref::Tensor>{ref::mul(y, ref::add(dot, dy))};
  };
  return k;
}

inline Case layerNormGrad(const Shape& s) {
  int64_t c = s.back(), n = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) n *= s[i];
  // dinp: the statistics and the two row means are sums of C terms (C u relative each), of
  // values bounded by max|dinp| / rstd: 4 (C + 8) u of max|dinp|. dgamma, dbeta: f32 sums
  // over chunks of at most 32 rows (then double), of terms dout * xhat each carrying xhat's
  // (C + 8) u: (min(N, 32) + C + 8) u sum |dout xhat|, and (min(N, 32) + 1) u sum |dout|.
  int64_t chunk = std::min<int64_t>(n, 32);
  Case k = makeCase(fmt::format("layer_norm_grad_{}", nameOf(s)),
                    {{s, -2, 2}, {{c}, 0.5, 1.5}, {s}},
                    fmt::format("%r:3 = tessel.layer_norm_grad %a0, %a1, %a2 : ({}, {}, {}) -> "
                                "({}, {}, {})",
                                ty(s), ty({c}), ty(s), ty(s), ty({c}), ty({c})),
                    {ty(s), ty({c}), ty({c})},
                    {{8 * kU, 4 * (c + 8) * kU, kMax},
                     {0, (chunk + c + 8) * kU, kMagnitude},
                     {0, (chunk + 1) * kU, kMagnitude}});
  k.magnitude = [c](const std::vector<ref::Tensor>& in) {
    std::vector<int64_t> rows;
    for (int64_t d = 0; d + 1 < in[0].rank(); ++d) rows.push_back(d);
    ref::Tensor xhat = ref::layerNorm(in[0], ref::Tensor::filled({c}, 1.0), ref::Tensor({c}),
                                      1e-5);
    ref::Tensor dy = absOf(in[2]);
    return std::vector<ref::Tensor>{in[0], ref::reduceSum(ref::mul(dy, absOf(xhat)), rows),
                                    ref::reduceSum(dy, rows)};
  };
  return k;
}

inline Case transpose(const Shape& in, const std::vector<int64_t>& perm, bool i32 = false) {
  Shape out;
  for (int64_t p : perm) out.push_back(in[p]);
  const char* e = i32 ? "i32" : "f32";
  return makeCase(fmt::format("transpose_{}_{}{}", nameOf(in), fmt::join(perm, ""),
                              i32 ? "_i32" : ""),
                  {{in, 0, 1000, i32}},
                  fmt::format("%r = tessel.transpose %a0 [{}] : {} -> {}", fmt::join(perm, ", "),
                              ty(in, e), ty(out, e)),
                  {ty(out, e)}, {{0, 0}});
}

inline Case split(const Shape& in, int64_t axis, int64_t parts, bool i32 = false) {
  Shape piece = in;
  piece[axis] /= parts;
  const char* e = i32 ? "i32" : "f32";
  std::vector<std::string> results(parts, ty(piece, e));
  return makeCase(fmt::format("split_{}_{}_{}{}", nameOf(in), axis, parts, i32 ? "_i32" : ""),
                  {{in, 0, 1000, i32}},
                  fmt::format("%r{} = tessel.split %a0 along {} : {} -> {}",
                              parts > 1 ? fmt::format(":{}", parts) : "", axis, ty(in, e),
                              fmt::join(results, ", ")),
                  results, {{0, 0}});
}

/// tessel.dynamic_slice: `rows` rows of `in` at an offset drawn from [-3, D - rows + 3], so
/// that some draws lie beyond either end and take the clamp (the reference interpreter clamps
/// as the op's description says). A copy: exact.
inline Case dynamicSlice(const Shape& in, int64_t rows) {
  Shape out = in;
  out[0] = rows;
  return makeCase(fmt::format("dynamic_slice_{}_{}", nameOf(in), rows),
                  {{in, 0, 1000}, {{}, -3, static_cast<double>(in[0] - rows + 4), true}},
                  fmt::format("%r = tessel.dynamic_slice %a0[%a1] : {} -> {}", ty(in), ty(out)), {ty(out)},
                  {{0, 0}});
}

inline Case concat(const std::vector<Shape>& ins, int64_t axis, bool i32 = false) {
  Shape out = ins[0];
  out[axis] = 0;
  std::vector<Arg> args;
  std::vector<std::string> names, types, parts;
  for (size_t i = 0; i < ins.size(); ++i) {
    out[axis] += ins[i][axis];
    args.push_back({ins[i], 0, 1000, i32});
    names.push_back(fmt::format("%a{}", i));
    types.push_back(ty(ins[i], i32 ? "i32" : "f32"));
    parts.push_back(nameOf(ins[i]));
  }
  return makeCase(fmt::format("concat_{}_{}{}", fmt::join(parts, "_"), axis, i32 ? "_i32" : ""),
                  args,
                  fmt::format("%r = tessel.concat {} along {} : ({}) -> {}",
                              fmt::join(names, ", "), axis, fmt::join(types, ", "),
                              ty(out, i32 ? "i32" : "f32")),
                  {ty(out, i32 ? "i32" : "f32")}, {{0, 0}});
}

inline Case reduce(const std::string& op, const Shape& in, const std::vector<int64_t>& dims) {
  Shape out;
  int64_t n = 1;
  for (size_t d = 0; d < in.size(); ++d) {
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end())
      out.push_back(in[d]);
    else
      n *= in[d];
  }
  // Summed in double (error n 2^-53 per unit term), then one f32 rounding: u relative.
  return makeCase(fmt::format("{}_{}_{}", op, nameOf(in), fmt::join(dims, "")), {{in}},
                  fmt::format("%r = tessel.{} %a0 [{}] : {} -> {}", op, fmt::join(dims, ", "),
                              ty(in), ty(out)),
                  {ty(out)}, {{2 * kU, n * 0x1p-50}});
}

inline Case broadcast(const Shape& in, const Shape& out, const std::vector<int64_t>& dims) {
  return makeCase(fmt::format("broadcast_{}_{}_{}", nameOf(in), nameOf(out), fmt::join(dims, "")),
                  {{in}},
                  fmt::format("%r = tessel.broadcast %a0 [{}] : {} -> {}", fmt::join(dims, ", "),
                              ty(in), ty(out)),
                  {ty(out)}, {{0, 0}});
}

inline Case constant(const Shape& s, double value) {
  // (float)value against the double: half an ulp.
  return makeCase(fmt::format("constant_{}", nameOf(s)), {},
                  fmt::format("%r = tessel.constant {:e} : {}", value, ty(s)), {ty(s)},
                  {{kU, 0}});
}

/// AdamW with lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.1, at `step`.
inline Case adamw(const Shape& s, bool decay, double step) {
  std::vector<Arg> args{{s}, {s}, {s}, {s, 0, 1}};
  for (double v : {1e-2, 0.9, 0.999, 1e-8, 0.1, step}) args.push_back({{}, v, v});
  // p * decay, the moments (3 roundings each) and the update (~6 roundings): 8 u of each
  // term; the moments' terms may cancel, hence the part scaled by the largest value.
  Tol tol{8 * kU, 8 * kU, kMax};
  return makeCase(fmt::format("adamw_{}{}_t{}", nameOf(s), decay ? "_decay" : "", step), args,
                  fmt::format("%r:3 = tessel.adamw %a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7, %a8, "
                              "%a9{} : {}",
                              decay ? " decay" : "", ty(s)),
                  {ty(s), ty(s), ty(s)}, {tol});
}

inline Case sgd(const Shape& s, bool decay, double momentum, double step) {
  std::vector<Arg> args{{s}, {s}, {s}};
  for (double v : {0.05, momentum, 0.1, step}) args.push_back({{}, v, v});
  Tol tol{4 * kU, 4 * kU, kMax};  // at most 3 roundings per value, terms may cancel
  return makeCase(fmt::format("sgd_{}{}_m{}_t{}", nameOf(s), decay ? "_decay" : "",
                              momentum > 0 ? 9 : 0, step),
                  args,
                  fmt::format("%r:2 = tessel.sgd %a0, %a1, %a2, %a3, %a4, %a5, %a6{} : {}",
                              decay ? " decay" : "", ty(s)),
                  {ty(s), ty(s)}, {tol});
}

inline Case globalNorm(const std::vector<Shape>& ins) {
  std::vector<Arg> args;
  std::vector<std::string> names, types, parts;
  for (size_t i = 0; i < ins.size(); ++i) {
    args.push_back({ins[i]});
    names.push_back(fmt::format("%a{}", i));
    types.push_back(ty(ins[i]));
    parts.push_back(nameOf(ins[i]));
  }
  // Squares are exact in double and summed there; sqrt and the final rounding: u relative.
  return makeCase(fmt::format("global_norm_{}", fmt::join(parts, "_")), args,
                  fmt::format("%r = tessel.global_norm {} : {}", fmt::join(names, ", "),
                              fmt::join(types, ", ")),
                  {"tensor<f32>"}, {{2 * kU, 0}});
}

inline Case clip(double norm, double maxNorm, const std::string& name) {
  // Computed in double from the same f32 inputs, then rounded: half an ulp.
  return makeCase("clip_coefficient_" + name, {{{}, norm, norm}, {{}, maxNorm, maxNorm}},
                  "%r = tessel.clip_coefficient %a0, %a1 : tensor<f32>", {"tensor<f32>"},
                  {{kU, 0}});
}

}  // namespace tessel::cpptest
