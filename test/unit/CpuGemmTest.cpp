// Both CPU GEMM backends (runtime/exec/CpuGemm.h) against an f64 reference GEMM written here:
// odd shapes, every transpose combination, strided and shared (stride 0) batches, accumulate,
// f32 and bf16.
//
// Tolerances, per output element with s = sum over kk of |a b| (+ |C0| with accumulate):
//   f32 C: 1e-5 s. f32 accumulation of k <= 129 products errs by at most about k 2^-24 s
//          (Higham's gamma_k) = 7.7e-6 s; 1e-5 rounds that up.
//   bf16 C: 2^-8 |ref| + 1e-5 s. The inputs are bf16 values exactly (the reference reads the
//          same values), the sum is f32 as above, and the one rounding to bf16 (8 significant
//          bits, nearest even) errs by at most half an ulp, 2^-8 |ref| relative. A GEMM that
//          rounded twice or summed in bf16 would exceed it on these sums.
#include "runtime/exec/CpuGemm.h"

#include "runtime/numeric/BFloat16.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

namespace tessel::rt {
namespace {

struct Case {
  int64_t m, n, k, batch;
  bool transA, transB, accumulate;
  bool sharedB;  // strideB 0
  DType inputs, output;
};

// Operands stored as f32 values (bf16-representable when the operand is bf16) plus their bytes.
struct Operand {
  std::vector<float> values;
  std::vector<uint16_t> bf16;
  DType type;
  const void* data() const { return type == DType::BF16 ? static_cast<const void*>(bf16.data()) : values.data(); }
  void* data() { return type == DType::BF16 ? static_cast<void*>(bf16.data()) : values.data(); }
  float at(int64_t i) const { return type == DType::BF16 ? numeric::floatFromBF16(bf16[i]) : values[i]; }
};

Operand randomOperand(int64_t count, DType type, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Operand o{std::vector<float>(count), {}, type};
  for (float& v : o.values) v = u(rng);
  if (type == DType::BF16) {
    o.bf16.resize(count);
    numeric::floatToBF16(o.values.data(), o.bf16.data(), count);
  }
  return o;
}

std::string describe(const Case& c, GemmBackend backend) {
  return fmt::format("{} {}x{}x{} batch {} trans {}{} acc {} sharedB {} {}->{}", gemmBackendName(backend), c.m, c.n,
                     c.k, c.batch, c.transA, c.transB, c.accumulate, c.sharedB, dtypeName(c.inputs),
                     dtypeName(c.output));
}

void check(const Case& c, GemmBackend backend) {
  SCOPED_TRACE(describe(c, backend));
  std::mt19937 rng(static_cast<uint32_t>(c.m * 131 + c.n * 17 + c.k + c.batch));
  GemmStep g;
  g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.batch;
  g.transA = c.transA, g.transB = c.transB, g.accumulate = c.accumulate;
  g.location = "test";
  // Non-dense batch strides (3 elements of padding) unless shared.
  g.strideA = c.m * c.k + 3;
  g.strideB = c.sharedB ? 0 : c.k * c.n + 3;
  g.strideC = c.m * c.n + 3;
  const int64_t itemsB = c.sharedB ? 1 : c.batch;
  Operand a = randomOperand(c.batch * g.strideA, c.inputs, rng);
  Operand b = randomOperand(itemsB * (c.k * c.n + 3), c.inputs, rng);
  Operand out = randomOperand(c.batch * g.strideC, c.output, rng);
  const Operand c0 = out;
  const GemmDTypes types{c.inputs, c.inputs, c.output};
  const GemmScratch sizes = gemmScratchFor(g, types);
  std::vector<float> scratch(static_cast<size_t>(sizes.bytes() / 4) + 1);
  CpuGemmContext context;
  CpuGemm gemm(g, types, backend, a.data(), b.data(), out.data(), {scratch.data(), sizes}, &context);
  gemm.run();
  int bad = 0;
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, s = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double av = a.at(bi * g.strideA + (c.transA ? kk * c.m + i : i * c.k + kk));
          const double bv = b.at(bi * g.strideB + (c.transB ? j * c.k + kk : kk * c.n + j));
          ref += av * bv;
          s += std::fabs(av * bv);
        }
        const int64_t ci = bi * g.strideC + i * c.n + j;
        if (c.accumulate) {
          ref += c0.at(ci);
          s += std::fabs(c0.at(ci));
        }
        const double tol = (c.output == DType::BF16 ? std::ldexp(std::fabs(ref), -8) : 0.0) + 1e-5 * s;
        const double got = out.at(ci);
        if (std::fabs(got - ref) > tol && bad++ < 5)
          ADD_FAILURE() << fmt::format("C[{}][{}, {}] = {} but the reference is {} (tolerance {})", bi, i, j, got,
                                       ref, tol);
      }
  // Padding between batch items is never written.
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t p = c.m * c.n; p < g.strideC; ++p)
      EXPECT_EQ(out.at(bi * g.strideC + p), c0.at(bi * g.strideC + p)) << "padding of item " << bi;
}

