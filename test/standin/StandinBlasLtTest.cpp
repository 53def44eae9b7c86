// The runtime's GEMM steps on cuBLASLt (runtime/cuda/CudaGemm.cpp) run on the stand-in
// cuBLASLt against a float64 reference, for every transpose, batch stride (0: shared, or a
// sum over batches), accumulate and dtype Tessel uses, and every epilogue mapping (CudaGemm.h
// ltEpilogue); descriptor settings Tessel never uses and epilogues cuBLASLt cannot express
// are refused; a wrong leading dimension in one GEMM is caught.
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/CudaGemm.h"
#include "runtime/numeric/BFloat16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace tessel {
namespace {

using rt::DType;

struct Gpu {
  const rt::cuda::DriverApi& api = rt::cuda::driverApi();
  const rt::cuda::BlasLtApi& lt = rt::cuda::blasLtApi();
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  cublasLtHandle_t handle = nullptr;
  Gpu() {
    EXPECT_EQ(api.cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(api.cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    EXPECT_EQ(api.cuCtxSetCurrent(context), CUDA_SUCCESS);
    EXPECT_EQ(api.cuStreamCreate(&stream, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    EXPECT_EQ(lt.cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  }
  ~Gpu() { lt.cublasLtDestroy(handle); }
  /// A device copy of `values` as `dtype` (exactly `values.size()` elements: nothing to spare).
  CUdeviceptr upload(const std::vector<float>& values, DType dtype) {
    CUdeviceptr p = 0;
    const size_t bytes = values.size() * (dtype == DType::BF16 ? 2 : 4);
    EXPECT_EQ(api.cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    if (dtype == DType::BF16) {
      std::vector<uint16_t> h(values.size());
      numeric::floatToBF16(values.data(), h.data(), static_cast<int64_t>(h.size()));
      EXPECT_EQ(api.cuMemcpyHtoD(p, h.data(), bytes), CUDA_SUCCESS);
    } else {
      EXPECT_EQ(api.cuMemcpyHtoD(p, values.data(), bytes), CUDA_SUCCESS);
    }
    return p;
  }
  std::vector<float> download(CUdeviceptr p, size_t n, DType dtype) {
    std::vector<float> out(n);
    if (dtype == DType::BF16) {
      std::vector<uint16_t> h(n);
      EXPECT_EQ(api.cuMemcpyDtoH(h.data(), p, n * 2), CUDA_SUCCESS);
      numeric::bf16ToFloat(h.data(), out.data(), static_cast<int64_t>(n));
    } else {
      EXPECT_EQ(api.cuMemcpyDtoH(out.data(), p, n * 4), CUDA_SUCCESS);
    }
    return out;
  }
};

std::vector<float> randomValues(size_t n, std::mt19937& rng, DType dtype) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  if (dtype == DType::BF16) {  // the values the device holds
    std::vector<uint16_t> h(n);
    numeric::floatToBF16(v.data(), h.data(), static_cast<int64_t>(n));
    numeric::bf16ToFloat(h.data(), v.data(), static_cast<int64_t>(n));
  }
  return v;
}

/// Runs `g` through the runtime's LtGemm on the stand-in and checks it against float64.
void checkGemm(const rt::GemmStep& g, DType in, DType out) {
  SCOPED_TRACE(::testing::Message() << "batch " << g.batch << " m " << g.m << " n " << g.n << " k " << g.k << " transA "
                                    << g.transA << " transB " << g.transB << " strides " << g.strideA << "/" << g.strideB
                                    << "/" << g.strideC << " accumulate " << g.accumulate << " bf16 in "
                                    << (in == DType::BF16) << " bf16 out " << (out == DType::BF16));
  Gpu gpu;
  std::mt19937 rng(static_cast<unsigned>(g.m * 131 + g.n * 17 + g.k + g.batch * 7 + g.transA * 2 + g.transB));
  auto size = [&](int64_t stride, int64_t one) { return static_cast<size_t>((g.batch - 1) * stride + one); };
  std::vector<float> a = randomValues(size(g.strideA, g.m * g.k), rng, in);
  std::vector<float> b = randomValues(size(g.strideB, g.k * g.n), rng, in);
  std::vector<float> c = randomValues(size(g.strideC, g.m * g.n), rng, out);
  CUdeviceptr pa = gpu.upload(a, in), pb = gpu.upload(b, in), pc = gpu.upload(c, out), ws = 0;
  ASSERT_EQ(gpu.api.cuMemAlloc(&ws, 1 << 20), CUDA_SUCCESS);
  {
    rt::cuda::LtGemm gemm(gpu.lt, gpu.handle, g, pa, in, pb, in, pc, out, ws, 1 << 20);
    gemm.enqueue(gpu.stream);
    ASSERT_EQ(gpu.api.cuStreamSynchronize(gpu.stream), CUDA_SUCCESS);
  }
  std::vector<float> got = gpu.download(pc, c.size(), out);
  // Reference: C (+)= sum over batches writing the same C (strideC 0) or C_b = op(A_b) op(B_b).
  std::vector<double> want(c.begin(), c.end()), magnitude(c.size(), 0.0);
  if (!g.accumulate) std::fill(want.begin(), want.end(), 0.0);
  for (int64_t t = 0; t < g.batch; ++t)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          double x = a[t * g.strideA + (g.transA ? p * g.m + i : i * g.k + p)];
          double y = b[t * g.strideB + (g.transB ? j * g.k + p : p * g.n + j)];
          sum += x * y;
          mag += std::abs(x * y);
        }
        want[t * g.strideC + i * g.n + j] += sum;
        magnitude[t * g.strideC + i * g.n + j] += mag + (g.accumulate ? std::abs(c[t * g.strideC + i * g.n + j]) : 0);
      }
  // Tolerance: f32 accumulation of at most batch * k + 1 terms, each partial sum within that
  // many u of the sum of magnitudes (the standard gamma_n bound); a bf16 result adds its final
  // rounding, half an ulp: 2^-8 of the value.
  const double u = 1.0 / (1 << 24), terms = static_cast<double>(g.batch * g.k + 1);
  for (size_t e = 0; e < got.size(); ++e) {
    double tol = terms * u * magnitude[e] + (out == DType::BF16 ? std::abs(want[e]) / 256 : 0.0);
    ASSERT_NEAR(got[e], want[e], tol) << "element " << e;
  }
}

TEST(StandinBlasLt, EveryLayoutTesselUsesMatchesFloat64) {
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (bool accumulate : {false, true}) {
        checkGemm({.transA = transA, .transB = transB, .accumulate = accumulate, .m = 5, .n = 7, .k = 3}, DType::F32,
                  DType::F32);
        // Batched: own operands, A shared (stride 0), and a sum over batches into one C.
        checkGemm({.transA = transA, .transB = transB, .accumulate = accumulate, .batch = 3, .m = 4, .n = 6, .k = 5,
                   .strideA = 20, .strideB = 30, .strideC = 24},
                  DType::F32, DType::F32);
        checkGemm({.transA = transA, .transB = transB, .accumulate = accumulate, .batch = 3, .m = 4, .n = 6, .k = 5,
                   .strideA = 0, .strideB = 30, .strideC = 24},
                  DType::F32, DType::F32);
        checkGemm({.transA = transA, .transB = transB, .accumulate = accumulate, .batch = 3, .m = 4, .n = 6, .k = 5,
                   .strideA = 20, .strideB = 30, .strideC = 0},
                  DType::F32, DType::F32);
      }
}

TEST(StandinBlasLt, Bf16OperandsAreWidenedExactly) {
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      checkGemm({.transA = transA, .transB = transB, .m = 8, .n = 8, .k = 16}, DType::BF16, DType::BF16);
      checkGemm({.transA = transA, .transB = transB, .batch = 2, .m = 8, .n = 8, .k = 16, .strideA = 128,
                 .strideB = 128, .strideC = 64},
                DType::BF16, DType::F32);
    }
}

/// Runs `g` with its epilogue through LtGemm on the stand-in and checks C, the pre-activation
/// and the bias gradient against float64 (Program.h GemmEpilogue's definition).
void checkEpilogue(const rt::GemmStep& g) {
  const rt::GemmEpilogue& e = g.epilogue;
  SCOPED_TRACE(::testing::Message() << "batch " << g.batch << " m " << g.m << " n " << g.n << " k " << g.k
                                    << " transA " << g.transA << " bias " << e.bias << " gelu " << e.gelu << " pre "
                                    << e.preActivation << " residual " << e.residual << " bgrad " << e.biasGradient);
  Gpu gpu;
  std::mt19937 rng(static_cast<unsigned>(g.m * 31 + g.n * 7 + g.k));
  const size_t na = static_cast<size_t>((g.batch - 1) * g.strideA + g.m * g.k),
               nb = static_cast<size_t>((g.batch - 1) * g.strideB + g.k * g.n),
               nc = static_cast<size_t>((g.batch - 1) * g.strideC + g.m * g.n);
  std::vector<float> a = randomValues(na, rng, DType::F32), b = randomValues(nb, rng, DType::F32),
                     bias = randomValues(static_cast<size_t>(g.n), rng, DType::F32),
                     res = randomValues(nc, rng, DType::F32), zeros(nc, 0.0f);
  CUdeviceptr pa = gpu.upload(a, DType::F32), pb = gpu.upload(b, DType::F32), pc = gpu.upload(zeros, DType::F32), ws = 0;
  rt::cuda::LtEpilogueBuffers ep;
  if (e.bias >= 0) ep.bias = gpu.upload(bias, DType::F32);
  if (e.residual >= 0) ep.residual = gpu.upload(res, DType::F32);
  if (e.preActivation >= 0) ep.preActivation = gpu.upload(zeros, DType::F32);
  if (e.biasGradient >= 0) ep.biasGradient = gpu.upload(std::vector<float>(static_cast<size_t>(g.m), 0.0f), DType::F32);
  ASSERT_EQ(gpu.api.cuMemAlloc(&ws, 1 << 20), CUDA_SUCCESS);
  {
    rt::cuda::LtGemm gemm(gpu.lt, gpu.handle, g, pa, DType::F32, pb, DType::F32, pc, DType::F32, ws, 1 << 20, ep);
    gemm.enqueue(gpu.stream);
    ASSERT_EQ(gpu.api.cuStreamSynchronize(gpu.stream), CUDA_SUCCESS);
  }
  const std::vector<float> got = gpu.download(pc, nc, DType::F32);
  const std::vector<float> pre = e.preActivation >= 0 ? gpu.download(ep.preActivation, nc, DType::F32) : got;
  // Tolerances: the GEMM's gamma bound (k + 2 terms: the products, the bias and the
  // residual) on the sum of magnitudes; GELU's derivative is below 1.13 in magnitude, so
  // the pre-activation's error passes through at most 1.13 times, plus the stand-in's f32
  // rounding of its f64 GELU (one u of the value).
  const double u = 1.0 / (1 << 24), terms = static_cast<double>(g.k + 2);
  for (int64_t t = 0; t < g.batch; ++t)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const double x = a[t * g.strideA + (g.transA ? p * g.m + i : i * g.k + p)];
          const double y = b[t * g.strideB + (g.transB ? j * g.k + p : p * g.n + j)];
          sum += x * y, mag += std::abs(x * y);
        }
        const size_t at = static_cast<size_t>(t * g.strideC + i * g.n + j);
        if (e.bias >= 0) sum += bias[static_cast<size_t>(j)], mag += std::abs(bias[static_cast<size_t>(j)]);
        const double tol = terms * u * mag;
        if (e.preActivation >= 0) {
          ASSERT_NEAR(pre[at], sum, tol) << "pre-activation " << at;
        }
        double want = sum;
        if (e.gelu) want = 0.5 * sum * (1 + std::tanh(0.7978845608028654 * (sum + 0.044715 * sum * sum * sum)));
        if (e.residual >= 0) want += res[at], mag += std::abs(res[at]);
        ASSERT_NEAR(got[at], want, 1.13 * terms * u * mag + u * std::abs(want)) << "element " << at;
      }
  if (e.biasGradient >= 0) {
    const std::vector<float> db = gpu.download(ep.biasGradient, static_cast<size_t>(g.m), DType::F32);
    for (int64_t i = 0; i < g.m; ++i) {
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double x = a[g.transA ? p * g.m + i : i * g.k + p];
        sum += x, mag += std::abs(x);
      }
      ASSERT_NEAR(db[static_cast<size_t>(i)], sum, u * std::abs(sum) + g.k * u * u * mag) << "bias gradient " << i;
    }
  }
}

