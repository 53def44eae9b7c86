// Tests for runtime/exec/GemmEpilogue: the CPU GEMM epilogue (bias, tanh-GELU with its
// pre-activation, residual, bias gradient) against f64 references (runtime/reference's gelu,
// double sums), its GELU against the generated kernels' tessel_gelu, and the
// Executor running a GEMM step with an epilogue end to end.
//
// Tolerances (u = 2^-24, the f32 unit roundoff):
//  - pre-activation: one f32 add, correctly rounded: |err| <= u |pre|.
//  - GELU from an f32 input x: z = 2u(x) carries ~4u relative error, exp(-z) turns it into
//    |z| 4u relative (plus tessel_exp's 1.5 ulp), and the division adds 1u: so
//    |err| <= (8 + 4 |z|) u |gelu(x)|, plus u |result| for adding the residual.
//  - bias gradient: a double sum of at most a few hundred terms (error ~ K 2^-53 sum |a|,
//    far below u) rounded once to f32: |err| <= u |sum| + 2^-40 sum |a|.
//  - bf16 outputs: the f32 value rounded once to bf16 (8 significant bits): half an ulp is
//    2^-8 relative, so |err| <= 2^-8 |ref| + the f32 bound above.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>
#include <vector>

#include "codegen/CppEmitter.h"
#include "codegen/HostCompiler.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/GemmEpilogue.h"
#include "runtime/numeric/BFloat16.h"
#include "runtime/reference/Reference.h"

