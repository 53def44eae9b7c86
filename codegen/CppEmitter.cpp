// The C++ kernel emitter: the public entry points, the preamble, the kernel writer and the
// shared helpers. The per-op emitters live in CppEmitter{Elementwise,Rows,Grad,Layout,Optim}.cpp.
//
// 1. hasCppKernel: the op has an emitter (emitterFor) and every operand and result is a static
//    f32 or i32 tensor.
// 2. emitCppKernel: a KernelWriter declares the arguments (results, then operands), the op's
//    emitter adds constants and a body template, and the writer assembles the function.
#include "codegen/CppEmitter.h"
#include "codegen/KernelMathText.h"  // generated from runtime/numeric/KernelMath.inc

#include "codegen/CppEmitterInternal.h"
#include "codegen/KernelKind.h"
#include "compiler/Location.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace tessel {
namespace cppgen {

// ---- shape and text helpers -----------------------------------------------------------------

std::vector<int64_t> shapeOf(mlir::Value v) {
  auto shape = mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
  return {shape.begin(), shape.end()};
}

int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

int64_t numel(const std::vector<int64_t>& shape) { return product(shape, 0, shape.size()); }

std::string floatLit(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f)) return "NAN";
  if (std::isinf(f)) return f > 0 ? "INFINITY" : "-INFINITY";
  std::string s = fmt::format("{}", f);  // the shortest text that reads back as f
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

std::string elementType(mlir::Value v) { return kernelcommon::storageType(v); }

Letters leadingLetters(size_t count) {
  if (count == 1) return {"N"};
  if (count == 2) return {"B", "T"};
  Letters out;
  for (size_t i = 0; i < count; ++i) out.push_back(fmt::format("d{}", i));
  return out;
}

Letters rowLetters(size_t rank, const std::string& last) {
  if (rank == 0) return {};
  Letters out = leadingLetters(rank - 1);
  out.push_back(last);
  return out;
}

Letters genericLetters(size_t rank) {
  if (rank <= 3) return rowLetters(rank);
  return leadingLetters(rank);  // d0, d1, ...
}

Letters suffixLetters(const Letters& letters, size_t count) {
  return Letters(letters.end() - std::min(count, letters.size()), letters.end());
}

std::string parallelFor(int64_t work, int64_t iterations, bool simd) {
  // Waking the OpenMP pool costs a few microseconds; 32 Ki elements of work is ~10 us on one
  // core, so smaller loops stay serial.
  if (work >= (int64_t{1} << 15) && iterations > 1)
    return simd ? "#pragma omp parallel for simd schedule(static)"
                : "#pragma omp parallel for schedule(static)";
  return simd ? "#pragma omp simd" : "";
}

std::string decompose(std::string_view index, const std::vector<Group>& groups,
                      std::string_view inOffset, std::string_view outOffset) {
  std::string s;
  if (!inOffset.empty()) s += fmt::format("int64_t {} = 0;\n", inOffset);
  if (!outOffset.empty()) s += fmt::format("int64_t {} = 0;\n", outOffset);
  if (groups.empty()) return s;
  auto add = [&](std::string_view var, std::string_view coord, int64_t stride) {
    if (var.empty() || stride == 0) return std::string();
    return stride == 1 ? fmt::format(" {} += {};", var, coord)
                       : fmt::format(" {} += {} * {};", var, coord, stride);
  };
  if (groups.size() == 1) {  // no splitting needed
    std::string line = add(inOffset, index, groups[0].inStride) +
                       add(outOffset, index, groups[0].outStride);
    return line.empty() ? s : s + line.substr(1) + "\n";
  }
  s += fmt::format("{{\n  int64_t rem = {};\n", index);
  for (size_t k = groups.size(); k-- > 1;) {
    const Group& g = groups[k];
    s += fmt::format("  {{ const int64_t c = rem % {}; rem /= {};{}{} }}\n", g.size, g.size,
                     add(inOffset, "c", g.inStride), add(outOffset, "c", g.outStride));
  }
  s += fmt::format(" {}{}\n}}\n", add(inOffset, "rem", groups[0].inStride),
                   add(outOffset, "rem", groups[0].outStride));
  return s;
}

// ---- KernelWriter ---------------------------------------------------------------------------

KernelWriter::KernelWriter(mlir::Operation* op, std::string symbol)
    : op_(op), symbol_(std::move(symbol)) {}

void KernelWriter::describe(std::string_view formula) {
  description_ += fmt::format("// {}\n", formula);
}

std::string KernelWriter::pointerDecl(mlir::Value value, bool isOutput) const {
  std::string type = elementType(value);
  return isOutput ? fmt::format("static_cast<{}*>(args[{}])", type, next_)
                  : fmt::format("static_cast<const {}*>(args[{}])", type, next_);
}

void KernelWriter::declare(std::string_view name, mlir::Value value, const Letters& letters,
                           bool isOutput) {
  std::string type = elementType(value);
  std::string decl = fmt::format("  {}{}* {} = {};", isOutput ? "" : "const ", type, name,
                                 pointerDecl(value, isOutput));
  args_ += withComment(decl, shapeComment(name, shapeOf(value), letters));
  ++next_;
}

