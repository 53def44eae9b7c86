// The CUDA kernel emitter: the public entry points, the kernel writer, the launch rules and
// the elementwise loop generator. The per-op emitters live in
// CudaEmitter{Elementwise,Rows,Layout,Fused,Vocab,Norm,Attention}.cpp, the two-level sums'
// scratch in CudaEmitterScratch.cpp, the device math every kernel file starts with in
// CudaPreamble.cpp.
//
// 1. hasCudaKernel: hasCppKernel (same ops, same types), or a tessel.fused region that
//    fusedSupported accepts.
// 2. emitCudaKernel: a CudaWriter declares the parameters (results, then operands), the
//    op's emitter adds constants, body templates and the launch, and the writer assembles
//    the kernel.
#include "codegen/CudaEmitter.h"

#include "codegen/CppEmitter.h"
#include "codegen/CudaEmitterInternal.h"
#include "codegen/KernelKind.h"
#include "compiler/Location.h"


#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace tessel {
namespace cudagen {

// ---- launch rules and shared generators ------------------------------------------------------

unsigned flatThreads(int64_t work) {
  int64_t t = std::clamp<int64_t>((work + 31) / 32 * 32, 32, 256);
  return static_cast<unsigned>(t);
}

unsigned flatBlocks(int64_t work, unsigned threads) {
  int64_t blocks =
      std::clamp<int64_t>((work + threads - 1) / threads, 1, kResidentThreads / threads);
  return static_cast<unsigned>(blocks);
}

unsigned rowThreads(int64_t len) {
  int64_t t = std::clamp<int64_t>(((len + 3) / 4 + 31) / 32 * 32, 64, 512);
  return static_cast<unsigned>(t);
}

std::string vectorType(mlir::Value v) {
  std::string type = cppgen::elementType(v);
  return type == "float" ? "float4" : type == "tessel_bf16" ? "uint2" : "int4";
}

/// Every operand and result of `op` is an f32 tensor.
static bool allF32(mlir::Operation* op) {
  auto f32 = [](mlir::Type t) {
    return mlir::cast<mlir::RankedTensorType>(t).getElementType().isF32();
  };
  return llvm::all_of(op->getOperandTypes(), f32) && llvm::all_of(op->getResultTypes(), f32);
}

std::string blockReduce(const std::string& var, const std::string& op) {
  const bool dbl = op == "dsum";
  const std::string fn = op == "max" ? "tessel_warp_max"
                         : dbl       ? "tessel_warp_sum_d"
                                     : "tessel_warp_sum";
  const std::string neutral = op == "max" ? "-INFINITY" : dbl ? "0.0" : "0.0f";
  const std::string buf = dbl ? "redd" : "red";
  return fmt::format(
      "{0} = {1}({0});  // block {4}: warps, then one partial per warp\n"
      "if (lane == 0) {3}[warp] = {0};\n"
      "__syncthreads();\n"
      "{0} = {1}(lane < NWARPS ? {3}[lane] : {2});\n"
      "__syncthreads();  // {3} is reused by the next reduction\n",
      var, fn, neutral, buf, op == "max" ? "max" : "sum");
}

std::string indexCode(const std::string& index, const std::vector<cppgen::Group>& groups,
                      const std::string& inOffset, const std::string& outOffset) {
  std::string s = fmt::format("idx_t {} = 0;\n", inOffset);
  if (!outOffset.empty()) s += fmt::format("idx_t {} = 0;\n", outOffset);
  auto add = [](const std::string& var, const std::string& coord, int64_t stride) {
    if (var.empty() || stride == 0) return std::string();
    return stride == 1 ? fmt::format(" {} += {};", var, coord)
                       : fmt::format(" {} += {} * {};", var, coord, stride);
  };
  if (groups.empty()) return s;
  if (groups.size() == 1)
    return s + "{" + add(inOffset, index, groups[0].inStride) +
           add(outOffset, index, groups[0].outStride) + " }\n";
  s += fmt::format("{{\n  idx_t rem = {};\n", index);
  for (size_t k = groups.size(); k-- > 1;) {
    const cppgen::Group& g = groups[k];
    s += fmt::format("  {{ const idx_t c = rem % {}; rem /= {};{}{} }}\n", g.size, g.size,
                     add(inOffset, "c", g.inStride), add(outOffset, "c", g.outStride));
  }
  s += fmt::format(" {}{}\n}}\n", add(inOffset, "rem", groups[0].inStride),
                   add(outOffset, "rem", groups[0].outStride));
  return s;
}

void emitElementwiseLoop(CudaWriter& w, int64_t n, const std::vector<EwInput>& inputs,
                         const std::vector<EwOutput>& outputs, const std::string& body,
                         bool vectorize) {
  // float4 lanes compute in f32 straight from f32 storage; bf16 kernels take the scalar loop.
  vectorize = vectorize && n >= 4 && n % 4 == 0 && allF32(w.op());
  for (const EwInput& in : inputs) vectorize = vectorize && in.period % 4 == 0;
  std::string scalarLoads, scalarStores;
  for (const EwInput& in : inputs)
    scalarLoads += in.period == 0
                       ? fmt::format("const float {} = {}[i];\n", in.var, in.ptr)
                       : fmt::format("const float {} = {}[i % {}];\n", in.var, in.ptr, in.period);
  for (const EwOutput& out : outputs)
    scalarStores += fmt::format("{}[i] = {};\n", out.ptr, out.var);
  std::string code =
      "const idx_t stride = static_cast<idx_t>(gridDim.x) * THREADS;\n"
      "const idx_t start = static_cast<idx_t>(blockIdx.x) * THREADS + threadIdx.x;\n";
  std::string scalarLoop = "for (idx_t i = start; i < N; i += stride) {\n" +
                           indent(scalarLoads + body + scalarStores, 2) + "}\n";
  if (!vectorize) {
    w.code(code + scalarLoop);
  } else {
    std::vector<std::string> aligned;
    for (const EwOutput& out : outputs)
      aligned.push_back(fmt::format("tessel_aligned16({})", out.ptr));
    for (const EwInput& in : inputs) aligned.push_back(fmt::format("tessel_aligned16({})", in.ptr));
    std::string vec;
    for (const EwInput& in : inputs)
      vec += in.period == 0
                 ? fmt::format("const float4 {}4 = reinterpret_cast<const float4*>({})[i];\n",
                               in.var, in.ptr)
                 : fmt::format("const float4 {}4 = reinterpret_cast<const float4*>({})[i % {}];\n",
                               in.var, in.ptr, in.period / 4);
    for (const EwOutput& out : outputs) vec += fmt::format("float4 {}4;\n", out.var);
    for (const char* comp : {"x", "y", "z", "w"}) {
      std::string lane;
      for (const EwInput& in : inputs)
        lane += fmt::format("const float {0} = {0}4.{1};\n", in.var, comp);
      lane += body;
      for (const EwOutput& out : outputs) lane += fmt::format("{0}4.{1} = {0};\n", out.var, comp);
      vec += "{\n" + indent(lane, 2) + "}\n";
    }
    for (const EwOutput& out : outputs)
      vec += fmt::format("reinterpret_cast<float4*>({})[i] = {}4;\n", out.ptr, out.var);
    code += fmt::format("if ({}) {{  // 128-bit accesses\n", fmt::join(aligned, " && "));
    code += "  for (idx_t i = start; i < N / 4; i += stride) {\n" + indent(vec, 4) + "  }\n";
    code += "} else {\n" + indent(scalarLoop, 2) + "}\n";
    w.code(code);
  }
  int64_t work = vectorize ? n / 4 : n;
  unsigned threads = flatThreads(work);
  w.launch(flatBlocks(work, threads), threads,
           vectorize ? "one thread per 4 elements (grid-stride)"
                     : "one thread per element (grid-stride)");
}

// ---- CudaWriter -----------------------------------------------------------------------------

namespace {

std::string fill(std::string_view text, const Subst& subst) {
  std::string filled;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$') {
      filled += text[i++];
      continue;
    }
    size_t end = i + 1;
    while (end < text.size() &&
           (std::isupper(static_cast<unsigned char>(text[end])) ||
            std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '_'))
      ++end;
    std::string_view key = text.substr(i + 1, end - i - 1);
    auto it = subst.find(key);
    if (it != subst.end()) {
      filled += it->second;
    } else {
      throw std::logic_error(
          fmt::format("CUDA emitter: no value for placeholder '{}'", text.substr(i, end - i)));
    }
    i = end;
  }
  return filled;
}

