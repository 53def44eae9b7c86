// The C++ kernel emitter (codegen/CppEmitter.h) against the f64 reference kernels: every op
// it supports, at sizes 1, 7 and 33, with broadcasting variants and one shape per op large
// enough to take the OpenMP path. All kernels are compiled into one library, once.
//
// Tolerances: u = 2^-24 (f32 unit roundoff). Each case's tolerance is the error bound of its
// f32 algorithm, stated next to it: k roundings give k u relative; a float sum of n terms
// of magnitude S errs by at most n u S; the exp of the preamble errs by 1.5 u (measured),
// plus u |x| for the rounding of its argument x. Copies must be exact.
#include "test/unit/CppEmitterTestUtil.h"

#include <dlfcn.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

namespace tessel::cpptest {
namespace {

// ---- case builders --------------------------------------------------------------------------

Case binary(const std::string& op, const Shape& a, const Shape& b) {
  Shape r = a.size() >= b.size() ? a : b;
  // One f32 rounding of the exact result, against f64: at most u relative (2u for slack
  // against the reference's own rounding).
  return makeCase(fmt::format("{}_{}_{}", op, nameOf(a), nameOf(b)), {{a}, {b}},
                  fmt::format("%r = tessel.{} %a0, %a1 : ({}, {}) -> {}", op, ty(a), ty(b), ty(r)),
                  {ty(r)}, {{2 * kU, 0}});
}

Case unary(const std::string& op, const Shape& s, double range, Tol tol,
           const std::string& attr = "") {
  return makeCase(fmt::format("{}_{}", op, nameOf(s)), {{s, -range, range}},
                  fmt::format("%r = tessel.{} %a0{} : {}", op, attr, ty(s)), {ty(s)}, {tol});
}

Case unaryGrad(const std::string& op, const Shape& s, double range, Tol tol) {
  return makeCase(fmt::format("{}_{}", op, nameOf(s)), {{s, -range, range}, {s}},
                  fmt::format("%r = tessel.{} %a0, %a1 : {}", op, ty(s)), {ty(s)}, {tol});
}

// gelu and its grad: exp (1.5 u) of an argument z = 2 sqrt(2/pi) (x + 0.044715 x^3) that
// carries ~4 roundings, i.e. 4 |z| u in exp(-z), and ~6 more roundings. Where |z| is large
// the value is tiny (|gelu| <= |x| e^-|z|), so 32 u relative plus 32 u absolute (inputs are
// O(1..10)) covers the whole range; gelu' also crosses 0, hence the absolute part.
const Tol kGeluTol{32 * kU, 32 * kU};

Case layerNorm(const Shape& s, double lo = -2, double hi = 2, double eps = 1e-5) {
  int64_t c = s.back();
  // The row statistics are sums of C terms (mean, variance): at most C u relative error in
  // rstd and in x - mean, times |xhat * gamma| <= max|out|, plus ~6 roundings.
  return makeCase(fmt::format("layer_norm_{}{}", nameOf(s), lo > 50 ? "_offset" : ""),
                  {{s, lo, hi}, {{c}, 0.5, 1.5}, {{c}, -1, 1}},
                  fmt::format("%r = tessel.layer_norm %a0, %a1, %a2 {{epsilon = {:e} : f64}} : "
                              "({}, {}, {}) -> {}",
                              eps, ty(s), ty({c}), ty({c}), ty(s)),
                  {ty(s)}, {{8 * kU, (c + 8) * kU, true}});
}

Case softmax(const Shape& s, bool causal) {
  int64_t l = s.back();
  // Terms exp(x - max) with |x - max| <= 10: 1.5 u + 10 u each; their sum of L positive
  // terms: L u; the division: u. Every term is positive, so the bound is relative.
  return makeCase(fmt::format("softmax{}_{}", causal ? "_causal" : "", nameOf(s)), {{s, -5, 5}},
                  fmt::format("%r = tessel.softmax %a0{} : {}", causal ? " causal" : "", ty(s)),
                  {ty(s)}, {{(l + 16) * kU, 0}});
}

Case crossEntropy(const Shape& logits) {
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

Case crossEntropyGrad(const Shape& logits) {
  int64_t v = logits.back();
  Shape t(logits.begin(), logits.end() - 1);
  // dloss / N * (p - onehot): p as in softmax ((V + 16) u relative) and the target's
  // p - 1 with an absolute error of a few u times dloss / N <= max|dlogits|.
  return makeCase(fmt::format("cross_entropy_grad_{}", nameOf(logits)),
                  {{logits, -5, 5}, {t, 0, static_cast<double>(v), true}, {{}, 0.5, 2}},
                  fmt::format("%r = tessel.cross_entropy_grad %a0, %a1, %a2 : ({}, {}, "
                              "tensor<f32>) -> {}",
                              ty(logits), ty(t, "i32"), ty(logits)),
                  {ty(logits)}, {{(v + 16) * kU, 8 * kU, true}});
}

Case embedding(const Shape& table, const Shape& idx) {
  Shape out = idx;
  out.push_back(table[1]);
  return makeCase(fmt::format("embedding_{}_{}", nameOf(table), nameOf(idx)),
                  {{table}, {idx, 0, static_cast<double>(table[0]), true}},
                  fmt::format("%r = tessel.embedding %a0, %a1 : ({}, {}) -> {}", ty(table),
                              ty(idx, "i32"), ty(out)),
                  {ty(out)}, {{0, 0}});  // a copy: exact
}

Case embeddingGrad(const Shape& idx, int64_t v, int64_t c) {
  Shape grad = idx;
  grad.push_back(c);
  // Each row sums at most N terms in f32 (in index order, like the reference), |terms| <= 1.
  int64_t n = 1;
  for (int64_t d : idx) n *= d;
  return makeCase(fmt::format("embedding_grad_{}_{}x{}", nameOf(idx), v, c),
                  {{idx, 0, static_cast<double>(v), true}, {grad}},
                  fmt::format("%r = tessel.embedding_grad %a0, %a1 : ({}, {}) -> {}",
                              ty(idx, "i32"), ty(grad), ty({v, c})),
                  {ty({v, c})}, {{0, n * n * kU}});
}

Case softmaxGrad(const Shape& s) {
  int64_t c = s.back();
  // out in [0, 1], dout in [-1, 1]: the dot sums C terms of size <= 1 (error C^2 u), then
  // out * (dout - dot) adds 2 roundings of a value <= C + 1.
  return makeCase(fmt::format("softmax_grad_{}", nameOf(s)), {{s, 0, 1}, {s}},
                  fmt::format("%r = tessel.softmax_grad %a0, %a1 : {}", ty(s)), {ty(s)},
                  {{0, (c * c + 2 * c + 4) * kU}});
}

Case layerNormGrad(const Shape& s) {
  int64_t c = s.back(), n = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) n *= s[i];
  // dinp: the statistics and the two row means sum C terms (C u relative each) of values
  // bounded by max|dinp| / rstd * (1 + |xhat|): 4 (C + 8) u scaled. dgamma, dbeta: sums of
  // N terms of size <= |xhat| <= sqrt(C), each term also carrying xhat's (C + 8) u: the
  // bound n u sum|terms| <= (N + C + 8) u N sqrt(C).
  Tol dx{8 * kU, 4 * (c + 8) * kU, true};
  Tol dgb{8 * kU, (n + c + 8) * kU * n * std::sqrt(static_cast<double>(c)) + 1e-30};
  return makeCase(fmt::format("layer_norm_grad_{}", nameOf(s)),
                  {{s, -2, 2}, {{c}, 0.5, 1.5}, {s}},
                  fmt::format("%r:3 = tessel.layer_norm_grad %a0, %a1, %a2 : ({}, {}, {}) -> "
                              "({}, {}, {})",
                              ty(s), ty({c}), ty(s), ty(s), ty({c}), ty({c})),
                  {ty(s), ty({c}), ty({c})}, {dx, dgb, dgb});
}

Case transpose(const Shape& in, const std::vector<int64_t>& perm, bool i32 = false) {
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

Case split(const Shape& in, int64_t axis, int64_t parts, bool i32 = false) {
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

Case concat(const std::vector<Shape>& ins, int64_t axis, bool i32 = false) {
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

Case reduce(const std::string& op, const Shape& in, const std::vector<int64_t>& dims) {
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

Case broadcast(const Shape& in, const Shape& out, const std::vector<int64_t>& dims) {
  return makeCase(fmt::format("broadcast_{}_{}_{}", nameOf(in), nameOf(out), fmt::join(dims, "")),
                  {{in}},
                  fmt::format("%r = tessel.broadcast %a0 [{}] : {} -> {}", fmt::join(dims, ", "),
                              ty(in), ty(out)),
                  {ty(out)}, {{0, 0}});
}

Case constant(const Shape& s, double value) {
  // (float)value against the double: half an ulp.
  return makeCase(fmt::format("constant_{}", nameOf(s)), {},
                  fmt::format("%r = tessel.constant {:e} : {}", value, ty(s)), {ty(s)},
                  {{kU, 0}});
}

/// AdamW with lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.1, at `step`.
Case adamw(const Shape& s, bool decay, double step) {
  std::vector<Arg> args{{s}, {s}, {s}, {s, 0, 1}};
  for (double v : {1e-2, 0.9, 0.999, 1e-8, 0.1, step}) args.push_back({{}, v, v});
  // p * decay, the moments (3 roundings each) and the update (~6 roundings): 8 u of each
  // term; the moments' terms may cancel, hence the part scaled by the largest value.
  Tol tol{8 * kU, 8 * kU, true};
  return makeCase(fmt::format("adamw_{}{}_t{}", nameOf(s), decay ? "_decay" : "", step), args,
                  fmt::format("%r:3 = tessel.adamw %a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7, %a8, "
                              "%a9{} : {}",
                              decay ? " decay" : "", ty(s)),
                  {ty(s), ty(s), ty(s)}, {tol});
}

Case sgd(const Shape& s, bool decay, double momentum, double step) {
  std::vector<Arg> args{{s}, {s}, {s}};
  for (double v : {0.05, momentum, 0.1, step}) args.push_back({{}, v, v});
  Tol tol{4 * kU, 4 * kU, true};  // at most 3 roundings per value, terms may cancel
  return makeCase(fmt::format("sgd_{}{}_m{}_t{}", nameOf(s), decay ? "_decay" : "",
                              momentum > 0 ? 9 : 0, step),
                  args,
                  fmt::format("%r:2 = tessel.sgd %a0, %a1, %a2, %a3, %a4, %a5, %a6{} : {}",
                              decay ? " decay" : "", ty(s)),
                  {ty(s), ty(s)}, {tol});
}

Case globalNorm(const std::vector<Shape>& ins) {
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

Case clip(double norm, double maxNorm, const std::string& name) {
  // Computed in double from the same f32 inputs, then rounded: half an ulp.
  return makeCase("clip_coefficient_" + name, {{{}, norm, norm}, {{}, maxNorm, maxNorm}},
                  "%r = tessel.clip_coefficient %a0, %a1 : tensor<f32>", {"tensor<f32>"},
                  {{kU, 0}});
}

// ---- the cases ------------------------------------------------------------------------------

std::vector<Case> allCases() {
  std::vector<Case> c;
  // Elementwise, with suffix broadcasting (b shorter, a shorter, a scalar, M = 1) and two
  // shapes over the parallel threshold (flat and broadcast).
  for (const char* op : {"add", "sub", "mul"}) {
    c.push_back(binary(op, {1}, {1}));
    c.push_back(binary(op, {2, 7, 33}, {2, 7, 33}));
    c.push_back(binary(op, {2, 7, 33}, {33}));
    c.push_back(binary(op, {33}, {7, 33}));
    c.push_back(binary(op, {7, 33}, {}));
    c.push_back(binary(op, {7, 1}, {1}));
    c.push_back(binary(op, {64, 33, 33}, {33, 33}));
  }
  c.push_back(binary("add", {300, 129}, {300, 129}));
  for (Shape s : {Shape{1}, Shape{7}, Shape{7, 33}, Shape{300, 129}}) {
    // x * (float)factor: the factor's rounding and the product's, 2 u; 1.7 is inexact.
    c.push_back(unary("scale", s, 2, {2 * kU, 0}, ", 1.7"));
    c.push_back(unary("gelu", s, s.size() > 1 ? 10 : 4, kGeluTol));
    c.push_back(unary("relu", s, 2, {0, 0}));  // exact
    c.push_back(unaryGrad("gelu_grad", s, s.size() > 1 ? 10 : 4, kGeluTol));
    c.push_back(unaryGrad("relu_grad", s, 2, {0, 0}));
  }
  c.push_back(constant({}, 1.0));
  c.push_back(constant({7, 33}, 0.1));
  c.push_back(constant({300, 129}, -2.5));
  // Row-wise ops: C = 1, 7, 33, 64, 256 and rows 1..4096.
  for (Shape s : {Shape{1, 1}, Shape{33, 1}, Shape{1, 7}, Shape{7, 33}, Shape{2, 7, 33},
                  Shape{64, 33, 64}})
    c.push_back(layerNorm(s));
  c.push_back(layerNorm({7, 33}, 100, 101));  // a large common offset: mean 100.5, std 0.29
  for (Shape s : {Shape{1}, Shape{7}, Shape{7, 33}, Shape{2, 3, 33}, Shape{64, 7, 256}})
    c.push_back(softmax(s, false));
  for (Shape s : {Shape{1, 1}, Shape{7, 7}, Shape{2, 3, 33, 33}, Shape{4, 4, 64, 64}})
    c.push_back(softmax(s, true));
  for (Shape s : {Shape{1, 1}, Shape{1, 7}, Shape{7, 33}, Shape{2, 7, 33}, Shape{64, 7, 256}}) {
    c.push_back(crossEntropy(s));
    c.push_back(crossEntropyGrad(s));
  }
  c.push_back(embedding({7, 33}, {1}));
  c.push_back(embedding({33, 7}, {2, 7}));
  c.push_back(embedding({1, 1}, {}));
  c.push_back(embedding({256, 64}, {8, 64}));
  for (Shape s : {Shape{1}, Shape{7}, Shape{7, 33}, Shape{2, 3, 33}, Shape{64, 33, 33}})
    c.push_back(softmaxGrad(s));
  for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 7, 33}, Shape{33, 7}, Shape{2048, 33},
                  Shape{64, 64, 33}})
    c.push_back(layerNormGrad(s));
  c.push_back(embeddingGrad({1}, 1, 7));
  c.push_back(embeddingGrad({2, 7}, 5, 33));  // many rows share an index
  c.push_back(embeddingGrad({7}, 33, 1));
  c.push_back(embeddingGrad({8, 64}, 256, 64));
  // Layout.
  c.push_back(transpose({7, 33}, {1, 0}));
  c.push_back(transpose({2, 7, 33}, {0, 2, 1}));
  c.push_back(transpose({2, 3, 7, 33}, {0, 2, 1, 3}));  // rows stay contiguous
  c.push_back(transpose({33, 7, 2}, {2, 0, 1}));
  c.push_back(transpose({1, 7, 1}, {2, 1, 0}));
  c.push_back(transpose({5, 1, 7}, {1, 0, 2}));
  c.push_back(transpose({7, 33}, {1, 0}, true));
  c.push_back(transpose({64, 33, 65}, {2, 1, 0}));
  c.push_back(split({7, 66}, 1, 2));
  c.push_back(split({33, 7}, 0, 3));
  c.push_back(split({2, 7, 99}, 2, 3));
  c.push_back(split({1}, 0, 1));
  c.push_back(split({8, 32}, 0, 2, true));
  c.push_back(split({64, 33, 96}, 2, 3));
  c.push_back(concat({{7, 1}, {7, 33}}, 1));
  c.push_back(concat({{2, 3, 7}, {2, 1, 7}, {2, 5, 7}}, 1));
  c.push_back(concat({{1}, {7}}, 0));
  c.push_back(concat({{4}, {3}}, 0, true));
  c.push_back(concat({{64, 33, 32}, {64, 33, 32}}, 2));
  for (const char* op : {"reduce_sum", "reduce_mean"}) {
    c.push_back(reduce(op, {2, 7, 33}, {0, 1}));  // bias gradient: inner dimension kept
    c.push_back(reduce(op, {2, 7, 33}, {2}));     // row sums: inner dimension reduced
    c.push_back(reduce(op, {2, 7, 33}, {2, 0}));
    c.push_back(reduce(op, {2, 7, 33}, {1}));
    c.push_back(reduce(op, {7, 33}, {0, 1}));
    c.push_back(reduce(op, {1, 7, 1}, {0}));
    c.push_back(reduce(op, {64, 64, 33}, {0, 1}));
    c.push_back(reduce(op, {300, 129}, {1}));
  }
  c.push_back(reduce("reduce_sum", {7, 33}, {}));
  c.push_back(reduce("reduce_sum", {33, 1, 7}, {1}));
  c.push_back(broadcast({33}, {2, 7, 33}, {0, 1}));
  c.push_back(broadcast({7}, {7, 33}, {1}));
  c.push_back(broadcast({2, 33}, {2, 7, 33}, {1}));
  c.push_back(broadcast({}, {7, 1}, {0, 1}));
  c.push_back(broadcast({1}, {1, 1}, {0}));
  c.push_back(broadcast({7, 33}, {7, 33}, {}));
  c.push_back(broadcast({64, 33}, {64, 7, 33, 5}, {1, 3}));
  // Optimizers.
  for (Shape s : {Shape{1}, Shape{7, 33}, Shape{300, 129}}) {
    c.push_back(adamw(s, true, 3));
    c.push_back(adamw(s, false, 1));
    c.push_back(sgd(s, true, 0.9, 1));
    c.push_back(sgd(s, false, 0.9, 5));
    c.push_back(sgd(s, true, 0.0, 2));  // no momentum: the buffer passes through
  }
  c.push_back(globalNorm({{1}}));
  c.push_back(globalNorm({{7, 33}, {33}}));
  c.push_back(globalNorm({{300, 129}, {64, 33}, {7}}));
  c.push_back(clip(5.0, 1.0, "clipped"));
  c.push_back(clip(0.5, 1.0, "unclipped"));
  c.push_back(clip(3.0, INFINITY, "disabled"));
  return c;
}

Suite& suite() {
  static Suite s(allCases());
  return s;
}

/// Checks every case whose op is one of `ops` (names without "tessel."); each must have one.
void checkOps(std::initializer_list<const char*> ops) {
  ref::testutil::Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const char* op : ops) {
    int count = 0;
    for (const Case& c : suite().cases())
      if (suite().opOf(c.name)->getName().getStringRef() == fmt::format("tessel.{}", op)) {
        checkCase(suite(), c, rng);
        ++count;
      }
    EXPECT_GT(count, 0) << "no case of tessel." << op;
  }
}

// ---- numerics against the reference ---------------------------------------------------------

TEST(CppEmitter, Binary) { checkOps({"add", "sub", "mul"}); }
TEST(CppEmitter, ScaleAndConstant) { checkOps({"scale", "constant"}); }
TEST(CppEmitter, Activations) { checkOps({"gelu", "relu", "gelu_grad", "relu_grad"}); }
TEST(CppEmitter, LayerNorm) { checkOps({"layer_norm"}); }
TEST(CppEmitter, Softmax) { checkOps({"softmax"}); }
TEST(CppEmitter, CrossEntropy) { checkOps({"cross_entropy"}); }
TEST(CppEmitter, Embedding) { checkOps({"embedding"}); }
TEST(CppEmitter, SoftmaxGrad) { checkOps({"softmax_grad"}); }
TEST(CppEmitter, LayerNormGrad) { checkOps({"layer_norm_grad"}); }
TEST(CppEmitter, EmbeddingGrad) { checkOps({"embedding_grad"}); }
TEST(CppEmitter, CrossEntropyGrad) { checkOps({"cross_entropy_grad"}); }
TEST(CppEmitter, Transpose) { checkOps({"transpose"}); }
TEST(CppEmitter, SplitAndConcat) { checkOps({"split", "concat"}); }
TEST(CppEmitter, Reductions) { checkOps({"reduce_sum", "reduce_mean"}); }
TEST(CppEmitter, Broadcast) { checkOps({"broadcast"}); }
TEST(CppEmitter, Optimizers) { checkOps({"adamw", "sgd"}); }
TEST(CppEmitter, GlobalNormAndClip) { checkOps({"global_norm", "clip_coefficient"}); }

// Extreme inputs: the gelu tails, where tanh(u) -> -1 and x^3 overflows f32.
TEST(CppEmitter, GeluAtExtremeInputs) {
  for (const char* name : {"gelu_7", "gelu_grad_7"}) {
    const Case& c = *std::find_if(suite().cases().begin(), suite().cases().end(),
                                  [&](const Case& k) { return k.name == name; });
    for (std::vector<double> x : {std::vector<double>{-INFINITY, -100, -10, 0, 10, 1e30, NAN},
                                  std::vector<double>{INFINITY, -1e30, -1, 1, 100, -3, 3}}) {
      std::vector<ref::Tensor> inputs{ref::Tensor({7}, x)};
      if (c.args.size() == 2) inputs.push_back(ref::Tensor::filled({7}, 0.5));
      checkCaseOn(suite(), c, inputs);
    }
  }
}

// ---- properties beyond the numerics ---------------------------------------------------------

TEST(CppEmitter, EveryOpHasCases) {
  std::set<std::string> seen;
  for (const Case& c : suite().cases()) seen.insert(suite().opOf(c.name)->getName().getStringRef().str());
  for (const char* op :
       {"add", "sub", "mul", "scale", "gelu", "relu", "layer_norm", "softmax", "embedding",
        "cross_entropy", "transpose", "split", "concat", "reduce_sum", "reduce_mean", "constant",
        "broadcast", "gelu_grad", "relu_grad", "softmax_grad", "layer_norm_grad",
        "embedding_grad", "cross_entropy_grad", "adamw", "sgd", "global_norm",
        "clip_coefficient"})
    EXPECT_TRUE(seen.count(fmt::format("tessel.{}", op))) << op;
}

/// omp_set_num_threads of the OpenMP runtime the kernels loaded (it is not linked here).
void (*setThreads())(int) {
  suite();
  void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  return gomp ? reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_set_num_threads")) : nullptr;
}

// The promise that replicated tensors stay bitwise identical: no kernel's result depends on
// how many threads run it. These are the kernels with cross-row sums, at parallel sizes.
TEST(CppEmitter, ResultsDoNotDependOnTheThreadCount) {
  auto set = setThreads();
  if (!set) GTEST_SKIP() << "the kernels' OpenMP runtime is not libgomp";
  ref::testutil::Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const char* name : {"layer_norm_grad_64x64x33", "layer_norm_grad_2048x33",
                           "reduce_sum_64x64x33_01", "reduce_mean_300x129_1",
                           "global_norm_300x129_64x33_7", "embedding_grad_8x64_256x64",
                           "cross_entropy_64x7x256", "softmax_causal_4x4x64x64"}) {
    SCOPED_TRACE(name);
    const Case& c = *std::find_if(suite().cases().begin(), suite().cases().end(),
                                  [&](const Case& k) { return k.name == name; });
    EXPECT_NE(emitCppKernel(suite().opOf(name), "k").find("#pragma omp parallel"),
              std::string::npos);
    std::vector<ref::Tensor> inputs = randomInputs(c, rng);
    set(1);
    std::vector<Buffer> one = runKernel(suite(), c, inputs);
    set(3);
    std::vector<Buffer> three = runKernel(suite(), c, inputs);
    set(0 + static_cast<int>(std::thread::hardware_concurrency()));
    for (size_t r = 0; r < one.size(); ++r)
      EXPECT_EQ(0, std::memcmp(one[r].f.data(), three[r].f.data(), one[r].f.size() * 4 - 4))
          << "result " << r;
  }
}

// Out-of-range indices never read out of bounds: NaN rows forward, skipped in the scatter.
TEST(CppEmitter, OutOfRangeIndicesAreVisibleNotFatal) {
  auto find = [](const std::string& name) -> const Case& {
    return *std::find_if(suite().cases().begin(), suite().cases().end(),
                         [&](const Case& k) { return k.name == name; });
  };
  ref::Tensor table = ref::Tensor::filled({33, 7}, 2.0);
  ref::Tensor idx({2, 7});
  idx.data[3] = 33;
  idx.data[5] = -1;
  std::vector<Buffer> e = runKernel(suite(), find("embedding_33x7_2x7"), {table, idx});
  for (int64_t n = 0; n < 14; ++n)
    EXPECT_EQ(std::isnan(e[0].f[n * 7]), n == 3 || n == 5) << n;
  EXPECT_EQ(e[0].f[0], 2.0f);

  ref::Tensor grad = ref::Tensor::filled({2, 7, 33}, 1.0);
  ref::Tensor small({2, 7});  // every index 0, except two out of [0, 5)
  small.data[0] = 5;
  small.data[1] = -3;
  std::vector<Buffer> g = runKernel(suite(), find("embedding_grad_2x7_5x33"), {small, grad});
  EXPECT_EQ(g[0].f[0], 12.0f);  // 14 rows, 2 skipped
  EXPECT_EQ(g[0].f[33], 0.0f);

  ref::Tensor logits = ref::Tensor::filled({7, 33}, 0.0), targets({7});
  targets.data[2] = 40;
  std::vector<Buffer> l = runKernel(suite(), find("cross_entropy_7x33"), {logits, targets});
  EXPECT_TRUE(std::isnan(l[0].f[0]));
}

TEST(CppEmitter, KernelTextNamesTheOpItsLocationAndShapes) {
  std::string src = emitCppKernel(suite().opOf("layer_norm_2x7x33"), "my_kernel");
  for (const char* needle :
       {"extern \"C\" void my_kernel(void** args)", "// tessel.layer_norm at loc(",
        "float* out = static_cast<float*>(args[0]);", "// out [B, T, C] = [2, 7, 33]",
        "const float* inp = static_cast<const float*>(args[1]);", "// gamma [C] = [33]",
        "constexpr int64_t C = 33;"})
    EXPECT_NE(src.find(needle), std::string::npos) << needle << " missing from\n" << src;
  std::string ce = emitCppKernel(suite().opOf("cross_entropy_grad_2x7x33"), "k");
  EXPECT_NE(ce.find("// targets [B, T] = [2, 7]"), std::string::npos) << ce;
  EXPECT_NE(ce.find("// dloss scalar"), std::string::npos) << ce;
}

TEST(CppEmitter, RejectsLibraryCallsAliasesAndBf16) {
  mlir::DialectRegistry registry;
  registerTesselDialects(registry);
  mlir::MLIRContext context(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
func.func @f(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>, %qkv: tensor<2x4x24xf32>) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<8x8xf32>
  %m = tessel.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = tessel.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %a = tessel.causal_attention %qkv heads 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %b = tessel.add %h, %h : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %g = tessel.gelu %h : tensor<4x8xbf16>
  tessel.assign "w", %w : tensor<8x8xf32>
  %ok = tessel.add %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}
)mlir",
                                                        &context);
  ASSERT_TRUE(module);
  std::vector<std::string> accepted;
  module->walk([&](mlir::Operation* op) {
    if (hasCppKernel(op)) accepted.push_back(op->getName().getStringRef().str());
  });
  EXPECT_EQ(accepted, std::vector<std::string>{"tessel.add"});
  module->walk([&](MatmulOp op) {
    EXPECT_THROW(emitCppKernel(op, "k"), std::invalid_argument);
  });
}

