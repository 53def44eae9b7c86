// Multi-tensor AdamW; see MultiTensorAdamW.h.
#include "codegen/MultiTensorAdamW.h"

#include "compiler/Location.h"
#include "compiler/TesselDialect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessel {
namespace {

bool isF32(mlir::Value v) {
  auto t = mlir::dyn_cast<mlir::RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

/// True if no op of the block after position `at` reads `v` or an alias of it (a reshape or
/// replicate of it: they share its buffer).
bool noReaderAfter(mlir::Value v, size_t at, const llvm::DenseMap<mlir::Operation*, size_t>& index) {
  for (mlir::Operation* user : v.getUsers()) {
    auto it = index.find(user);
    if (it == index.end() || it->second > at) return false;  // nested or later: a reader after
    if (mlir::isa<ReshapeOp, ReplicateOp>(user) && !noReaderAfter(user->getResult(0), at, index)) return false;
  }
  return true;
}

/// The tessel.param named by the assignment of `result`, if `result` has exactly that one use.
mlir::Operation* soleAssign(mlir::Value result, llvm::StringRef name) {
  if (!result.hasOneUse()) return nullptr;
  auto a = mlir::dyn_cast<AssignOp>(*result.getUsers().begin());
  return a && a.getName() == name ? a.getOperation() : nullptr;
}

}  // namespace

std::optional<AdamWUpdate> matchInPlaceAdamW(mlir::Operation* op,
                                             const llvm::DenseMap<mlir::Operation*, size_t>& index) {
  auto fused = mlir::dyn_cast<FusedOp>(op);
  if (!fused || fused.getBody().getBlocks().size() != 1) return std::nullopt;
  mlir::Block& body = fused.getBody().front();
  auto members = body.without_terminator();
  if (std::distance(members.begin(), members.end()) != 2) return std::nullopt;
  auto mul = mlir::dyn_cast<MulOp>(*members.begin());
  auto adamw = mlir::dyn_cast<AdamWOp>(*std::next(members.begin()));
  if (!mul || !adamw || adamw.getGrad() != mul.getResult() || !mul.getResult().hasOneUse()) return std::nullopt;
  // Every other operand is a block argument: map it to the fused op's operand.
  auto outer = [&](mlir::Value inner) -> mlir::Value {
    auto arg = mlir::dyn_cast<mlir::BlockArgument>(inner);
    if (!arg || arg.getOwner() != &body) return {};
    return op->getOperand(arg.getArgNumber());
  };
  AdamWUpdate u;
  u.op = op;
  u.grad = outer(mul.getLhs());
  u.coef = outer(mul.getRhs());
  u.param = outer(adamw.getParam());
  u.expAvg = outer(adamw.getExpAvg());
  u.expAvgSq = outer(adamw.getExpAvgSq());
  mlir::Value hyper[6] = {adamw.getLr(), adamw.getBeta1(), adamw.getBeta2(), adamw.getEps(), adamw.getWeightDecay(),
                          adamw.getStep()};
  for (int k = 0; k < 6; ++k) u.hyper[k] = outer(hyper[k]);
  u.decay = static_cast<bool>(adamw.getDecay());
  for (mlir::Value v : {u.grad, u.coef, u.param, u.expAvg, u.expAvgSq})
    if (!v || !isF32(v)) return std::nullopt;
  for (mlir::Value v : u.hyper)
    if (!v) return std::nullopt;
  if (mlir::cast<mlir::RankedTensorType>(u.coef.getType()).getRank() != 0 || u.grad.getType() != u.param.getType())
    return std::nullopt;
  u.numel = mlir::cast<mlir::RankedTensorType>(u.param.getType()).getNumElements();
  // The results: the fused op yields the adamw's three results, each assigned once to the
  // parameter it updates, and nothing reads the old values after the op.
  auto yield = mlir::cast<YieldOp>(body.getTerminator());
  if (op->getNumResults() != 3 || yield.getValues().size() != 3) return std::nullopt;
  mlir::Value olds[3] = {u.param, u.expAvg, u.expAvgSq};
  mlir::Value news[3] = {adamw.getNewParam(), adamw.getNewExpAvg(), adamw.getNewExpAvgSq()};
  for (int s = 0; s < 3; ++s) {
    auto p = olds[s].getDefiningOp<ParamOp>();
    if (!p || p->getBlock() != op->getBlock() || !noReaderAfter(olds[s], index.lookup(op), index)) return std::nullopt;
    auto at = llvm::find(yield.getValues(), news[s]);
    if (at == yield.getValues().end()) return std::nullopt;
    u.assigns[s] = soleAssign(op->getResult(std::distance(yield.getValues().begin(), at)), p.getName());
    if (!u.assigns[s]) return std::nullopt;
  }
  if (u.param == u.expAvg || u.param == u.expAvgSq || u.expAvg == u.expAvgSq) return std::nullopt;
  return u;
}

namespace {

/// Per update: the first element of each in the concatenation, and the total last.
std::vector<int64_t> starts(const std::vector<AdamWUpdate>& updates) {
  std::vector<int64_t> s{0};
  for (const AdamWUpdate& u : updates) s.push_back(s.back() + u.numel);
  return s;
}

std::string decays(const std::vector<AdamWUpdate>& updates) {
  std::vector<std::string> d;
  for (const AdamWUpdate& u : updates) d.push_back(u.decay ? "true" : "false");
  return fmt::format("{}", fmt::join(d, ", "));
}

std::string header(const std::vector<AdamWUpdate>& updates) {
  std::string s = fmt::format(
      "// multi-tensor adamw{}: {} parameters updated in place, clipped gradients\n"
      "// torch.optim.AdamW per element, as the fused mul+adamw kernel: g = grad * coef;\n"
      "// m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;\n"
      "// p = p * decay - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)\n",
      updates.front().op ? " at " + locationString(updates.front().op->getLoc()) : std::string(), updates.size());
  for (size_t k = 0; k < updates.size(); ++k)
    s += fmt::format("//   {}: {} elements{}\n", k, updates[k].numel, updates[k].decay ? ", decayed" : "");
  return s;
}

}  // namespace

std::string emitMultiTensorAdamWCpp(const std::vector<AdamWUpdate>& updates, const std::string& symbol) {
  const size_t k = updates.size();
  return header(updates) + fmt::format(R"cpp(extern "C" void {0}(void** args) {{
  constexpr int64_t K = {1};
  static constexpr int64_t START[K + 1] = {{{2}}};
  static constexpr bool DECAY[K] = {{{3}}};
  auto scalar = [&](int64_t i) {{ return ((const float*)args[4 * K + i])[0]; }};
  const float coef = scalar(0), lr = scalar(1), b1 = scalar(2), b2 = scalar(3), eps = scalar(4),
              wd = scalar(5), t = scalar(6);
  const float decayOn = 1.0f - lr * wd;
  const float bc1 = 1.0f - powf(b1, t), bc2s = sqrtf(1.0f - powf(b2, t));
  const float stepSize = lr / bc1;
  #pragma omp parallel
  {{
    // This thread's share of the concatenated elements: whole lines of 16 floats.
    const int64_t threads = tessel_thread_count(), me = tessel_thread_index();
    const int64_t lines = (START[K] + 15) / 16;
    const int64_t lo0 = lines * me / threads * 16, hi0 = lines * (me + 1) / threads * 16;
    const int64_t lo = lo0 < START[K] ? lo0 : START[K], hi = hi0 < START[K] ? hi0 : START[K];
    for (int64_t k = 0; k < K; ++k) {{
      const int64_t b = lo > START[k] ? lo : START[k], e = hi < START[k + 1] ? hi : START[k + 1];
      if (b >= e) continue;
      float* p = (float*)args[3 * k] + (b - START[k]);
      float* mo = (float*)args[3 * k + 1] + (b - START[k]);
      float* vo = (float*)args[3 * k + 2] + (b - START[k]);
      const float* gr = (const float*)args[3 * K + k] + (b - START[k]);
      const float decay = DECAY[k] ? decayOn : 1.0f;
      #pragma omp simd
      for (int64_t c = 0; c < e - b; ++c) {{
        const float g = gr[c] * coef;
        const float m = b1 * mo[c] + (1.0f - b1) * g;
        const float v = b2 * vo[c] + (1.0f - b2) * g * g;
        const float q = p[c] * decay;
        mo[c] = m; vo[c] = v;
        p[c] = q - stepSize * m / (sqrtf(v) / bc2s + eps);
      }}
    }}
  }}
}}
)cpp",
                                       symbol, k, fmt::join(starts(updates), ", "), decays(updates));
}

