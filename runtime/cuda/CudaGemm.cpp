// GEMM steps on cuBLASLt; see CudaGemm.h.
#include "runtime/cuda/CudaGemm.h"

#include "runtime/cuda/CudaPlan.h"

#include <fmt/format.h>

#include <stdexcept>

namespace tessel::rt::cuda {
namespace {

cudaDataType_t dataType(DType d, const std::string& where) {
  switch (d) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::I32: break;
  }
  throw std::runtime_error(fmt::format("GEMM operand of dtype i32{}: cuBLASLt multiplies f32 or bf16", where));
}

}  // namespace

cublasLtEpilogue_t ltEpilogue(const GemmStep& g, DType dc) {
  const GemmEpilogue& e = g.epilogue;
  const std::string where = fmt::format(" (gemm {}x[{}x{}x{}]{})", g.batch, g.m, g.n, g.k,
                                        g.location.empty() ? "" : " at " + g.location);
  auto refuse = [&](const std::string& why) {
    return std::runtime_error(fmt::format("CudaExecutor: cuBLASLt cannot run this GEMM epilogue: {}{}", why, where));
  };
  if (e.biasGradient >= 0) {
    if (e.bias >= 0 || e.gelu || e.residual >= 0)
      throw refuse("a bias gradient combined with another epilogue (cuBLASLt has one per matmul)");
    if (g.batch > 1) throw refuse("a bias gradient over more than one batch (BGRADB reduces one matmul)");
    if (dc != DType::F32) throw refuse("a bias gradient with a bf16 C (cuBLASLt writes it in C's type, not f32)");
    return CUBLASLT_EPILOGUE_BGRADB;
  }
  if (e.residual >= 0 && e.gelu)
    throw refuse("a residual after GELU (cuBLASLt adds C before the activation)");
  if (e.preActivation >= 0 && (g.n % 8 != 0 || (g.batch > 1 && g.strideC % 8 != 0)))
    throw refuse(fmt::format("a pre-activation of leading dimension {} and batch stride {} (cuBLASLt's GELU aux "
                             "buffer needs multiples of 8)", g.n, g.strideC));
  if (e.gelu)
    return e.preActivation >= 0 ? (e.bias >= 0 ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                                : (e.bias >= 0 ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
  return e.bias >= 0 ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

LtGemm::LtGemm(const BlasLtApi& api, cublasLtHandle_t handle, const GemmStep& g, CUdeviceptr a, DType da,
               CUdeviceptr b, DType db, CUdeviceptr c, DType dc, CUdeviceptr workspace, size_t workspaceBytes,
               const LtEpilogueBuffers& ep)
    : api_(api), handle_(handle), pa_(b), pb_(a), pd_(c), pc_(ep.residual ? ep.residual : c), workspace_(workspace),
      workspaceBytes_(workspaceBytes) {
  // cuBLASLt's A is the step's B and its B the step's A (CudaPlan.h ltGemmShape).
  where_ = fmt::format(" (gemm {}x[{}x{}x{}]{})", g.batch, g.m, g.n, g.k, g.location.empty() ? "" : " at " + g.location);
  const LtGemmShape s = ltGemmShape(g);
  const cublasLtEpilogue_t epilogue = ltEpilogue(g, dc);
  beta_ = ep.residual ? 1.0f : s.beta;  // a residual is cuBLASLt's C (never with accumulate)
  const cudaDataType_t ta = dataType(db, where_), tb = dataType(da, where_), td = dataType(dc, where_);
  const int64_t batch = s.serialBatches ? 1 : s.batch;
  if (s.serialBatches && epilogue != CUBLASLT_EPILOGUE_DEFAULT)  // it would run once per serial batch
    throw std::runtime_error("CudaExecutor: cuBLASLt cannot run this GEMM epilogue: a sum over batches into one C "
                             "is issued as serial matmuls" + where_);
  if (s.serialBatches) {
    serialBatches_ = s.batch;
    strideABytes_ = s.a.stride * dtypeBytes(db);
    strideBBytes_ = s.b.stride * dtypeBytes(da);
  }
  auto ck = [&](cublasStatus_t st, const char* what) { check(api_, st, std::string(what) + where_); };
  ck(api.cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  cublasOperation_t opA = s.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N, opB = s.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  ck(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA), "TRANSA");
  ck(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB), "TRANSB");
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    ck(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "EPILOGUE");
    if (void* bias = reinterpret_cast<void*>(ep.biasGradient ? ep.biasGradient : ep.bias))
      ck(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
         "BIAS_POINTER");
    if (ep.preActivation) {
      void* aux = reinterpret_cast<void*>(ep.preActivation);
      const int64_t ld = g.n, stride = g.strideC;  // C's layout (Program.h GemmEpilogue)
      ck(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux),
         "EPILOGUE_AUX_POINTER");
      ck(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld),
         "EPILOGUE_AUX_LD");
      if (batch > 1)
        ck(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride,
                                              sizeof stride),
           "EPILOGUE_AUX_BATCH_STRIDE");
    }
  }
  auto layout = [&](cublasLtMatrixLayout_t* l, cudaDataType_t t, const LtOperand& o) {
    ck(api.cublasLtMatrixLayoutCreate(l, t, static_cast<uint64_t>(o.rows), static_cast<uint64_t>(o.cols), o.ld),
       "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      int32_t count = static_cast<int32_t>(batch);
      int64_t stride = o.stride;
      ck(api.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
         "BATCH_COUNT");
      ck(api.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                              sizeof stride),
         "STRIDED_BATCH_OFFSET");
    }
  };
  layout(&a_, ta, s.a);
  layout(&b_, tb, s.b);
  layout(&d_, td, s.d);

  cublasLtMatmulPreference_t pref = nullptr;
  ck(api.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  try {
    uint64_t ws = workspaceBytes_;
    ck(api.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
       "MAX_WORKSPACE_BYTES");
    // Serial batches advance A and B by their strides: their alignment must hold for each.
    const int64_t alignBatch = s.serialBatches ? s.batch : batch;
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, operandAlignment(pa_, s.a.stride * dtypeBytes(db), alignBatch)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, operandAlignment(pb_, s.b.stride * dtypeBytes(da), alignBatch)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, operandAlignment(pc_, s.d.stride * dtypeBytes(dc), batch)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, operandAlignment(pd_, s.d.stride * dtypeBytes(dc), batch)}};
    for (auto [attr, bytes] : aligns)
      ck(api.cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof bytes), "MIN_ALIGNMENT");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    ck(api.cublasLtMatmulAlgoGetHeuristic(handle_, desc_, a_, b_, d_, d_, pref, 1, &result, &found),
       "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1) throw std::runtime_error("cuBLASLt has no algorithm" + where_);
    algo_ = result.algo;
  } catch (...) {
    api.cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  api.cublasLtMatmulPreferenceDestroy(pref);
}

