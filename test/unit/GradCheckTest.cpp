// Gradient checks of tessel-autodiff (passes/Autodiff.cpp) and of every VJP rule
// (compiler/VJP.cpp) against central finite differences of the forward function.
//
// Promise: every op with a VJP rule, on several shapes including sizes 1, 7 and 33, every
// flag combination it has (matmul transposes, batched and shared rhs, suffix broadcasting on
// either side, causal softmax), the decomposed causal attention, a whole small GPT, a tied
// weight, an unused split result and an unused parameter. Parameters are fresh N(0, 1)
// values each run and the loss carries a random cotangent (GradCheckUtil.h); every element
// of every parameter is compared (a random sample of 24 for parameters over 128 elements).
// Both sides run on the f64 reference interpreter: the gradient from @train_step (compiled
// with optimizer "none"), the finite difference from @forward.
//
// Tolerance. fd = sum_j R_j (y_j(x + h) - y_j(x - h)) / 2h over the checked outputs y_j,
// with h = 1e-6 max(1, |x|); the error is |autodiff - fd| / max(1, |fd|).
// - Truncation: h^2 |y'''| / 6 ~ 1e-12 for the O(1..10) third derivatives of these ops
//   (zero for the linear and bilinear ones).
// - Rounding dominates: each output that moves carries a few ulps (eps = 1.1e-16 times |y_j|,
//   or sqrt(K) eps |y_j| for a K-term sum such as a matmul row), and dividing by 2h = 2e-6
//   turns that into ~5e-11 |y_j| per ulp. Outputs that do not depend on x are bit-identical
//   in both evaluations and cancel exactly, which is why fd is formed output by output
//   rather than from the scalar loss (whose unchanged terms would re-round: measured 5x
//   worse). A 33-term matmul row (|y| ~ 6) gives ~2e-9 per output, and its ~33 moving
//   outputs add as a random walk: ~1e-8 absolute, a few 1e-9 relative to |fd| ~ 6.
// Measured over 2000 runs of this file (fresh seeds, 3.8e5 checked cases): op cases at most
// 6.5e-9 (matmul with K = 33 and layer_norm with C = 33; median 8e-11, linear ops ~1e-16),
// hence kTol = 5e-8, ~8x that. The GPT (N(0, 1) weights make its activations and attention
// scores O(10), amplified through ~60 ops) measured at most 1.4e-7 (median 1.7e-8; the
// error grows as h shrinks, so it is mostly rounding), hence kGptTol = 1e-6. A real bug (a
// wrong sign, a missing term or transpose, a dropped attribute) is an O(1e-3 .. 1) error.
#include "test/unit/GradCheckUtil.h"

#include "examples/gpt/model.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace gradcheck;
using tessel::Shape;
using tessel::Tensor;

constexpr double kTol = 5e-8;     // relative to max(1, |fd|); see the file comment
constexpr double kGptTol = 1e-6;  // the same for the whole GPT; see the file comment

// The harness itself: a gradient off by 10 kTol is reported, so a passing check means
// something. f(x) = sum_j w_j x_j^2 has the gradient 2 w x.
TEST(GradCheck, HarnessCatchesAWrongGradient) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  Params at{{"x", rng.tensor({7})}};
  ref::Tensor w = rng.tensor({7}), good({7});
  for (int64_t j = 0; j < 7; ++j) good.data[j] = 2.0 * w.data[j] * at["x"].data[j];
  Probe probe{[](const Params& p) {
                std::vector<double> v = p.at("x").data;
                for (double& x : v) x *= x;
                return v;
              },
              w.data};
  compareWithFiniteDifferences(at, {"x"}, {good}, probe, kTol, rng);
  ref::Tensor bad = good;
  bad.data[3] += 10 * kTol * std::max(1.0, std::abs(good.data[3]));
  EXPECT_NONFATAL_FAILURE(compareWithFiniteDifferences(at, {"x"}, {bad}, probe, kTol, rng),
                          "d loss / d x[3]");
}

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- matmul --------------------------------------------------------------------------------