void KernelWriter::output(std::string_view name, mlir::Value value, const Letters& letters) {
  declare(name, value, letters, true);
}

void KernelWriter::input(std::string_view name, mlir::Value value, const Letters& letters) {
  declare(name, value, letters, false);
}

void KernelWriter::outputs(std::string_view name, mlir::ValueRange values,
                           const std::vector<Letters>& letters) {
  std::string type = elementType(values[0]);
  args_ += fmt::format("  {}* const {}[{}] = {{\n", type, name, values.size());
  for (auto [i, v] : llvm::enumerate(values)) {
    args_ += withComment("      " + pointerDecl(v, true) + ",",
                         shapeComment(fmt::format("{}[{}]", name, i), shapeOf(v), letters[i]));
    ++next_;
  }
  args_ += "  };\n";
}

void KernelWriter::inputs(std::string_view name, mlir::ValueRange values,
                          const std::vector<Letters>& letters) {
  std::string type = elementType(values[0]);
  args_ += fmt::format("  const {}* const {}[{}] = {{\n", type, name, values.size());
  for (auto [i, v] : llvm::enumerate(values)) {
    args_ += withComment("      " + pointerDecl(v, false) + ",",
                         shapeComment(fmt::format("{}[{}]", name, i), shapeOf(v), letters[i]));
    ++next_;
  }
  args_ += "  };\n";
}

void KernelWriter::constant(std::string_view name, int64_t value, std::string_view comment) {
  std::string decl = fmt::format("  constexpr int64_t {} = {};", name, value);
  constants_ += comment.empty() ? decl + "\n" : withComment(decl, fmt::format("// {}", comment));
}

void KernelWriter::constantF(std::string_view name, double value, std::string_view comment) {
  std::string decl = fmt::format("  constexpr float {} = {};", name, floatLit(value));
  constants_ += comment.empty() ? decl + "\n" : withComment(decl, fmt::format("// {}", comment));
}

void KernelWriter::code(std::string_view text, const Subst& subst) {
  std::string filled;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$') {
      filled += text[i++];
      continue;
    }
    size_t end = i + 1;
    while (end < text.size() && (std::isupper(static_cast<unsigned char>(text[end])) ||
                                 std::isdigit(static_cast<unsigned char>(text[end])) ||
                                 text[end] == '_'))
      ++end;
    auto it = subst.find(text.substr(i + 1, end - i - 1));
    if (it == subst.end())
      throw std::logic_error(fmt::format("C++ emitter: no value for placeholder '{}'",
                                         text.substr(i, end - i)));
    filled += it->second;
    i = end;
  }
  // Indent every line into the function body; a line that a placeholder left blank (an
  // omitted pragma) is dropped.
  size_t start = 0;
  while (start < filled.size()) {
    size_t end = filled.find('\n', start);
    if (end == std::string::npos) end = filled.size();
    std::string_view line(filled.data() + start, end - start);
    if (line.find_first_not_of(' ') != std::string_view::npos)
      body_ += fmt::format("  {}\n", line);
    start = end + 1;
  }
}

std::string KernelWriter::finish() const {
  if (next_ != op_->getNumResults() + op_->getNumOperands())
    throw std::logic_error(fmt::format("C++ emitter: '{}' declared {} arguments, expected {}",
                                       op_->getName().getStringRef().str(), next_,
                                       op_->getNumResults() + op_->getNumOperands()));
  std::string loc = locationString(op_->getLoc());
  return fmt::format("// {} at {}\n{}extern \"C\" void {}(void** args) {{\n{}{}{}}}\n",
                     op_->getName().getStringRef().str(), loc, description_, symbol_, args_,
                     constants_, body_);
}

// ---- dispatch -------------------------------------------------------------------------------

namespace {

using EmitFn = void (*)(KernelWriter&);

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
      return nullptr;  // fused regions are lowered by FusedEmitter, not here
  }
  return nullptr;
}

bool supportedType(mlir::Type type) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape()) return false;
  mlir::Type element = tensor.getElementType();
  return element.isF32() || element.isBF16() || element.isSignlessInteger(32);
}

/// Kernel for an op whose results are all empty: the arguments and nothing to compute.
void emitEmpty(KernelWriter& w) {
  mlir::Operation* op = w.op();
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    w.output(fmt::format("out{}", i), v, genericLetters(shapeOf(v).size()));
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    w.input(fmt::format("in{}", i), v, genericLetters(shapeOf(v).size()));
  w.code("// every result has zero elements: nothing to compute\n");
}

}  // namespace
}  // namespace cppgen

bool hasCppKernel(mlir::Operation* op) {
  if (!cppgen::emitterFor(op)) return false;
  for (mlir::Type t : op->getOperandTypes())
    if (!cppgen::supportedType(t)) return false;
  for (mlir::Type t : op->getResultTypes())
    if (!cppgen::supportedType(t)) return false;
  return true;
}