namespace tessel::rt {
namespace {

constexpr double kU = 0x1p-24;

double refGelu(double x) { return ref::gelu(ref::Tensor({1}, {x})).data[0]; }

double geluBound(double x, double gelu) {
  const double z = 1.5957691216057308 * (x + 0.044715 * x * x * x);
  return (8.0 + 4.0 * std::fabs(z)) * kU * std::fabs(gelu) + 1e-37;
}

std::vector<float> uniform(int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

struct Shape {
  int64_t batch, m, n, k;
  bool transA;
};

class EpilogueShapes : public testing::TestWithParam<Shape> {};

// Bias + GELU with the pre-activation + residual on an f32 C, per batch (strideC > m n
// leaves a gap that must stay untouched), against f64.
TEST_P(EpilogueShapes, BiasGeluResidualMatchesF64) {
  const Shape s = GetParam();
  GemmStep g;
  g.batch = s.batch, g.m = s.m, g.n = s.n, g.k = s.k, g.transA = s.transA;
  g.strideC = s.m * s.n + 3;
  g.epilogue = GemmEpilogue{0, true, 1, 2, -1};
  const int64_t numelC = (s.batch - 1) * g.strideC + s.m * s.n;
  std::vector<float> c = uniform(numelC, -6.0f, 6.0f, 1), bias = uniform(s.n, -1.0f, 1.0f, 2),
                     res = uniform(numelC, -2.0f, 2.0f, 3), pre(static_cast<size_t>(numelC), 7.0f);
  const std::vector<float> c0 = c;
  GemmEpilogueOperands o;
  o.bias = bias.data(), o.preActivation = pre.data(), o.residual = res.data();
  applyGemmEpilogue(g, nullptr, false, c.data(), false, o);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        const size_t at = static_cast<size_t>(b * g.strideC + i * s.n + j);
        const double p = static_cast<double>(c0[at]) + bias[static_cast<size_t>(j)];
        ASSERT_LE(std::fabs(pre[at] - p), kU * std::fabs(p)) << "pre-activation " << at;
        const double x = pre[at];  // the activation's input is the stored f32 pre-activation
        const double gl = refGelu(x), want = gl + res[at];
        ASSERT_LE(std::fabs(c[at] - want), geluBound(x, gl) + kU * std::fabs(want)) << "output " << at;
      }
  for (int64_t b = 0; b + 1 < s.batch; ++b)  // the gap between batches is not written
    for (int64_t q = s.m * s.n; q < g.strideC; ++q) {
      EXPECT_EQ(c[static_cast<size_t>(b * g.strideC + q)], c0[static_cast<size_t>(b * g.strideC + q)]);
      EXPECT_EQ(pre[static_cast<size_t>(b * g.strideC + q)], 7.0f);
    }
}

// The bias gradient: row sums of op(A) over k and every batch, against a double sum.
TEST_P(EpilogueShapes, BiasGradientMatchesDoubleSum) {
  const Shape s = GetParam();
  GemmStep g;
  g.batch = s.batch, g.m = s.m, g.n = s.n, g.k = s.k, g.transA = s.transA;
  g.strideA = s.m * s.k + 5;
  g.epilogue.biasGradient = 0;
  const int64_t numelA = (s.batch - 1) * g.strideA + s.m * s.k;
  std::vector<float> a = uniform(numelA, -1.0f, 1.0f, 4), out(static_cast<size_t>(s.m), 9.0f);
  GemmEpilogueOperands o;
  o.biasGradient = out.data();
  applyGemmEpilogue(g, a.data(), false, nullptr, false, o);
  for (int64_t i = 0; i < s.m; ++i) {
    double sum = 0, mag = 0;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t q = 0; q < s.k; ++q) {
        const double v = a[static_cast<size_t>(b * g.strideA + (s.transA ? q * s.m + i : i * s.k + q))];
        sum += v, mag += std::fabs(v);
      }
    EXPECT_LE(std::fabs(out[static_cast<size_t>(i)] - sum), kU * std::fabs(sum) + 0x1p-40 * mag) << "row " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, EpilogueShapes,
                         testing::Values(Shape{1, 1, 1, 1, false}, Shape{3, 5, 7, 11, false},
                                         Shape{2, 37, 61, 13, true}, Shape{1, 130, 67, 9, true},
                                         Shape{2, 65, 17, 3, false}));

// bf16 C, bias and residual with an f32 pre-activation: each stored output rounded once.
TEST(GemmEpilogue, Bf16OutputsAreRoundedOnce) {
  GemmStep g;
  g.batch = 2, g.m = 9, g.n = 23, g.k = 4, g.strideC = 9 * 23;
  g.epilogue = GemmEpilogue{0, true, 1, 2, -1};
  const int64_t numel = 2 * 9 * 23;
  auto toBf16 = [](const std::vector<float>& v) {
    std::vector<uint16_t> out(v.size());
    numeric::floatToBF16(v.data(), out.data(), static_cast<int64_t>(v.size()));
    return out;
  };
  std::vector<uint16_t> c = toBf16(uniform(numel, -5.0f, 5.0f, 5)), bias = toBf16(uniform(23, -1.0f, 1.0f, 6)),
                        res = toBf16(uniform(numel, -1.0f, 1.0f, 7));
  const std::vector<uint16_t> c0 = c;
  std::vector<float> pre(static_cast<size_t>(numel));
  GemmEpilogueOperands o;
  o.bias = bias.data(), o.biasBF16 = true, o.preActivation = pre.data(), o.residual = res.data(), o.residualBF16 = true;
  applyGemmEpilogue(g, nullptr, false, c.data(), true, o);
  for (int64_t e = 0; e < numel; ++e) {
    const size_t at = static_cast<size_t>(e);
    const double p = static_cast<double>(numeric::floatFromBF16(c0[at])) + numeric::floatFromBF16(bias[at % 23]);
    ASSERT_LE(std::fabs(pre[at] - p), kU * std::fabs(p)) << e;
    const double gl = refGelu(pre[at]), want = gl + numeric::floatFromBF16(res[at]);
    ASSERT_LE(std::fabs(numeric::floatFromBF16(c[at]) - want),
              0x1p-8 * std::fabs(want) + geluBound(pre[at], gl) + kU * std::fabs(want))
        << e;
  }
}

TEST(GemmEpilogue, MissingBufferIsRefused) {
  GemmStep g;
  g.m = g.n = g.k = 2;
  g.location = "model.cpp:4:2";
  g.epilogue.bias = 3;
  std::vector<float> c(4);
  try {
    applyGemmEpilogue(g, nullptr, false, c.data(), false, {});
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bias"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.cpp:4:2"), std::string::npos) << e.what();
  }
}