/// The stored shape of a logical [rows, cols] matrix operand with `batch` leading dims.
Shape operand(const Shape& batch, int64_t rows, int64_t cols, bool transposed) {
  return concat(batch, transposed ? Shape{cols, rows} : Shape{rows, cols});
}

/// C = op(A) op(B) with A, B parameters; lhsBatch / rhsBatch are their leading dimensions.
void checkMatmul(Rng& rng, const Shape& lhsBatch, const Shape& rhsBatch, int64_t m, int64_t k,
                 int64_t n) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      GradCase c(rng);
      Tensor a = c.param("a", operand(lhsBatch, m, k, ta));
      Tensor b = c.param("b", operand(rhsBatch, k, n, tb));
      c.setLoss({tessel::matmul(a, b, {.transpose_lhs = ta, .transpose_rhs = tb})});
      c.check("matmul " + str(a.shape()) + (ta ? "^T" : "") + " x " + str(b.shape()) +
                  (tb ? "^T" : ""),
              kTol);
    }
}

TEST(GradCheck, MatmulRank2AllTransposes) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [m, k, n] : {std::tuple{1, 1, 1}, {7, 33, 1}, {1, 7, 33}, {33, 1, 7}, {3, 7, 5}})
    checkMatmul(rng, {}, {}, m, k, n);
}

TEST(GradCheck, MatmulBatchedRhs) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  checkMatmul(rng, {1}, {1}, 7, 1, 33);
  checkMatmul(rng, {2}, {2}, 3, 7, 5);
  checkMatmul(rng, {2, 3}, {2, 3}, 7, 4, 1);
}

TEST(GradCheck, MatmulSharedRank2RhsWithBatchedLhs) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  checkMatmul(rng, {1}, {}, 7, 33, 1);
  checkMatmul(rng, {3}, {}, 7, 5, 4);
  checkMatmul(rng, {2, 3}, {}, 1, 7, 33);
}

// ---- elementwise ---------------------------------------------------------------------------

enum class Binary { Add, Sub, Mul };

Tensor apply(Binary op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
  }
  return {};
}

const char* name(Binary op) { return op == Binary::Add ? "add" : op == Binary::Sub ? "sub" : "mul"; }

void checkBinary(Rng& rng, Binary op, const Shape& lhs, const Shape& rhs) {
  GradCase c(rng);
  Tensor a = c.param("lhs", lhs), b = c.param("rhs", rhs);
  c.setLoss({apply(op, a, b)});
  c.check(std::string(name(op)) + " " + str(lhs) + ", " + str(rhs), kTol);
}

TEST(GradCheck, ElementwiseEqualShapes) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul})
    for (Shape s : {Shape{1}, Shape{7}, Shape{33}, Shape{3, 7}, Shape{2, 1, 7}})
      checkBinary(rng, op, s, s);
}

// The shorter operand (a parameter) is broadcast along the leading dimensions; its gradient
// is a reduce_sum over them. Both sides: the shorter one as rhs and as lhs.
TEST(GradCheck, ElementwiseSuffixBroadcast) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<std::pair<Shape, Shape>> pairs{{{2, 3, 7}, {7}},  {{2, 3, 7}, {3, 7}},
                                             {{33, 1}, {1}},    {{5, 33}, {33}},
                                             {{7, 1, 3}, {1, 3}}, {{4}, {}}};
  for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul})
    for (auto& [longer, shorter] : pairs) {
      checkBinary(rng, op, longer, shorter);
      checkBinary(rng, op, shorter, longer);
    }
}

TEST(GradCheck, Scale) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (double factor : {-1.7, 0.125, 3.0})
    for (Shape s : {Shape{1}, Shape{7}, Shape{3, 33}}) {
      GradCase c(rng);
      Tensor x = c.param("x", s);
      c.setLoss({tessel::scale(x, factor)});
      c.check("scale " + str(s) + " by " + std::to_string(factor), kTol);
    }
}