std::string emitCppKernel(mlir::Operation* op, llvm::StringRef symbol) {
  if (!hasCppKernel(op)) {
    throw std::invalid_argument(fmt::format("the C++ emitter has no kernel for '{}' at {}",
                                            op->getName().getStringRef().str(),
                                            locationString(op->getLoc())));
  }
  cppgen::KernelWriter writer(op, symbol.str());
  bool empty = op->getNumResults() > 0;
  for (mlir::Value v : op->getResults()) empty = empty && cppgen::numel(cppgen::shapeOf(v)) == 0;
  if (empty)
    cppgen::emitEmpty(writer);
  else
    cppgen::emitterFor(op)(writer);
  return writer.finish();
}

std::string emitScratchResetCpp(llvm::StringRef symbol) {
  return fmt::format(
      "// The counter of a CUDA kernel's scratch, set to 0 (the C++ kernels use no scratch).\n"
      "extern \"C\" void {}(void** args) {{\n"
      "  std::memset(args[0], 0, sizeof(unsigned int));  // scratch: counter, then chunk sums\n"
      "}}\n",
      symbol.str());
}

std::string cppKernelPreamble() {
  return R"cpp(// Tessel generated kernels: C++ for the host compiler (codegen/CppEmitter.cpp).
// Each kernel is `extern "C" void symbol(void** args)`, outputs first, then inputs.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef _OPENMP
static inline int tessel_thread_count() { return omp_get_num_threads(); }
static inline int tessel_thread_index() { return omp_get_thread_num(); }
#else
static inline int tessel_thread_count() { return 1; }
static inline int tessel_thread_index() { return 0; }
#endif

static inline float tessel_bits_to_float(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline int32_t tessel_float_to_bits(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, sizeof f);
  return bits;
}
)cpp" + kernelcommon::bf16Preamble("static inline", "") + "\n" + cppgen::kKernelMathText + R"cpp(
// dy * gelu'(x). With s = sigmoid(2u) = 0.5 (1 + tanh(u)) and 1 - tanh(u)^2 = 4 s (1 - s):
// gelu'(x) = s + 2 sqrt(2/pi) x s (1 - s) (1 + 3 * 0.044715 x^2), and 1 - s = e s with
// e = exp(-2u). Below 2u = -80, gelu'(x) is below 1e-30 and counts as 0; above 2u = 40 it
// is 1 in f32 (and x^2 may overflow, so it is not computed). At x = +-inf it is NaN, as in
// the reference and PyTorch.
static inline float tessel_gelu_grad(float x, float dy) {
  const float z = 1.5957691216057308f * (x + 0.044715f * x * x * x);  // 2u
  const float e = tessel_exp(-z);
  const float s = 1.0f / (1.0f + e);
  const float g = s + 1.5957691216057308f * x * (e * s * s) * (1.0f + 0.134145f * x * x);
  // x * 0 keeps the reference's NaN for x = +-inf (where it computes inf * 0).
  return z < -80.0f ? dy * (x * 0.0f) : z > 40.0f ? dy * (1.0f + x * 0.0f) : dy * g;
}

// SiLU: x * sigmoid(x). With e = exp(-|x|) in (0, 1] (it cannot overflow) and d = 1 / (1 + e),
// sigmoid(x) is d for x >= 0 and e d for x < 0, and 1 - sigmoid(x) the other one: both keep
// their relative precision in either tail (1.0f - s would be 0 from x = 17 on). At x = -inf
// the result is -inf * 0 = NaN, as in the reference.
static inline float tessel_silu(float x) {
  const float e = tessel_exp(x < 0.0f ? x : -x);
  const float d = 1.0f / (1.0f + e);
  return x * (x >= 0.0f ? d : e * d);
}

// dy * silu'(x), silu'(x) = s (1 + x (1 - s)) with s = sigmoid(x), s and 1 - s as in
// tessel_silu. At x = +-inf it is NaN (inf * 0), as in the reference and PyTorch.
static inline float tessel_silu_grad(float x, float dy) {
  const float e = tessel_exp(x < 0.0f ? x : -x);
  const float d = 1.0f / (1.0f + e);
  const float s = x >= 0.0f ? d : e * d, sn = x >= 0.0f ? e * d : d;
  return dy * (s * (1.0f + x * sn));
}

// sum of x[i]^2 in double, deterministic for any thread count: fixed blocks of 8 Ki
// elements, each summed by one thread (squares of floats are exact in double), and the block
// sums added in order.
static double tessel_sum_squares(const float* x, int64_t n) {
  constexpr int64_t BLOCK = 8192;
  const int64_t blocks = (n + BLOCK - 1) / BLOCK;
  std::unique_ptr<double[]> partial(new double[blocks > 0 ? blocks : 1]);
#pragma omp parallel for schedule(static) if (blocks >= 4)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * BLOCK, hi = lo + BLOCK < n ? lo + BLOCK : n;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = lo; i < hi; ++i) s += static_cast<double>(x[i]) * x[i];
    partial[b] = s;
  }
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b) total += partial[b];
  return total;
}

)cpp";
}

}  // namespace tessel
