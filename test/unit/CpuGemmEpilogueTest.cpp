// The GEMM epilogue as CpuGemm runs it (runtime/exec/CpuGemm.h): with oneDNN, the bias as the
// matmul's bias argument, GELU as the gelu_tanh post-op or from the pre-activation the
// primitive writes, the residual as a binary add post-op; with OpenBLAS, and for what oneDNN
// does not compute, applyGemmEpilogue after the product. Both against an f64 reference, for
// every combination the compiler emits, batched with padded strides and not.
//
// Tolerances, per element, with s = sum over kk of |a b| (the GEMM's bound, CpuGemmTest.cpp:
// 1e-5 s for k <= 129) and u = 2^-24:
//   pre = P + bias: 1e-5 s + u |pre| (the product's error, then one f32 add).
//   gelu(pre): the error of pre times |gelu'| <= 1.13, plus GELU's own error (8 + 4 |z|) u
//     |gelu| (GemmEpilogueTest.cpp), plus 4 u |pre|: oneDNN's gelu_tanh computes
//     0.5 x (1 + tanh(z)), whose 1 + tanh(z) cancels for negative x, so its error is a few
//     u |x| absolute rather than relative to the small result.
//   + residual: u |result| more.
//   bias gradient: a double sum rounded to f32, u |sum| + 2^-40 sum |a|.
#include "runtime/exec/CpuGemm.h"

#include "runtime/reference/Reference.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tessel::rt {
namespace {

constexpr double kU = 0x1p-24;

std::vector<float> uniform(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

struct Epi {
  bool bias, gelu, pre, residual, biasGradient;
};

void check(GemmBackend backend, Epi e, int64_t batch, bool transA) {
  const int64_t m = 37, n = 48, k = 65;
  SCOPED_TRACE(fmt::format("{} bias {} gelu {} pre {} residual {} bias_gradient {} batch {} transA {}",
                           gemmBackendName(backend), e.bias, e.gelu, e.pre, e.residual, e.biasGradient, batch, transA));
  GemmStep g;
  g.m = m, g.n = n, g.k = k, g.batch = batch, g.transA = transA, g.transB = true;
  g.strideA = m * k, g.strideB = 0, g.strideC = batch > 1 ? m * n + 5 : m * n;  // padding between items
  g.location = "test";
  // Buffer ids only mark which fields are used; the pointers come with the operands.
  if (e.bias) g.epilogue.bias = 3;
  g.epilogue.gelu = e.gelu;
  if (e.pre) g.epilogue.preActivation = 4;
  if (e.residual) g.epilogue.residual = 5;
  if (e.biasGradient) g.epilogue.biasGradient = 6;
  std::vector<float> a = uniform(batch * m * k, 1), b = uniform(n * k, 2), bias = uniform(n, 3),
                     residual = uniform(batch * g.strideC, 4);
  for (float& v : bias) v *= 4.0f;  // pre-activations over GELU's curved range
  std::vector<float> c(static_cast<size_t>(batch * g.strideC), 7.0f), pre(c.size(), 7.0f), db(m, 7.0f);
  GemmEpilogueOperands o;
  if (e.bias) o.bias = bias.data();
  if (e.pre) o.preActivation = pre.data();
  if (e.residual) o.residual = residual.data();
  if (e.biasGradient) o.biasGradient = db.data();
  CpuGemmContext context;
  CpuGemm gemm(g, {}, backend, a.data(), b.data(), c.data(), {}, &context, o);
  // oneDNN computes everything but the bias gradient in the primitive: the test must fail if
  // it silently fell back.
  if (backend == GemmBackend::OneDnn) {
    EXPECT_EQ(gemm.fusedEpilogue().bias, g.epilogue.bias);
    EXPECT_EQ(gemm.fusedEpilogue().gelu, g.epilogue.gelu);
    EXPECT_EQ(gemm.fusedEpilogue().residual, g.epilogue.residual);
  } else {
    EXPECT_TRUE(gemm.fusedEpilogue().empty());
  }
  gemm.run();
  int bad = 0;
  auto expectNear = [&](double got, double want, double tol, const char* what, int64_t at) {
    if (!(std::fabs(got - want) <= tol) && bad++ < 5)
      ADD_FAILURE() << fmt::format("{}[{}] = {} but the reference is {} (tolerance {})", what, at, got, want, tol);
  };
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double p = 0, s = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const double av = a[bi * g.strideA + (transA ? kk * m + i : i * k + kk)], bv = b[j * k + kk];
          p += av * bv;
          s += std::fabs(av * bv);
        }
        const int64_t at = bi * g.strideC + i * n + j;
        const double pv = p + (e.bias ? bias[j] : 0.0);
        double tol = 1e-5 * s + kU * std::fabs(pv), want = pv;
        if (e.pre) expectNear(pre[at], pv, tol, "pre", at);
        if (e.gelu) {
          want = ref::gelu(ref::Tensor({1}, {pv})).data[0];
          const double z = 1.5957691216057308 * (pv + 0.044715 * pv * pv * pv);
          tol = 1.13 * tol + (8.0 + 4.0 * std::fabs(z)) * kU * std::fabs(want) + 4.0 * kU * std::fabs(pv);
        }
        if (e.residual) {
          want += residual[at];
          tol += kU * std::fabs(want);
        }
        expectNear(c[at], want, tol, "C", at);
      }
  for (int64_t bi = 0; bi + 1 < batch; ++bi)  // the padding between items is never written
    for (int64_t q = m * n; q < g.strideC; ++q) EXPECT_EQ(c[bi * g.strideC + q], 7.0f);
  if (e.biasGradient)
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0, abs = 0;
      for (int64_t bi = 0; bi < batch; ++bi)
        for (int64_t kk = 0; kk < k; ++kk) {
          const double av = a[bi * g.strideA + (transA ? kk * m + i : i * k + kk)];
          sum += av;
          abs += std::fabs(av);
        }
      expectNear(db[i], sum, kU * std::fabs(sum) + 0x1p-40 * abs, "bias_gradient", i);
    }
}

class CpuGemmEpilogue : public ::testing::TestWithParam<GemmBackend> {};

// What tessel-fuse-gemm-epilogues emits: bias; bias + residual; residual; bias + GELU with and
// without the pre-activation; GELU alone; the bias gradient of a weight gradient.
TEST_P(CpuGemmEpilogue, EveryFusedCombinationMatchesF64) {
  const Epi combos[] = {{true, false, false, false, false}, {true, false, false, true, false},
                        {false, false, false, true, false}, {true, true, true, false, false},
                        {true, true, false, false, false},  {false, true, false, false, false},
                        {false, true, true, false, false}};
  for (const Epi& e : combos)
    for (int64_t batch : {1, 2}) check(GetParam(), e, batch, false);
}

TEST_P(CpuGemmEpilogue, BiasGradientMatchesDoubleSum) {
  check(GetParam(), {false, false, false, false, true}, 1, true);
  check(GetParam(), {false, false, false, false, true}, 2, false);
}

INSTANTIATE_TEST_SUITE_P(Backends, CpuGemmEpilogue, ::testing::Values(GemmBackend::OpenBlas, GemmBackend::OneDnn),
                         [](const auto& info) { return std::string(gemmBackendName(info.param)); });

}  // namespace
}  // namespace tessel::rt
