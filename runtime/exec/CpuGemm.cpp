// One GEMM step on the CPU with OpenBLAS or oneDNN; see CpuGemm.h.
#include "runtime/exec/CpuGemm.h"

#include "runtime/numeric/BFloat16.h"

#include <cblas.h>
#include <dnnl.hpp>
#include <fmt/format.h>

#include <omp.h>

#include <fstream>
#include <optional>
#include <unordered_map>
#include <stdexcept>

namespace tessel::rt {

struct CpuGemmContext::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

CpuGemmContext::CpuGemmContext() {
  try {
    impl_ = std::make_unique<Impl>();
  } catch (const dnnl::error& e) {
    throw std::runtime_error(fmt::format("oneDNN: no CPU engine ({})", e.what()));
  }
}
CpuGemmContext::~CpuGemmContext() = default;

bool oneDnnSupports(const GemmDTypes& t) {
  return t.a == t.b && (t.a == DType::F32 ? t.c == DType::F32 : t.c == DType::F32 || t.c == DType::BF16);
}

void setCpuGemmThreads(int threads) {
  // Each setter only when its value changes: OpenBLAS's count is process-wide, and setting it
  // while another thread (an in-process rank) runs a GEMM races with that GEMM's buffers.
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
}

int cpuGemmThreads() { return omp_get_max_threads(); }

std::string cpuGemmLibraryVersions() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("openblas {}; onednn {}.{}.{} {}", openblas_get_config(), v->major, v->minor, v->patch, v->hash);
}

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

GemmScratch gemmScratchFor(const GemmStep& g, const GemmDTypes& types) {
  if (!types.anyBF16()) return {};
  return {g.m * g.k, g.k * g.n, g.m * g.n};
}

namespace {
using dnnl::memory;

memory::data_type dnnlType(DType t) { return t == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32; }

// A row-major [rows, cols] operand of `batch` items `stride` elements apart, stored transposed
// (cols x rows) when `trans`: a 2-D descriptor for one item, else 3-D with a batch of 1 when
// the stride is 0 (a shared operand, broadcast by matmul).
memory::desc operandDesc(int64_t batch, int64_t stride, int64_t rows, int64_t cols, bool trans, DType t) {
  const memory::dim rowStride = trans ? 1 : cols, colStride = trans ? rows : 1;
  if (batch == 1) return memory::desc({rows, cols}, dnnlType(t), memory::dims{rowStride, colStride});
  const memory::dim items = stride == 0 ? 1 : batch, itemStride = stride == 0 ? rows * cols : stride;
  return memory::desc({items, rows, cols}, dnnlType(t), memory::dims{itemStride, rowStride, colStride});
}
}  // namespace

struct CpuGemm::OneDnn {
  dnnl::stream* stream = nullptr;
  dnnl::matmul primitive;
  memory a, b, c;
  memory bias, residual;  // empty unless the primitive fuses them
  bool geluFromPre = false;  // dst is the pre-activation; run() computes C = gelu(pre)
};

namespace {
/// The primitive attributes and bias descriptor for the parts of `e` oneDNN computes, with
/// every buffer f32 (CpuGemm.h); `fused` says which parts, `rest` keeps the others.
struct OneDnnEpilogue {
  dnnl::primitive_attr attr;
  memory::desc bias, residual;
  GemmEpilogue fused, rest;
  bool geluFromPre = false;
};

OneDnnEpilogue oneDnnEpilogue(const GemmStep& g, const GemmDTypes& types, const GemmEpilogueOperands& o,
                              const memory::desc& cm, bool fuse) {
  OneDnnEpilogue r;
  r.rest = g.epilogue;
  dnnl::post_ops ops;
  if (g.accumulate) ops.append_sum(1.0f);
  const GemmEpilogue& e = g.epilogue;
  const bool allF32 = !types.anyBF16() && !(o.bias && o.biasBF16) && !(o.preActivation && o.preActivationBF16) &&
                      !(o.residual && o.residualBF16);
  // Not with accumulate: oneDNN adds the bias before the sum post-op, the epilogue after it.
  if (fuse && allF32 && !g.accumulate && !e.empty()) {
    if (e.bias >= 0 && o.bias) {
      r.bias = g.batch == 1 ? memory::desc({1, g.n}, memory::data_type::f32, memory::format_tag::ab)
                            : memory::desc({1, 1, g.n}, memory::data_type::f32, memory::format_tag::abc);
      r.fused.bias = e.bias, r.rest.bias = -1;
    }
    if (e.gelu && e.preActivation >= 0 && o.preActivation && e.residual < 0) {
      r.geluFromPre = true;  // dst = pre = P + bias; then C = gelu(pre)
      r.fused.gelu = true, r.fused.preActivation = e.preActivation;
      r.rest.gelu = false, r.rest.preActivation = -1;
    } else if (e.gelu && e.preActivation < 0 && e.residual < 0) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
      r.fused.gelu = true, r.rest.gelu = false;
    }
    if (e.residual >= 0 && o.residual && !e.gelu) {
      ops.append_binary(dnnl::algorithm::binary_add, cm);
      r.residual = cm;
      r.fused.residual = e.residual, r.rest.residual = -1;
    }
  }
  r.attr.set_post_ops(ops);
  return r;
}
}  // namespace