TEST(GradCheck, Gelu) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  checkActivation(rng, "gelu", [](const Tensor& x) { return tessel::gelu(x); }, kTol);
}

// relu has a kink at 0: keep every input at least 0.1 = 1e5 h away from it, so neither
// finite-difference point crosses it.
TEST(GradCheck, ReluAwayFromZero) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Shape s : {Shape{1}, Shape{7}, Shape{33}, Shape{3, 33}}) {
    GradCase c(rng);
    Tensor x = c.param("x", s);
    c.adjust("x", [](ref::Tensor& t) {
      for (double& v : t.data) v += v >= 0.0 ? 0.1 : -0.1;
    });
    c.setLoss({tessel::relu(x)});
    c.check("relu " + str(s), kTol);
  }
}

// ---- normalisation, softmax, embedding, loss ----------------------------------------------

// C = 1 is the degenerate row (x - mean = 0 exactly, so y = beta and dx = dgamma = 0).
TEST(GradCheck, LayerNorm) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Shape rows : {Shape{1}, Shape{3}, Shape{2, 3}})
    for (int64_t channels : {1, 7, 33}) {
      GradCase c(rng);
      Shape s = concat(rows, {channels});
      Tensor x = c.param("x", s), g = c.param("gamma", {channels}), b = c.param("beta", {channels});
      c.setLoss({tessel::layer_norm(x, g, b)});
      c.check("layer_norm " + str(s), kTol);
    }
}

// A large epsilon changes every gradient, so this fails if the VJP drops the attribute.
TEST(GradCheck, LayerNormKeepsItsEpsilon) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  GradCase c(rng);
  Tensor x = c.param("x", {3, 7}), g = c.param("gamma", {7}), b = c.param("beta", {7});
  c.setLoss({tessel::layer_norm(x, g, b, /*eps=*/0.5)});
  c.check("layer_norm 3x7 eps 0.5", kTol);
}

TEST(GradCheck, Softmax) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Shape s : {Shape{1}, Shape{7}, Shape{33}, Shape{3, 33}, Shape{2, 3, 7}}) {
    GradCase c(rng);
    Tensor x = c.param("x", s);
    c.setLoss({tessel::softmax(x)});
    c.check("softmax " + str(s), kTol);
  }
}

// Masked entries get exactly zero gradient; the finite difference agrees because they do
// not reach the output at all.
TEST(GradCheck, SoftmaxCausal) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Shape s : {Shape{1, 1}, Shape{7, 7}, Shape{2, 3, 7, 7}, Shape{33, 33}}) {
    GradCase c(rng);
    Tensor x = c.param("x", s);
    c.setLoss({tessel::softmax(x, /*causal=*/true)});
    c.check("softmax causal " + str(s), kTol);
    const ref::Tensor& g = c.gradients().at(0);
    int64_t t = s.back();
    for (int64_t e = 0; e < g.numel(); ++e) {
      if (e % t > (e / t) % t) {
        EXPECT_EQ(g.data[e], 0.0) << "masked entry " << e;
      }
    }
  }
}

// Repeated indices: the rows they select accumulate every use.
TEST(GradCheck, EmbeddingRepeatedIndices) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [vocab, channels, indices] :
       {std::tuple{1, 7, Shape{3}}, {7, 1, Shape{3, 5}}, {33, 7, Shape{2, 33}}, {7, 33, Shape{11}}}) {
    GradCase c(rng);
    Tensor table = c.param("table", {vocab, channels});
    Tensor ids = c.randomIndices(indices, vocab);
    c.setLoss({tessel::embedding(table, ids)});
    c.check("embedding " + str({vocab, channels}) + " at " + str(indices), kTol);
  }
}