/// Every line of `text` indented by two spaces; blank lines dropped.
std::string indentBody(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (line.find_first_not_of(' ') != std::string_view::npos) out += fmt::format("  {}\n", line);
    start = end + 1;
  }
  return out;
}

}  // namespace

CudaWriter::CudaWriter(mlir::Operation* op, std::string symbol)
    : op_(op), symbol_(std::move(symbol)) {
  // 32-bit indices while every tensor (and every grid-stride index, which may overshoot by
  // one grid) stays far below 2^31.
  int64_t largest = 0;
  for (mlir::Value v : op->getResults()) largest = std::max(largest, numel(shapeOf(v)));
  for (mlir::Value v : op->getOperands()) largest = std::max(largest, numel(shapeOf(v)));
  wideIndex_ = largest >= (int64_t{1} << 30);
}

void CudaWriter::describe(std::string_view formula) {
  description_ += fmt::format("// {}\n", formula);
}

void CudaWriter::declare(std::string_view name, mlir::Value value, const Letters& letters,
                         bool isOutput) {
  paramLines_.push_back(
      fmt::format("    {}{}* {}", isOutput ? "" : "const ", cppgen::elementType(value), name));
  paramComments_.push_back(shapeComment(name, shapeOf(value), letters));
  ++next_;
}

