// The stand-in cuBLASLt's matmul: decoded from its descriptors (BlasLt.h), queued on the stream
// as a host function of the stand-in driver (so it runs in stream order and graph capture
// records it), and run with OpenBLAS in f32. bf16 operands are widened exactly (a bf16 is the
// top half of an f32), so the products and the f32 accumulation are CUBLAS_COMPUTE_32F's; a
// bf16 D is rounded to nearest even once, at the end. Every operand's whole extent (all
// batches) is checked against its allocation when the matmul runs; a range outside it is a
// device fault naming the operand ("cublasLtMatmul B: ... exceed the allocation ...").
#include "runtime/numeric/BFloat16.h"
#include "test/standin/BlasLt.h"
#include "test/standin/StandinDevice.h"

#include <cblas.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>
#include <mutex>
#include <stdexcept>
#include <vector>

using namespace tessel::standin::lt;

namespace {

/// One queued matmul. Owned by the list below for the process's life: a captured graph may
/// replay it after the call returned.
struct Call {
  Gemm g;
  CUdeviceptr a, b, c, d;  // c: read when beta != 0 (D's layout)
  float alpha, beta;
};

std::mutex gCallsMutex;
std::vector<std::unique_ptr<Call>> gCalls;

size_t elementBytes(int32_t type) { return type == CUDA_R_16BF ? 2 : 4; }

/// Elements an operand spans over all batches: the last column's end plus the batch strides.
int64_t extent(const Layout& l, int64_t batch) {
  return (static_cast<int64_t>(l.cols) - 1) * l.ld + static_cast<int64_t>(l.rows) + (batch - 1) * l.stride;
}

const std::byte* view(CUdeviceptr p, const Layout& l, int64_t batch, const char* name) {
  const char* why = nullptr;
  const size_t bytes = static_cast<size_t>(extent(l, batch)) * elementBytes(l.type);
  if (void* v = tesselStandinTryHostAddress(p, bytes, &why)) return static_cast<const std::byte*>(v);
  throw std::runtime_error(fmt::format("cublasLtMatmul {}: {}", name, why ? why : "not device memory"));
}

/// One batch's matrix (rows x cols, leading dimension ld) as f32 with the same leading dimension.
std::vector<float> asFloats(const std::byte* p, const Layout& l) {
  const size_t n = static_cast<size_t>(extent(l, 1));
  std::vector<float> out(n);
  if (l.type == CUDA_R_32F) {
    std::memcpy(out.data(), p, n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = tessel::numeric::floatFromBF16(h);
    }
  }
  return out;
}

void store(std::byte* p, int32_t type, size_t at, float v) {
  if (type == CUDA_R_32F) {
    std::memcpy(p + at * 4, &v, 4);
  } else {
    uint16_t h = tessel::numeric::bf16FromFloat(v);
    std::memcpy(p + at * 2, &h, 2);
  }
}

/// The tanh-form GELU in f64 (PyTorch's approximate="tanh"), rounded to f32.
float gelu(float x) {
  const double v = x;
  return static_cast<float>(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
}

/// The epilogue of one batch on its f32 result `t` (D's layout), before D is written.
void epilogue(const Gemm& g, int64_t batch, const std::vector<float>& fb, std::vector<float>& t) {
  const int32_t e = g.epilogue;
  const size_t eb = elementBytes(g.d.type);
  if (e == CUBLASLT_EPILOGUE_BGRADB) {  // bias[col] = sum over k of op(B)[k, col]
    auto* bias = static_cast<std::byte*>(tesselStandinTryHostAddress(g.bias, static_cast<size_t>(g.n) * eb, nullptr));
    if (!bias) throw std::runtime_error("cublasLtMatmul bias gradient: not inside one allocation");
    for (int64_t col = 0; col < g.n; ++col) {
      double sum = 0;
      for (int64_t q = 0; q < g.k; ++q) sum += fb[static_cast<size_t>(g.transB ? q * g.b.ld + col : col * g.b.ld + q)];
      store(bias, g.d.type, static_cast<size_t>(col), static_cast<float>(sum));
    }
    return;
  }
  const bool hasBias = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
                       e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool hasGelu = (e & CUBLASLT_EPILOGUE_GELU) != 0, hasAux = (e & 128) != 0;
  if (!hasBias && !hasGelu) return;
  std::vector<float> bias(static_cast<size_t>(g.m), 0.0f);
  if (hasBias) {
    auto* p = static_cast<const std::byte*>(tesselStandinTryHostAddress(g.bias, static_cast<size_t>(g.m) * eb, nullptr));
    if (!p) throw std::runtime_error("cublasLtMatmul bias: not inside one allocation");
    bias = asFloats(p, Layout{0, g.d.type, 1, static_cast<uint64_t>(g.m), 1, static_cast<int64_t>(g.m), 0});
  }
  std::byte* aux = nullptr;
  if (hasAux) {
    const size_t bytes = static_cast<size_t>((g.n - 1) * g.auxLd + g.m + batch * g.auxStride) * eb;
    aux = static_cast<std::byte*>(tesselStandinTryHostAddress(g.aux, bytes, nullptr));
    if (!aux) throw std::runtime_error("cublasLtMatmul GELU aux: not inside one allocation");
  }
  for (int64_t col = 0; col < g.n; ++col)
    for (int64_t row = 0; row < g.m; ++row) {
      float& v = t[static_cast<size_t>(col * g.d.ld + row)];
      v += bias[static_cast<size_t>(row)];
      if (aux) store(aux, g.d.type, static_cast<size_t>(batch * g.auxStride + col * g.auxLd + row), v);
      if (hasGelu) v = gelu(v);
    }
}

void run(void* user) {
  const Call& c = *static_cast<const Call*>(user);
  const Gemm& g = c.g;
  const std::byte* a = view(c.a, g.a, g.batch, "A");
  const std::byte* b = view(c.b, g.b, g.batch, "B");
  const std::byte* cin = view(c.c, g.d, g.batch, "C");
  auto* d = const_cast<std::byte*>(view(c.d, g.d, g.batch, "D"));
  for (int64_t i = 0; i < g.batch; ++i) {
    std::vector<float> fa = asFloats(a + i * g.a.stride * elementBytes(g.a.type), g.a);
    std::vector<float> fb = asFloats(b + i * g.b.stride * elementBytes(g.b.type), g.b);
    std::byte* di = d + i * g.d.stride * elementBytes(g.d.type);
    // beta == 0 must not read C (it may hold NaN), as in BLAS.
    std::vector<float> fd = c.beta == 0.0f ? std::vector<float>(static_cast<size_t>(extent(g.d, 1)), 0.0f)
                                           : asFloats(cin + i * g.d.stride * elementBytes(g.d.type), g.d);
    cblas_sgemm(CblasColMajor, g.transA ? CblasTrans : CblasNoTrans, g.transB ? CblasTrans : CblasNoTrans,
                static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), c.alpha, fa.data(),
                static_cast<int>(g.a.ld), fb.data(), static_cast<int>(g.b.ld), c.beta, fd.data(),
                static_cast<int>(g.d.ld));
    epilogue(g, i, fb, fd);
    // Write back only the m x n elements: the padding between columns is not D's.
    for (int64_t col = 0; col < g.n; ++col)
      for (int64_t row = 0; row < g.m; ++row) {
        const size_t at = static_cast<size_t>(col * g.d.ld + row);
        store(di, g.d.type, at, fd[at]);
      }
  }
}

}  // namespace

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceBytes, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || !algo) return CUBLAS_STATUS_INVALID_VALUE;
  auto call = std::make_unique<Call>();
  if (std::string why = decode(op, Adesc, Bdesc, Cdesc, Ddesc, &call->g); !why.empty())
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul", why);
  Algo chosen;
  std::memcpy(&chosen, algo->data, sizeof chosen);
  if (chosen.magic != kAlgoMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul", "the algorithm is not from cublasLtMatmulAlgoGetHeuristic");
  call->a = reinterpret_cast<CUdeviceptr>(A);
  call->b = reinterpret_cast<CUdeviceptr>(B);
  call->d = reinterpret_cast<CUdeviceptr>(D);
  call->c = reinterpret_cast<CUdeviceptr>(C);
  // An algorithm chosen for aligned operands may fault on less aligned ones.
  const Gemm& g = call->g;
  const std::tuple<const char*, CUdeviceptr, const Layout*, uint32_t> operands[] = {
      {"A", call->a, &g.a, chosen.align[0]}, {"B", call->b, &g.b, chosen.align[1]}, {"C", call->c, &g.d, chosen.align[2]},
      {"D", call->d, &g.d, chosen.align[3]}};
  for (const auto& [name, p, l, align] : operands) {
    const uint64_t strideBytes = static_cast<uint64_t>(l->stride) * elementBytes(l->type);
    if (p % align != 0 || (g.batch > 1 && strideBytes % align != 0))
      return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul",
                    fmt::format("{} at 0x{:x} (batch stride {} bytes) is not {}-byte aligned, as the heuristic was told",
                                name, p, strideBytes, align));
  }
  if (workspaceBytes > 0 && !tesselStandinTryHostAddress(reinterpret_cast<CUdeviceptr>(workspace), workspaceBytes, nullptr))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul", "the workspace is not inside one live allocation");
  std::memcpy(&call->alpha, alpha, sizeof(float));  // host pointer mode (the default)
  std::memcpy(&call->beta, beta, sizeof(float));
  Call* raw = call.get();
  {
    std::lock_guard<std::mutex> lock(gCallsMutex);
    gCalls.push_back(std::move(call));
  }
  CUresult rc = cuLaunchHostFunc(reinterpret_cast<CUstream>(stream), run, raw);
  return rc == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                            : refuse(CUBLAS_STATUS_EXECUTION_FAILED, "cublasLtMatmul",
                                     fmt::format("cuLaunchHostFunc failed with CUDA error {}", static_cast<int>(rc)));
}