// The loss is a scalar, so its cotangent is a scalar R.
TEST(GradCheck, CrossEntropy) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Shape s : {Shape{1}, Shape{7}, Shape{5, 1}, Shape{3, 7}, Shape{2, 3, 33}}) {
    GradCase c(rng);
    Tensor logits = c.param("logits", s);
    Shape tokens(s.begin(), s.end() - 1);
    Tensor targets = c.randomIndices(tokens, s.back());
    c.setLoss({tessel::cross_entropy(logits, targets)});
    c.check("cross_entropy " + str(s), kTol);
  }
}

// ---- shapes and reductions -----------------------------------------------------------------

TEST(GradCheck, Reshape) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [from, to] : {std::pair{Shape{2, 3, 7}, Shape{7, 6}}, {Shape{33}, Shape{3, 11}},
                          {Shape{1}, Shape{1, 1}}, {Shape{7, 33}, Shape{231}}}) {
    GradCase c(rng);
    Tensor x = c.param("x", from);
    c.setLoss({tessel::gelu(tessel::reshape(x, to))});
    c.check("reshape " + str(from) + " -> " + str(to), kTol);
  }
}

TEST(GradCheck, Transpose) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [shape, perm] : {std::pair{Shape{2, 3, 7}, Shape{2, 0, 1}},
                             {Shape{7, 33}, Shape{1, 0}},
                             {Shape{2, 1, 3, 7}, Shape{0, 2, 1, 3}},
                             {Shape{3, 5, 7}, Shape{1, 2, 0}},
                             {Shape{1}, Shape{0}}}) {
    GradCase c(rng);
    Tensor x = c.param("x", shape);
    c.setLoss({tessel::transpose(x, perm)});
    c.check("transpose " + str(shape) + " by " + str(perm), kTol);
  }
}

TEST(GradCheck, Split) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [shape, axis, parts] : {std::tuple{Shape{6, 7}, 0, 3}, {Shape{2, 33, 3}, 1, 3},
                                    {Shape{7}, 0, 7}, {Shape{3, 1}, 1, 1}}) {
    GradCase c(rng);
    Tensor x = c.param("x", shape);
    c.setLoss(tessel::split(x, axis, parts));
    c.check("split " + str(shape) + " along " + std::to_string(axis) + " into " +
                std::to_string(parts),
            kTol);
  }
}

// The middle of three parts does not reach the loss: the split's VJP fills it with an
// explicit zero, so the gradient there is exactly 0.
TEST(GradCheck, SplitWithUnusedResult) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [shape, axis] : {std::pair{Shape{3, 7}, 0}, {Shape{2, 33}, 1}, {Shape{1, 3}, 1}}) {
    GradCase c(rng);
    Tensor x = c.param("x", shape);
    std::vector<Tensor> p = tessel::split(x, axis, 3);
    c.setLoss({p[0], p[2]});
    c.check("split " + str(shape) + " along " + std::to_string(axis) + ", middle unused", kTol);
    const ref::Tensor& g = c.gradients().at(0);
    int64_t third = shape[axis] / 3, zeros = 0;
    for (int64_t e = 0; e < g.numel(); ++e) {
      int64_t coordinate = axis == 0 ? e / shape[1] : e % shape[1];
      if (coordinate / third != 1) continue;
      EXPECT_EQ(g.data[e], 0.0) << "element " << e << " lies in the unused part";
      ++zeros;
    }
    EXPECT_EQ(zeros, g.numel() / 3);
  }
}

TEST(GradCheck, ConcatEqualParts) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [part, axis, count] : {std::tuple{Shape{2, 7}, 0, 3}, {Shape{3, 1, 5}, 1, 2},
                                   {Shape{33}, 0, 3}, {Shape{1}, 0, 1}}) {
    GradCase c(rng);
    std::vector<Tensor> xs;
    for (int i = 0; i < count; ++i) xs.push_back(c.param("x" + std::to_string(i), part));
    c.setLoss({tessel::concat(xs, axis)});
    c.check("concat " + std::to_string(count) + " x " + str(part) + " along " +
                std::to_string(axis),
            kTol);
  }
}