void CudaWriter::output(std::string_view name, mlir::Value value, const Letters& letters) {
  declare(name, value, letters, true);
}

void CudaWriter::input(std::string_view name, mlir::Value value, const Letters& letters) {
  declare(name, value, letters, false);
}

void CudaWriter::constant(std::string_view name, int64_t value, std::string_view comment) {
  std::string decl = fmt::format("constexpr idx_t {} = {};", name, value);
  constants_ += comment.empty() ? decl + "\n" : fmt::format("{}  // {}\n", decl, comment);
}

void CudaWriter::constantF(std::string_view name, double value, std::string_view comment) {
  std::string decl = fmt::format("constexpr float {} = {};", name, floatLit(value));
  constants_ += comment.empty() ? decl + "\n" : fmt::format("{}  // {}\n", decl, comment);
}

void CudaWriter::useBlockReductions(bool floats, bool doubles) {
  reductions_ = true;
  floatReductions_ = floatReductions_ || floats;
  doubleReductions_ = doubleReductions_ || doubles;
}

void CudaWriter::code(std::string_view text, const Subst& subst) { body_ += fill(text, subst); }

void CudaWriter::launch(unsigned gridX, unsigned threads, std::string_view why, unsigned gridY,
                        unsigned gridZ, unsigned blockY) {
  launch_ = CudaLaunch{{gridX, gridY, gridZ}, {threads, blockY, 1}, 0};
  launchComment_ = fmt::format("// launch: grid ({}, {}, {}), block ({}, {}, 1): {}", gridX, gridY,
                               gridZ, threads, blockY, why);
}