// The epilogue's GELU against the generated gelu kernel's, compiled as kernels are
// (-O3 -march=native): the same operations, but the kernel compiler may contract a * b + c
// into FMAs where the CPU has them, and the runtime (built for the baseline ISA) cannot, so
// the two agree within the GELU bound of each against the exact value (twice geluBound),
// not always bit for bit (measured: 7.6e-6 relative at x = -9.67, where z = 2u is -80).
// Inputs: a sweep over [-12, 12] plus the tails and specials (z < -80, large x, +-0, +-inf,
// NaN), whose results must match exactly (0, x, NaN).
TEST(GemmEpilogue, GeluMatchesTheKernelsGelu) {
  std::vector<float> x;
  for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  for (float v : {-1e30f, -60.0f, -9.3f, -5.1f, 0.0f, -0.0f, 1e-30f, 9.0f, 40.0f, 1e20f, INFINITY, -INFINITY, NAN})
    x.push_back(v);
  const std::string source = cppKernelPreamble() + R"(
extern "C" void tessel_test_gelu(const float* x, float* y, long n) {
  for (long i = 0; i < n; ++i) y[i] = tessel_gelu(x[i]);
}
)";
  HostCompileOptions options;
  options.cacheDir = (std::filesystem::path(testing::TempDir()) / "tessel_epilogue_kernels").string();
  KernelLibrary lib = buildKernelLibrary(source, options);
  auto fn = reinterpret_cast<void (*)(const float*, float*, long)>(lib.symbol("tessel_test_gelu"));
  std::vector<float> want(x.size());
  fn(x.data(), want.data(), static_cast<long>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float got = epilogueGelu(x[i]);
    if (std::isnan(want[i]) || std::isinf(want[i]) || want[i] == 0.0f) {
      uint32_t gb, wb;
      std::memcpy(&gb, &got, 4), std::memcpy(&wb, &want[i], 4);
      EXPECT_TRUE(std::isnan(want[i]) ? std::isnan(got) : gb == wb) << "x = " << x[i] << ": " << got;
      continue;
    }
    ASSERT_LE(std::fabs(double(got) - want[i]), 2.0 * geluBound(x[i], want[i]))
        << "x = " << x[i] << ": " << got << " vs the kernel's " << want[i];
  }
}

// Y = gelu(X W^T + bias) + R with its pre-activation, then dW = Y^T X with the bias
// gradient (column sums of Y, standing for dY): one program with both epilogue kinds.
Program epilogueProgram(int64_t m, int64_t n, int64_t k) {
  auto buf = [](std::string name, std::vector<int64_t> shape, BufferKind kind) {
    Buffer b;
    b.name = std::move(name), b.shape = std::move(shape), b.kind = kind;
    if (kind == BufferKind::Parameter) b.init = "zeros";
    return b;
  };
  Program p;
  p.buffers = {buf("x", {m, k}, BufferKind::Input),        buf("w", {n, k}, BufferKind::Parameter),
               buf("bias", {n}, BufferKind::Parameter),    buf("r", {m, n}, BufferKind::Input),
               buf("y", {m, n}, BufferKind::State),        buf("pre", {m, n}, BufferKind::State),
               buf("dw", {n, k}, BufferKind::State),       buf("db", {n}, BufferKind::State)};
  GemmStep fwd{0, 1, 4, false, true, false, 1, m, n, k, 0, 0, 0, "model.cpp:1:1"};
  fwd.epilogue = GemmEpilogue{2, true, 5, 3, -1};
  // dW = Y^T X (Y plays dY): op(A) = Y^T is n x m, bias gradient = column sums of Y.
  GemmStep bwd{4, 0, 6, true, false, false, 1, n, k, m, 0, 0, 0, "model.cpp:2:1"};
  bwd.epilogue.biasGradient = 7;
  p.functions = {Function{"f", {0, 3}, {4, 5, 6, 7}, {"y", "pre", "dw", "db"}, {fwd, bwd}, 0}};
  return p;
}