/// reduce_sum or reduce_mean of a parameter; a gelu after it makes the cotangent that the
/// reduction's VJP broadcasts back depend on the forward values.
void checkReduce(Rng& rng, bool mean) {
  for (auto [shape, dims] : {std::pair{Shape{2, 3, 7}, Shape{0}}, {Shape{2, 3, 7}, Shape{1}},
                             {Shape{2, 3, 7}, Shape{2}}, {Shape{2, 3, 7}, Shape{0, 2}},
                             {Shape{2, 3, 7}, Shape{2, 0}}, {Shape{2, 3, 7}, Shape{0, 1, 2}},
                             {Shape{33}, Shape{0}}, {Shape{1, 7}, Shape{0}}}) {
    GradCase c(rng);
    Tensor x = c.param("x", shape);
    Tensor y = mean ? tessel::reduce_mean(x, dims) : tessel::reduce_sum(x, dims);
    c.setLoss({tessel::gelu(y)});
    c.check(std::string(mean ? "reduce_mean " : "reduce_sum ") + str(shape) + " over " +
                str(dims),
            kTol);
  }
}

TEST(GradCheck, ReduceSum) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  checkReduce(rng, /*mean=*/false);
}

TEST(GradCheck, ReduceMean) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  checkReduce(rng, /*mean=*/true);
}

// The DSL has no broadcast op; the reductions' VJPs create it. Here a reduction is followed
// by a suffix-broadcast sub (centering), so the broadcast receives a cotangent that is
// itself a sum over the broadcast dimension.
TEST(GradCheck, BroadcastViaReduceThenSub) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (Shape s : {Shape{7, 33}, Shape{1, 7}, Shape{2, 3, 7}}) {
    GradCase c(rng);
    Tensor x = c.param("x", s);
    c.setLoss({tessel::gelu(x - tessel::reduce_mean(x, {0})), x * tessel::reduce_sum(x, {0})});
    c.check("x - reduce_mean(x) " + str(s), kTol);
  }
}

// ---- composites ----------------------------------------------------------------------------

// causal_attention through its fused VJP (causal_attention_grad, the pipeline's default) and
// decomposed into primitives before autodiff (tessel-decompose-attention).
TEST(GradCheck, CausalAttention) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (bool decomposed : {false, true})
  for (auto [batch, seq, channels, heads] :
       {std::tuple{1, 1, 1, 1}, {2, 7, 6, 2}, {1, 33, 2, 1}, {2, 5, 12, 3}}) {
    GradCase c(rng);
    c.decomposeAttention = decomposed;
    Tensor qkv = c.param("qkv", {batch, seq, 3 * channels});
    c.setLoss({tessel::causal_attention(qkv, heads)});
    c.check(std::string(decomposed ? "decomposed " : "fused ") + "causal_attention " +
                str(qkv.shape()) + " heads " + std::to_string(heads),
            kTol);
  }
}

// A two-layer GPT with its tied LM head (wte is gathered and multiplied): the mean
// cross-entropy plus a random cotangent on the logits.
TEST(GradCheck, SmallGpt) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  gpt::Config cfg{.layers = 2, .channels = 8, .heads = 2, .seq = 5, .vocab = 11};
  GradCase<gpt::GPT> c(rng, cfg);
  const int64_t batch = 2;
  Tensor tokens = c.randomIndices({batch, cfg.seq}, cfg.vocab);
  Tensor targets = c.randomIndices({batch, cfg.seq}, cfg.vocab);
  Tensor logits = c.model().logits(tokens);
  c.setLoss({logits}, {tessel::cross_entropy(logits, targets)});
  c.check("gpt L=2 C=8 NH=2 T=5 V=11 B=2", kGptTol);
}