// Every epilogue mapping of CudaGemm.h ltEpilogue on the stand-in cuBLASLt against f64: bias,
// GELU (with and without bias and pre-activation), residual (with bias) over batches, and
// the bias gradient of a weight gradient (transposed A).
TEST(StandinBlasLt, EpiloguesMatchFloat64) {
  const rt::GemmStep base{0, 1, 2, false, true, false, 2, 5, 16, 7, 35, 112, 80, "model.cpp:9:9"};
  for (rt::GemmEpilogue e : {rt::GemmEpilogue{3, false, -1, -1, -1}, rt::GemmEpilogue{-1, true, -1, -1, -1},
                             rt::GemmEpilogue{3, true, -1, -1, -1}, rt::GemmEpilogue{3, true, 4, -1, -1},
                             rt::GemmEpilogue{-1, true, 4, -1, -1}, rt::GemmEpilogue{3, false, -1, 5, -1}}) {
    rt::GemmStep g = base;
    g.epilogue = e;
    checkEpilogue(g);
  }
  rt::GemmStep dw{0, 1, 2, true, false, false, 1, 9, 6, 13, 0, 0, 0, "model.cpp:9:10"};
  dw.epilogue.biasGradient = 3;
  checkEpilogue(dw);
}

// What cuBLASLt cannot express is refused when the step is prepared, naming the step.
TEST(StandinBlasLt, InexpressibleEpiloguesAreRefused) {
  auto refused = [](rt::GemmStep g, rt::DType c, const std::string& part) {
    g.location = "model.cpp:7:3";
    try {
      (void)rt::cuda::ltEpilogue(g, c);
      ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("model.cpp:7:3"), std::string::npos) << e.what();
    }
  };
  rt::GemmStep g{0, 1, 2, false, false, false, 1, 4, 16, 8, 0, 0, 0, ""};
  g.epilogue = {3, true, -1, 5, -1};
  refused(g, DType::F32, "residual after GELU");
  g.epilogue = {3, false, -1, -1, 6};
  refused(g, DType::F32, "combined with another epilogue");
  g.epilogue = {-1, false, -1, -1, 6};
  refused(g, DType::BF16, "bf16 C");
  g.batch = 2, g.strideC = 64;
  refused(g, DType::F32, "more than one batch");
  g.batch = 1, g.n = 12;
  g.epilogue = {-1, true, 4, -1, -1};
  refused(g, DType::F32, "multiples of 8");
}