TEST(GemmEpilogue, ProgramRoundTripKeepsTheEpilogue) {
  const Program p = epilogueProgram(6, 10, 7);
  const std::string dir =
      (std::filesystem::path(testing::TempDir()) / fmt::format("tessel_epilogue_roundtrip_{}", ::getpid())).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  saveProgram(p, dir);
  const Program q = loadProgram(dir);
  EXPECT_TRUE(q == p);
  EXPECT_EQ(std::get<GemmStep>(q.functions[0].steps[0]).epilogue, (GemmEpilogue{2, true, 5, 3, -1}));
  EXPECT_EQ(std::get<GemmStep>(q.functions[0].steps[1]).epilogue.biasGradient, 7);
}

TEST(GemmEpilogue, ExecutorRefusesAnInvalidEpilogue) {
  // Each way an epilogue can be wrong, and the words its refusal must contain.
  const std::vector<std::pair<std::function<void(GemmEpilogue&)>, std::string>> cases = {
      {[](GemmEpilogue& e) { e.gelu = false; }, "pre-activation output without gelu"},
      {[](GemmEpilogue& e) { e.residual = 5; }, "overlaps the epilogue's pre_activation"},  // pre == residual
      {[](GemmEpilogue& e) { e.bias = -2; }, "buffer id -2 (-1 means none)"},
      {[](GemmEpilogue& e) { e.residual = 4; }, "overlaps a GEMM operand"},  // residual == C
  };
  for (const auto& [mutate, words] : cases) {
    Program p = epilogueProgram(6, 10, 7);
    mutate(std::get<GemmStep>(p.functions[0].steps[0]).epilogue);
    try {
      Executor exec(p, [](const std::string&) -> void* { return nullptr; });
      ADD_FAILURE() << "no error; expected: " << words;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
}

// The Executor runs epilogueProgram's two GEMM steps with their epilogues, against f64.
TEST(GemmEpilogue, ExecutorRunsTheEpilogue) {
  const int64_t m = 6, n = 10, k = 7;
  const Program p = epilogueProgram(m, n, k);
  Executor exec(p, [](const std::string&) -> void* { return nullptr; });
  std::vector<float> x = uniform(m * k, -1, 1, 8), w = uniform(n * k, -1, 1, 9), bias = uniform(n, -1, 1, 10),
                     r = uniform(m * n, -1, 1, 11);
  exec.setInput("f", 0, x.data(), x.size() * 4);
  exec.setInput("f", 1, r.data(), r.size() * 4);
  std::memcpy(exec.data(1), w.data(), w.size() * 4);
  std::memcpy(exec.data(2), bias.data(), bias.size() * 4);
  exec.run("f");
  const float *y = exec.data(4), *pre = exec.data(5), *db = exec.data(7);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) dot += double(x[i * k + q]) * w[j * k + q], mag += std::fabs(x[i * k + q] * w[j * k + q]);
      const double pr = dot + bias[j];
      // GEMM bound as in ExecutorTest (k + 1 terms) plus the add's rounding.
      ASSERT_LE(std::fabs(pre[i * n + j] - pr), (k + 1) * kU * mag + kU * std::fabs(pr)) << i << "," << j;
      const double gl = refGelu(pre[i * n + j]), want = gl + r[i * n + j];
      ASSERT_LE(std::fabs(y[i * n + j] - want), geluBound(pre[i * n + j], gl) + kU * std::fabs(want));
    }
  for (int64_t j = 0; j < n; ++j) {
    double sum = 0, mag = 0;
    for (int64_t i = 0; i < m; ++i) sum += y[i * n + j], mag += std::fabs(y[i * n + j]);
    EXPECT_LE(std::fabs(db[j] - sum), kU * std::fabs(sum) + 0x1p-40 * mag) << j;
  }
}

}  // namespace
}  // namespace tessel::rt