CudaKernel emitMultiTensorAdamWCuda(const std::vector<AdamWUpdate>& updates, const std::string& symbol) {
  constexpr int64_t kThreads = 256, kChunk = kThreads * 4;  // 4 elements per thread
  const size_t k = updates.size();
  std::vector<int64_t> firstBlock{0};
  for (const AdamWUpdate& u : updates) firstBlock.push_back(firstBlock.back() + (u.numel + kChunk - 1) / kChunk);
  std::string params, select;
  for (size_t i = 0; i < k; ++i)
    params += fmt::format("    float* __restrict__ p{0}, float* __restrict__ m{0}, float* __restrict__ v{0},\n", i);
  for (size_t i = 0; i < k; ++i) params += fmt::format("    const float* __restrict__ g{},\n", i);
  for (size_t i = 0; i < k; ++i)
    select += fmt::format("    case {0}: p = p{0}; m = m{0}; v = v{0}; g = g{0}; break;\n", i);
  std::vector<int64_t> sizes;
  for (const AdamWUpdate& u : updates) sizes.push_back(u.numel);
  std::string src = header(updates) + fmt::format(R"cuda(extern "C" __global__ void __launch_bounds__({0}, 4) {1}(
{2}    const float* coefp, const float* lrp, const float* beta1, const float* beta2, const float* epsp,
    const float* wdp, const float* stepp) {{
  constexpr int K = {3};
  constexpr int THREADS = {0}, CHUNK = {4};
  const int FIRST[K + 1] = {{{5}}};  // the first block of each tensor
  const int SIZE[K] = {{{6}}};
  const bool DECAY[K] = {{{7}}};
  int k = 0;
  while (FIRST[k + 1] <= static_cast<int>(blockIdx.x)) ++k;
  float *p = nullptr, *m = nullptr, *v = nullptr;
  const float* g = nullptr;
  switch (k) {{
{8}  }}
  const float coef = coefp[0], lr = lrp[0], b1 = beta1[0], b2 = beta2[0], eps = epsp[0], wd = wdp[0], t = stepp[0];
  const float decay = DECAY[k] ? 1.0f - lr * wd : 1.0f;
  const float bc1 = 1.0f - powf(b1, t), bc2s = sqrtf(1.0f - powf(b2, t));
  const float stepSize = lr / bc1;
  const int chunkEnd = (static_cast<int>(blockIdx.x) - FIRST[k] + 1) * CHUNK;
  const int end = chunkEnd < SIZE[k] ? chunkEnd : SIZE[k];
  for (int i = (static_cast<int>(blockIdx.x) - FIRST[k]) * CHUNK + threadIdx.x; i < end; i += THREADS) {{
    const float gc = g[i] * coef;
    const float mn = b1 * m[i] + (1.0f - b1) * gc;
    const float vn = b2 * v[i] + (1.0f - b2) * gc * gc;
    const float pn = p[i] * decay - stepSize * mn / (sqrtf(vn) / bc2s + eps);
    m[i] = mn;
    v[i] = vn;
    p[i] = pn;
  }}
}}
)cuda",
                                                  kThreads, symbol, params, k, kChunk, fmt::join(firstBlock, ", "),
                                                  fmt::join(sizes, ", "), decays(updates), select);
  CudaKernel out;
  out.source = std::move(src);
  out.launch = CudaLaunch{{static_cast<unsigned>(firstBlock.back()), 1, 1}, {kThreads, 1, 1}, 0};
  out.kind = CudaKernelKind::Elementwise;
  return out;
}

}  // namespace tessel