TEST(StandinBlasLt, SettingsTesselNeverUsesAreRefused) {
  Gpu gpu;
  const rt::cuda::BlasLtApi& lt = gpu.lt;
  cublasLtMatmulDesc_t desc = nullptr;
  EXPECT_EQ(lt.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F), CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(lt.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
  EXPECT_EQ(lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
            CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatrixLayout_t layout = nullptr;
  EXPECT_EQ(lt.cublasLtMatrixLayoutCreate(&layout, CUDA_R_16F, 4, 4, 4), CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(lt.cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  cublasLtOrder_t order = CUBLASLT_ORDER_ROW;
  EXPECT_EQ(lt.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order),
            CUBLAS_STATUS_NOT_SUPPORTED);
  // C and D of different layouts: Tessel multiplies in place.
  cublasLtMatrixLayout_t other = nullptr;
  ASSERT_EQ(lt.cublasLtMatrixLayoutCreate(&other, CUDA_R_32F, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(lt.cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = -1;
  EXPECT_EQ(lt.cublasLtMatmulAlgoGetHeuristic(gpu.handle, desc, layout, layout, other, layout, pref, 1, &result, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(found, 0);
  // A leading dimension below the row count.
  cublasLtMatrixLayout_t narrow = nullptr;
  ASSERT_EQ(lt.cublasLtMatrixLayoutCreate(&narrow, CUDA_R_32F, 4, 4, 3), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lt.cublasLtMatmulAlgoGetHeuristic(gpu.handle, desc, narrow, layout, layout, layout, pref, 1, &result, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  for (auto l : {layout, other, narrow}) lt.cublasLtMatrixLayoutDestroy(l);
  lt.cublasLtMatmulPreferenceDestroy(pref);
  lt.cublasLtMatmulDescDestroy(desc);
}

/// C (4 x 4) = A (4 x 4) B (4 x 4) column-major with B's leading dimension `ldb`; A, B and C
/// each in an allocation of exactly 16 floats. Returns the stream's status and C.
std::pair<CUresult, std::vector<float>> matmulWithLdb(int64_t ldb) {
  Gpu gpu;
  const rt::cuda::BlasLtApi& lt = gpu.lt;
  std::vector<float> a(16), b(16);
  for (int i = 0; i < 16; ++i) a[i] = static_cast<float>(i % 5), b[i] = static_cast<float>(i % 3);
  CUdeviceptr pa = gpu.upload(a, DType::F32), pb = gpu.upload(b, DType::F32), pc = gpu.upload(std::vector<float>(16), DType::F32);
  cublasLtMatmulDesc_t desc = nullptr;
  EXPECT_EQ(lt.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  EXPECT_EQ(lt.cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lt.cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 4, 4, ldb), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lt.cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t pref = nullptr;
  EXPECT_EQ(lt.cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  EXPECT_EQ(lt.cublasLtMatmulAlgoGetHeuristic(gpu.handle, desc, la, lb, lc, lc, pref, 1, &result, &found),
            CUBLAS_STATUS_SUCCESS);
  const float alpha = 1, beta = 0;
  EXPECT_EQ(lt.cublasLtMatmul(gpu.handle, desc, &alpha, reinterpret_cast<void*>(pa), la, reinterpret_cast<void*>(pb), lb,
                              &beta, reinterpret_cast<void*>(pc), lc, reinterpret_cast<void*>(pc), lc, &result.algo,
                              nullptr, 0, gpu.stream),
            CUBLAS_STATUS_SUCCESS);
  CUresult rc = gpu.api.cuStreamSynchronize(gpu.stream);
  std::vector<float> c(16, -1);
  if (rc == CUDA_SUCCESS) c = gpu.download(pc, 16, DType::F32);
  return {rc, c};
}

TEST(StandinBlasLt, AWrongLeadingDimensionIsCaught) {
  // Planted fault: B's leading dimension one too large (5 instead of 4). Its last column then
  // ends past B's allocation, which the stand-in reports as a device fault naming B.
  auto [right, c] = matmulWithLdb(4);
  ASSERT_EQ(right, CUDA_SUCCESS);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      float want = 0;  // small integers: exact in f32
      for (int p = 0; p < 4; ++p) want += static_cast<float>((i + 4 * p) % 5) * static_cast<float>((p + 4 * j) % 3);
      EXPECT_EQ(c[i + 4 * j], want) << i << ", " << j;
    }
  ::testing::internal::CaptureStderr();
  auto [wrong, unused] = matmulWithLdb(5);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(wrong, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_NE(err.find("cublasLtMatmul B"), std::string::npos) << err;
  EXPECT_NE(err.find("exceed the allocation"), std::string::npos) << err;
}

}  // namespace
}  // namespace tessel