// ---- the host-compiler driver ---------------------------------------------------------------

std::string uniqueCacheDir(const char* what) {
  return ::testing::TempDir() +
         fmt::format("tessel_{}_{}_{}", what, getpid(), std::random_device{}());
}

TEST(HostCompiler, SecondBuildOfTheSameSourceIsACacheHit) {
  HostCompileOptions options;
  options.cacheDir = uniqueCacheDir("cache_hit");
  std::string source = "extern \"C\" int tessel_answer() { return 42; }\n";
  KernelLibrary first = buildKernelLibrary(source, options);
  EXPECT_TRUE(first.compiled());
  KernelLibrary second = buildKernelLibrary(source, options);
  EXPECT_FALSE(second.compiled());
  EXPECT_EQ(first.path(), second.path());
  EXPECT_EQ(reinterpret_cast<int (*)()>(second.symbol("tessel_answer"))(), 42);
  EXPECT_THROW(second.symbol("no_such_kernel"), HostCompileError);
  std::filesystem::remove_all(options.cacheDir);
}

TEST(HostCompiler, BrokenSourceRaisesTheCompilersMessage) {
  HostCompileOptions options;
  options.cacheDir = uniqueCacheDir("broken");
  try {
    buildKernelLibrary("extern \"C\" void broken() { int x = tessel_undeclared_name; }\n",
                       options);
    ADD_FAILURE() << "a broken source compiled";
  } catch (const HostCompileError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("tessel_undeclared_name"), std::string::npos) << message;
    EXPECT_NE(message.find("error"), std::string::npos) << message;
  }
  std::filesystem::remove_all(options.cacheDir);
}

}  // namespace
}  // namespace tessel::cpptest