LtGemm::~LtGemm() {
  if (d_) api_.cublasLtMatrixLayoutDestroy(d_);
  if (b_) api_.cublasLtMatrixLayoutDestroy(b_);
  if (a_) api_.cublasLtMatrixLayoutDestroy(a_);
  if (desc_) api_.cublasLtMatmulDescDestroy(desc_);
}

void LtGemm::enqueue(CUstream stream) const {
  const float alpha = 1.0f;
  const int64_t n = serialBatches_ > 0 ? serialBatches_ : 1;
  for (int64_t i = 0; i < n; ++i) {
    // A sum over serial batches: the first one overwrites C unless accumulating, the rest add.
    const float beta = i == 0 ? beta_ : 1.0f;
    const CUdeviceptr a = pa_ + static_cast<CUdeviceptr>(i * strideABytes_);
    const CUdeviceptr b = pb_ + static_cast<CUdeviceptr>(i * strideBBytes_);
    check(api_,
          api_.cublasLtMatmul(handle_, desc_, &alpha, reinterpret_cast<const void*>(a), a_,
                              reinterpret_cast<const void*>(b), b_, &beta, reinterpret_cast<void*>(pc_), d_,
                              reinterpret_cast<void*>(pd_), d_, &algo_, reinterpret_cast<void*>(workspace_),
                              workspaceBytes_, reinterpret_cast<cudaStream_t>(stream)),
          "cublasLtMatmul" + where_);
  }
}

}  // namespace tessel::rt::cuda