CudaKernel CudaWriter::finish() const {
  std::string name = op_->getName().getStringRef().str();
  if (next_ != op_->getNumResults() + op_->getNumOperands())
    throw std::logic_error(fmt::format("CUDA emitter: '{}' declared {} parameters, expected {}",
                                       name, next_, op_->getNumResults() + op_->getNumOperands()));
  std::vector<std::string> lines = paramLines_, comments = paramComments_;
  if (scratchBytes_ > 0) {
    lines.push_back(scratchParam_);
    comments.push_back(fmt::format("// scratch {} bytes: counter, then chunk sums", scratchBytes_));
  }
  if (launch_.block[0] == 0) throw std::logic_error("CUDA emitter: no launch for '" + name + "'");
  // __launch_bounds__(threads, 1024 / threads): at most 64 registers per thread, so that
  // half the threads an SM holds (1024 of 2048 on sm_90) can be resident, the same cap as
  // ptxas's default for an unknown block size. Stating the minimum matters: with (96) alone
  // ptxas chose its own occupancy target (40 registers) and spilled. Loops whose trip count
  // grows with the shapes carry `#pragma unroll 4`, so full unrolling cannot exceed the cap.
  const unsigned threads = launch_.block[0] * launch_.block[1] * launch_.block[2];
  std::string params;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i] + (i + 1 < lines.size() ? "," : ") {");
    line.resize(std::max<size_t>(line.size() + 2, 60), ' ');
    params += line + comments[i] + "\n";
  }
  std::string prologue = launchComment_ + "\n";
  prologue += wideIndex_ ? "typedef int64_t idx_t;  // some tensor has 2^30 elements or more\n"
                         : "typedef int idx_t;\n";
  if (reductions_ || body_.find("THREADS") != std::string::npos)
    prologue += fmt::format("constexpr int THREADS = {};  // threads per block\n", threads);
  if (reductions_) {
    if (floatReductions_)
      prologue += "__shared__ float red[32];  // one partial per warp, for the block reductions\n";
    if (doubleReductions_)
      prologue +=
          "__shared__ double redd[32];  // one partial per warp, for the block reductions\n";
    prologue += "const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n";
    prologue += "constexpr int NWARPS = THREADS / 32;\n";
  }
  return CudaKernel{
      fmt::format(
          "// {} at {}\n{}extern \"C\" __global__ void __launch_bounds__({}, {}) {}(\n{}{}}}\n",
          name, locationString(op_->getLoc()), description_, threads,
          std::max(1u, 1024 / threads), symbol_, params,
          indentBody(prologue + constants_ + scratchDecls_ + body_)),
      launch_, kind_, scratchBytes_};
}

// ---- dispatch -------------------------------------------------------------------------------

