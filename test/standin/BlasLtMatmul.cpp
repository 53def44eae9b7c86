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
  CUdeviceptr a, b, d;
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

void run(void* user) {
  const Call& c = *static_cast<const Call*>(user);
  const Gemm& g = c.g;
  const std::byte* a = view(c.a, g.a, g.batch, "A");
  const std::byte* b = view(c.b, g.b, g.batch, "B");
  auto* d = const_cast<std::byte*>(view(c.d, g.d, g.batch, "D"));
  for (int64_t i = 0; i < g.batch; ++i) {
    std::vector<float> fa = asFloats(a + i * g.a.stride * elementBytes(g.a.type), g.a);
    std::vector<float> fb = asFloats(b + i * g.b.stride * elementBytes(g.b.type), g.b);
    std::byte* di = d + i * g.d.stride * elementBytes(g.d.type);
    // beta == 0 must not read D (it may hold NaN), as in BLAS.
    std::vector<float> fd =
        c.beta == 0.0f ? std::vector<float>(static_cast<size_t>(extent(g.d, 1)), 0.0f) : asFloats(di, g.d);
    cblas_sgemm(CblasColMajor, g.transA ? CblasTrans : CblasNoTrans, g.transB ? CblasTrans : CblasNoTrans,
                static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), c.alpha, fa.data(),
                static_cast<int>(g.a.ld), fb.data(), static_cast<int>(g.b.ld), c.beta, fd.data(),
                static_cast<int>(g.d.ld));
    // Write back only the m x n elements: the padding between columns is not D's.
    for (int64_t col = 0; col < g.n; ++col)
      for (int64_t row = 0; row < g.m; ++row) {
        const size_t at = static_cast<size_t>(col * g.d.ld + row);
        if (g.d.type == CUDA_R_32F) {
          std::memcpy(di + at * 4, &fd[at], 4);
        } else {
          uint16_t h = tessel::numeric::bf16FromFloat(fd[at]);
          std::memcpy(di + at * 2, &h, 2);
        }
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
  if (C != D) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul", "C and D are different buffers");
  Algo chosen;
  std::memcpy(&chosen, algo->data, sizeof chosen);
  if (chosen.magic != kAlgoMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul", "the algorithm is not from cublasLtMatmulAlgoGetHeuristic");
  call->a = reinterpret_cast<CUdeviceptr>(A);
  call->b = reinterpret_cast<CUdeviceptr>(B);
  call->d = reinterpret_cast<CUdeviceptr>(D);
  // An algorithm chosen for aligned operands may fault on less aligned ones.
  const Gemm& g = call->g;
  const std::tuple<const char*, CUdeviceptr, const Layout*, uint32_t> operands[] = {
      {"A", call->a, &g.a, chosen.align[0]}, {"B", call->b, &g.b, chosen.align[1]}, {"D", call->d, &g.d, chosen.align[3]}};
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