CpuGemm::CpuGemm(const GemmStep& step, GemmDTypes types, GemmBackend backend, const void* a, const void* b, void* c,
                 GemmF32Scratch scratch, CpuGemmContext* context, const GemmEpilogueOperands& epilogue)
    : step_(step),
      types_(types),
      backend_(backend == GemmBackend::Default ? GemmBackend::OpenBlas : backend),
      a_(a),
      b_(b),
      c_(c),
      scratch_(scratch),
      epilogue_(epilogue),
      rest_(step) {
  const GemmStep& g = step_;
  const std::string where = g.location.empty() ? "?" : g.location;
  if (backend_ == GemmBackend::OpenBlas) {
    const GemmScratch need = gemmScratchFor(g, types);
    if (types.anyBF16() && (!scratch.base || scratch.sizes.a < need.a || scratch.sizes.b < need.b ||
                            scratch.sizes.c < need.c))
      throw std::runtime_error(fmt::format("CpuGemm: the bf16 GEMM at {} has no f32 scratch of its size", where));
    return;
  }
  if (!oneDnnSupports(types))
    throw std::runtime_error(fmt::format("CpuGemm: oneDNN does not run the GEMM at {} (A {}, B {}, C {}): mixed f32 "
                                         "and bf16 inputs run with OpenBLAS only",
                                         where, dtypeName(types.a), dtypeName(types.b), dtypeName(types.c)));
  if (g.batch > 1 && g.strideC == 0)
    throw std::runtime_error(fmt::format("CpuGemm: the GEMM at {} writes every batch item to one C (strideC 0)", where));
  if (!context) throw std::logic_error("CpuGemm: a oneDNN GEMM needs a CpuGemmContext");
  auto& ctx = context->impl();
  try {
    const memory::desc am = operandDesc(g.batch, g.strideA, g.m, g.k, g.transA, types.a);
    const memory::desc bm = operandDesc(g.batch, g.strideB, g.k, g.n, g.transB, types.b);
    const memory::desc cm = operandDesc(g.batch, g.strideC, g.m, g.n, false, types.c);
    // The epilogue in the primitive where oneDNN computes it; if oneDNN refuses that
    // primitive, the plain matmul with the whole epilogue after it.
    OneDnnEpilogue e = oneDnnEpilogue(g, types, epilogue, cm, /*fuse=*/true);
    std::optional<dnnl::matmul::primitive_desc> pd;
    try {
      pd.emplace(e.bias.is_zero() ? dnnl::matmul::desc(am, bm, cm) : dnnl::matmul::desc(am, bm, e.bias, cm), e.attr,
                 ctx.engine);
    } catch (const dnnl::error&) {
      if (g.epilogue.empty()) throw;
      e = oneDnnEpilogue(g, types, epilogue, cm, /*fuse=*/false);
      pd.emplace(dnnl::matmul::desc(am, bm, cm), e.attr, ctx.engine);
    }
    oneDnn_ = std::make_unique<OneDnn>();
    oneDnn_->stream = &ctx.stream;
    oneDnn_->primitive = dnnl::matmul(*pd);
    oneDnn_->a = memory(am, ctx.engine, const_cast<void*>(a));
    oneDnn_->b = memory(bm, ctx.engine, const_cast<void*>(b));
    oneDnn_->geluFromPre = e.geluFromPre;
    oneDnn_->c = memory(cm, ctx.engine, e.geluFromPre ? epilogue.preActivation : c);
    if (!e.bias.is_zero()) oneDnn_->bias = memory(e.bias, ctx.engine, const_cast<void*>(epilogue.bias));
    if (!e.residual.is_zero()) oneDnn_->residual = memory(e.residual, ctx.engine, const_cast<void*>(epilogue.residual));
    fused_ = e.fused;
    rest_.epilogue = e.rest;
  } catch (const dnnl::error& e) {
    throw std::runtime_error(fmt::format("CpuGemm: oneDNN refuses the GEMM at {} ({}x{}x{}, batch {}): {}", where, g.m,
                                         g.n, g.k, g.batch, e.what()));
  }
}