namespace {

using EmitFn = void (*)(CudaWriter&);

/// The op's emitter, or nullptr: one case per KernelKind and no default, so -Wswitch
/// flags a kind this emitter forgets.
EmitFn emitterFor(mlir::Operation* op) {
  std::optional<KernelKind> kind = kernelKindOf(op);
  if (!kind) return nullptr;
  switch (*kind) {
    case KernelKind::Binary:
      return &emitBinary;
    case KernelKind::Unary:
      return &emitUnary;
    case KernelKind::Constant:
      return &emitConstant;
    case KernelKind::LayerNorm:
      return &emitLayerNorm;
    case KernelKind::Softmax:
      return &emitSoftmax;
    case KernelKind::CrossEntropy:
      return &emitCrossEntropy;
    case KernelKind::Embedding:
      return &emitEmbedding;
    case KernelKind::SoftmaxGrad:
      return &emitSoftmaxGrad;
    case KernelKind::LayerNormGrad:
      return &emitLayerNormGrad;
    case KernelKind::RmsNorm:
      return &emitRmsNorm;
    case KernelKind::RmsNormGrad:
      return &emitRmsNormGrad;
    case KernelKind::EmbeddingGrad:
      return &emitEmbeddingGrad;
    case KernelKind::CrossEntropyGrad:
      return &emitCrossEntropyGrad;
    case KernelKind::FusedClassifier:
      return &emitFusedClassifier;
    case KernelKind::Transpose:
      return &emitTranspose;
    case KernelKind::Split:
      return &emitSplit;
    case KernelKind::Concat:
      return &emitConcat;
    case KernelKind::DynamicSlice:
      return &emitDynamicSlice;
    case KernelKind::Reduce:
      return &emitReduce;
    case KernelKind::Broadcast:
      return &emitBroadcast;
    case KernelKind::AdamW:
      return &emitAdamW;
    case KernelKind::SGD:
      return &emitSGD;
    case KernelKind::GlobalNorm:
      return &emitGlobalNorm;
    case KernelKind::ClipCoefficient:
      return &emitClipCoefficient;
    case KernelKind::EmbeddingShard:
      return &emitEmbeddingShard;
    case KernelKind::EmbeddingShardGrad:
      return &emitEmbeddingShardGrad;
    case KernelKind::RowMax:
      return &emitRowMax;
    case KernelKind::SumExp:
      return &emitSumExp;
    case KernelKind::SumExpGrad:
      return &emitSumExpGrad;
    case KernelKind::TargetLogit:
      return &emitTargetLogit;
    case KernelKind::MaskVocabPadding:
      return &emitMaskVocabPadding;
    case KernelKind::TargetLogitGrad:
      return &emitTargetLogitGrad;
    case KernelKind::CrossEntropyFromStats:
      return &emitCrossEntropyFromStats;
    case KernelKind::CrossEntropyFromStatsGrad:
      return &emitCrossEntropyFromStatsGrad;
    case KernelKind::Rope:
      return &emitRope;
    case KernelKind::Attention:
      return &emitAttention;
    case KernelKind::AttentionGrad:
      return &emitAttentionGrad;
    case KernelKind::Fused:
      return &emitFused;
  }
  return nullptr;
}

/// Kernel for an op whose results are all empty: the parameters and nothing to compute.
void emitEmpty(CudaWriter& w) {
  mlir::Operation* op = w.op();
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    w.output(fmt::format("out{}", i), v, genericLetters(shapeOf(v).size()));
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    w.input(fmt::format("in{}", i), v, genericLetters(shapeOf(v).size()));
  w.code("// every result has zero elements: nothing to compute\n");
  w.launch(1, 32, "nothing to compute (a grid cannot be empty)");
}

}  // namespace
}  // namespace cudagen

const char* kindName(CudaKernelKind kind) {
  switch (kind) {
    case CudaKernelKind::Elementwise:
      return "elementwise";
    case CudaKernelKind::Layout:
      return "layout";
    case CudaKernelKind::Row:
      return "row";
    case CudaKernelKind::Reduction:
      return "reduction";
    case CudaKernelKind::Scalar:
      return "scalar";
    case CudaKernelKind::FusedElementwise:
      return "fused-elementwise";
    case CudaKernelKind::FusedRow:
      return "fused-row";
  }
  return "?";
}

bool hasCudaKernel(mlir::Operation* op) {
  std::optional<KernelKind> kind = kernelKindOf(op);
  if (!kind) return false;
  if (*kind == KernelKind::Fused) return cudagen::fusedSupported(op);
  if (*kind == KernelKind::AttentionGrad && !cudagen::attentionFitsCuda(op)) return false;
  return hasCppKernel(op) && cudagen::emitterFor(op) != nullptr;
}

CudaKernel emitCudaKernel(mlir::Operation* op, llvm::StringRef symbol) {
  if (!hasCudaKernel(op)) {
    throw std::invalid_argument(fmt::format("the CUDA emitter has no kernel for '{}' at {}",
                                            op->getName().getStringRef().str(),
                                            locationString(op->getLoc())));
  }
  cudagen::CudaWriter writer(op, symbol.str());
  bool empty = op->getNumResults() > 0;
  for (mlir::Value v : op->getResults()) empty = empty && cudagen::numel(cudagen::shapeOf(v)) == 0;
  if (empty)
    cudagen::emitEmpty(writer);
  else
    cudagen::emitterFor(op)(writer);
  return writer.finish();
}

}  // namespace tessel