class CpuGemmTest : public ::testing::TestWithParam<GemmBackend> {};

TEST_P(CpuGemmTest, OddShapesEveryTransposeF32) {
  for (auto [m, n, k] : {std::array<int64_t, 3>{7, 13, 5}, {65, 33, 129}, {1, 1, 1}, {17, 1, 31}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check({m, n, k, 1, ta, tb, false, false, DType::F32, DType::F32}, GetParam());
}

TEST_P(CpuGemmTest, BatchesWithStridesAndSharedB) {
  for (bool shared : {false, true})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check({9, 11, 21, 3, ta, tb, false, shared, DType::F32, DType::F32}, GetParam());
}

TEST_P(CpuGemmTest, Accumulate) {
  for (bool tb : {false, true}) {
    check({65, 33, 129, 1, false, tb, true, false, DType::F32, DType::F32}, GetParam());
    check({7, 13, 5, 2, true, tb, true, true, DType::F32, DType::F32}, GetParam());
  }
}

TEST_P(CpuGemmTest, Bf16InputsBf16AndF32Outputs) {
  if (GetParam() == GemmBackend::OneDnn) {
    GemmStep probe;
    probe.m = probe.n = probe.k = 8;
    CpuGemmContext context;
    try {
      CpuGemm gemm(probe, {DType::BF16, DType::BF16, DType::BF16}, GemmBackend::OneDnn, nullptr, nullptr, nullptr, {},
                   &context);
    } catch (const std::runtime_error& e) {
      GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU (below AVX-512): " << e.what();
    }
  }
  for (DType out : {DType::BF16, DType::F32})
    for (bool acc : {false, true})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          check({65, 33, 129, 1, ta, tb, acc, false, DType::BF16, out}, GetParam());
          check({7, 13, 5, 3, ta, tb, acc, true, DType::BF16, out}, GetParam());
        }
}

INSTANTIATE_TEST_SUITE_P(Backends, CpuGemmTest,
                         ::testing::Values(GemmBackend::OpenBlas, GemmBackend::OneDnn, GemmBackend::Default),
                         [](const auto& info) { return std::string(gemmBackendName(info.param)); });

TEST(CpuGemm, OneDnnRefusesMixedInputTypesByName) {
  GemmStep g;
  g.m = g.n = g.k = 4;
  g.location = "model.cpp:12";
  std::vector<float> a(16), c(16);
  std::vector<uint16_t> b(16);
  CpuGemmContext context;
  EXPECT_FALSE(oneDnnSupports({DType::F32, DType::BF16, DType::F32}));
  try {
    CpuGemm gemm(g, {DType::F32, DType::BF16, DType::F32}, GemmBackend::OneDnn, a.data(), b.data(), c.data(), {},
                 &context);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("model.cpp:12"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("OpenBLAS only"), std::string::npos) << e.what();
  }
}

TEST(CpuGemm, Bf16OpenBlasWithoutScratchIsRefused) {
  GemmStep g;
  g.m = g.n = g.k = 4;
  std::vector<uint16_t> a(16), b(16), c(16);
  EXPECT_THROW(CpuGemm(g, {DType::BF16, DType::BF16, DType::BF16}, GemmBackend::OpenBlas, a.data(), b.data(),
                       c.data(), {}, nullptr),
               std::runtime_error);
}

}  // namespace
}  // namespace tessel::rt