CpuGemm::~CpuGemm() = default;

void CpuGemm::run() const {
  if (!oneDnn_) {
    runOpenBlas();
  } else {
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, oneDnn_->a}, {DNNL_ARG_WEIGHTS, oneDnn_->b}, {DNNL_ARG_DST, oneDnn_->c}};
    if (oneDnn_->bias) args.emplace(DNNL_ARG_BIAS, oneDnn_->bias);
    // The binary post-op's operand; its index counts the accumulate's sum post-op before it.
    if (oneDnn_->residual)
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(step_.accumulate ? 1 : 0) | DNNL_ARG_SRC_1, oneDnn_->residual);
    oneDnn_->primitive.execute(*oneDnn_->stream, args);
    oneDnn_->stream->wait();
    if (oneDnn_->geluFromPre)
      applyGeluFrom(static_cast<const float*>(epilogue_.preActivation), static_cast<float*>(c_), step_.batch,
                    step_.m * step_.n, step_.strideC);
  }
  if (!rest_.epilogue.empty())
    applyGemmEpilogue(rest_, a_, types_.a == DType::BF16, c_, types_.c == DType::BF16, epilogue_);
}

void CpuGemm::runOpenBlas() const {
  // Row-major op(A) is m x k and op(B) is k x n; the leading dimension is the stored row
  // length: A stored k x m when transposed, B stored n x k when transposed.
  const GemmStep& g = step_;
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int lda = g.transA ? m : k, ldb = g.transB ? k : n;
  const float beta = g.accumulate ? 1.0f : 0.0f;
  const CBLAS_TRANSPOSE ta = g.transA ? CblasTrans : CblasNoTrans, tb = g.transB ? CblasTrans : CblasNoTrans;
  if (!types_.anyBF16()) {
    const float *a = static_cast<const float*>(a_), *b = static_cast<const float*>(b_);
    float* c = static_cast<float*>(c_);
    for (int64_t i = 0; i < g.batch; ++i)
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a + i * g.strideA, lda, b + i * g.strideB, ldb, beta,
                  c + i * g.strideC, n);
    return;
  }
  // bf16 inputs widen exactly to f32; the product accumulates in f32 (sgemm); a bf16 result
  // is rounded once, to nearest even: the numerics of a bf16 tensor-core GEMM with f32
  // accumulation (cuBLASLt CUBLAS_COMPUTE_32F), up to the order of the k-sums.
  float* sa = scratch_.base;
  float* sb = sa + alignedBytes(scratch_.sizes.a * 4) / 4;
  float* sc = sb + alignedBytes(scratch_.sizes.b * 4) / 4;
  auto widen = [](const void* base, bool bf16, int64_t offset, int64_t count, float* into) {
    if (!bf16) return static_cast<const float*>(base) + offset;
    numeric::bf16ToFloat(static_cast<const uint16_t*>(base) + offset, into, count);
    return static_cast<const float*>(into);
  };
  const bool a16 = types_.a == DType::BF16, b16 = types_.b == DType::BF16, c16 = types_.c == DType::BF16;
  for (int64_t i = 0; i < g.batch; ++i) {
    const float* a = widen(a_, a16, i * g.strideA, g.m * g.k, sa);
    const float* b = (i == 0 || g.strideB != 0 || !b16) ? widen(b_, b16, i * g.strideB, g.k * g.n, sb) : sb;
    float* c = c16 ? sc : static_cast<float*>(c_) + i * g.strideC;
    if (c16 && g.accumulate) numeric::bf16ToFloat(static_cast<const uint16_t*>(c_) + i * g.strideC, sc, g.m * g.n);
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, n);
    if (c16) numeric::floatToBF16(sc, static_cast<uint16_t*>(c_) + i * g.strideC, g.m * g.n);
  }
}

}  // namespace tessel::rt