// The same parameter used several times (in a matmul, as both operands of a mul and of a
// matmul, twice in one concat): its gradient is the sum over the uses.
TEST(GradCheck, TiedWeight) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [rows, cols] : {std::pair{7, 5}, {1, 1}, {33, 3}}) {
    GradCase c(rng);
    Tensor w = c.param("w", {rows, cols});
    Tensor x = c.input({3, cols});
    c.setLoss({tessel::matmul(x, w, {.transpose_rhs = true}), w * w,
               tessel::matmul(w, w, {.transpose_rhs = true}), tessel::concat({w, w}, 0)});
    c.check("tied " + str({rows, cols}), kTol);
  }
}

// ---- parameters the loss does not reach ----------------------------------------------------

// One parameter is never used and one feeds only a second output: both get an exactly
// zero gradient, and compile() prints a remark at each declaration. The model has its own
// name, so the pipeline differentiates @unused_demo rather than @forward.
TEST(GradCheck, ParameterThatDoesNotAffectTheLoss) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  GradCase c(rng, "unused_demo");
  Tensor used = c.param("used", {3, 7});
  const int unusedLine = __LINE__ + 1;
  Tensor unused = c.param("unused", {7});
  const int sideLine = __LINE__ + 1;
  Tensor side = c.param("side", {3, 7});
  c.model().add_output("side_output", tessel::gelu(side));
  c.setLoss({tessel::gelu(used)});
  testing::internal::CaptureStderr();
  const tessel::Program& program = c.compile();
  std::string err = testing::internal::GetCapturedStderr();
  for (auto [name, line] : {std::pair{"unused", unusedLine}, {"side", sideLine}}) {
    // "<this file>:<line>:<col>: remark: parameter '<name>' does not affect the loss; ..."
    std::string where = std::string(__FILE__) + ":" + std::to_string(line) + ":";
    std::string what = std::string("remark: parameter '") + name +
                       "' does not affect the loss; its gradient is zero";
    bool found = false;
    std::istringstream lines(err);
    for (std::string l; std::getline(lines, l);)
      found |= l.rfind(where, 0) == 0 && l.find(what) != std::string::npos;
    EXPECT_TRUE(found) << "no remark for '" << name << "' at line " << line << " in:\n" << err;
  }
  EXPECT_EQ(err.find("'used'"), std::string::npos) << err;

  c.check("unused and side-output-only parameters", kTol);
  ASSERT_EQ(program.state().size(), 3u);
  for (size_t i = 0; i < program.state().size(); ++i) {
    if (program.state()[i].name == "used") continue;
    for (double g : c.gradients().at(i).data)
      EXPECT_EQ(g, 0.0) << "gradient of '" << program.state()[i].name << "'";
  }
}

// The one op the DSL can put on the loss path without a VJP rule: a concat of unequal
// parts (its VJP would be a split into unequal parts, which split does not do). compile()
// throws a ModelError at the concat's line rather than returning a wrong gradient.
TEST(GradCheck, OpWithoutVjpOnTheLossPathIsAModelError) {
  GradModel m;
  Tensor a = m.param("a", {2, 3}), b = m.param("b", {2, 5});
  const int line = __LINE__ + 1;
  Tensor y = tessel::concat({a, b}, 1);
  m.set_loss(tessel::reduce_sum(y, {0, 1}));
  try {
    m.compile({.optimizer = "none"});
    ADD_FAILURE() << "expected a tessel::ModelError";
  } catch (const tessel::ModelError& e) {
    EXPECT_EQ(e.diagnostic().file, __FILE__);
    EXPECT_EQ(e.diagnostic().line, line);
    EXPECT_NE(e.diagnostic().message.find("'tessel.concat' op has no VJP rule for inputs of "
                                          "unequal sizes along axis 1"),
              std::string::npos)
        << e.what();
  }
}

// The loss is a scalar parameter itself: its gradient is the seed, exactly 1.
TEST(GradCheck, LossIsAParameter) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  GradCase c(rng);
  c.setLoss({}, {c.param("p", {})});
  c.check("loss = p", kTol);
  EXPECT_EQ(c.gradients().at(0).data, std::vector<double>{1.0});
}

}  // namespace
