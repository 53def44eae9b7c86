// The fused-kernel emitter; see FusedEmitter.h.
//
// 1. Name every value of the region: inputs are `in<j>`, results `out<k>`; each member
//    result gets a row pointer (its output row if yielded, else a scratch row).
// 2. Emit `for r in rows` (OpenMP static), and inside it one block per member op that reads
//    its operands' rows (row r of full-shape values, row r mod R' of suffix-broadcast values,
//    element 0 of scalars) and writes its results' rows.
#include "codegen/FusedEmitter.h"

#include "codegen/CppEmitterInternal.h"

#include "compiler/RowLocal.h"
#include "compiler/Location.h"
#include "compiler/TesselDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <fmt/format.h>
#include <stdexcept>

namespace tessel {
namespace {

bool isBF16(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType().isBF16();
}

class Emitter {
 public:
  Emitter(FusedOp op, llvm::ArrayRef<int64_t> shape) : op_(op), shape_(shape.begin(), shape.end()) {
    c_ = shape_.back();
    rows_ = 1;
    for (size_t i = 0; i + 1 < shape_.size(); ++i) rows_ *= shape_[i];
  }

  std::string emit(llvm::StringRef symbol);

 private:
  /// An expression for element c of value v's current row (or the scalar).
  std::string at(mlir::Value v) {
    auto it = scalar_.find(v);
    if (it != scalar_.end()) return it->second;
    return rowPtr_.lookup(v) + "[c]";
  }
  std::string row(mlir::Value v) { return rowPtr_.lookup(v); }
  std::string scalarOf(mlir::Value v) { return scalar_.lookup(v); }
  void elementwise(mlir::Value result, const std::string& expr) {
    body_ += fmt::format("      #pragma omp simd\n      for (int64_t c = 0; c < C; ++c) {}[c] = {};\n",
                         row(result), expr);
  }
  void member(mlir::Operation* m);
  /// The member ops without the dialect, in body order: "add, layer_norm".
  std::string memberNames() { return fmt::format("{}", fmt::join(kernelcommon::fusedMemberNames(op_), ", ")); }

  FusedOp op_;
  std::vector<int64_t> shape_;
  int64_t rows_ = 1, c_ = 1;
  llvm::DenseMap<mlir::Value, std::string> rowPtr_;  // row pointer expressions
  llvm::DenseMap<mlir::Value, std::string> scalar_;  // scalar value expressions
  std::string body_;
};

void Emitter::member(mlir::Operation* m) {
  body_ += fmt::format("      // {} at {}\n", m->getName().getStringRef().str(), locationString(m->getLoc()));
  llvm::TypeSwitch<mlir::Operation*>(m)
      .Case([&](AddOp o) { elementwise(o, at(o.getLhs()) + " + " + at(o.getRhs())); })
      .Case([&](SubOp o) { elementwise(o, at(o.getLhs()) + " - " + at(o.getRhs())); })
      .Case([&](MulOp o) { elementwise(o, at(o.getLhs()) + " * " + at(o.getRhs())); })
      .Case([&](ScaleOp o) {
        elementwise(o, fmt::format("{} * {}", at(o.getInput()), cppgen::floatLit(o.getFactor().convertToDouble())));
      })
      .Case([&](GeluOp o) { elementwise(o, fmt::format("tessel_gelu({})", at(o.getInput()))); })
      .Case([&](ReluOp o) { elementwise(o, fmt::format("{0} > 0.0f ? {0} : 0.0f", at(o.getInput()))); })
      .Case([&](CastOp o) { elementwise(o, at(o.getInput())); })  // rounded below if bf16
      .Case([&](GeluGradOp o) {
        elementwise(o, fmt::format("tessel_gelu_grad({}, {})", at(o.getInput()), at(o.getGrad())));
      })
      .Case([&](ReluGradOp o) {
        elementwise(o, fmt::format("{} > 0.0f ? {} : 0.0f", at(o.getInput()), at(o.getGrad())));
      })
      .Case([&](SiluOp o) { elementwise(o, fmt::format("tessel_silu({})", at(o.getInput()))); })
      .Case([&](SiluGradOp o) {
        elementwise(o, fmt::format("tessel_silu_grad({}, {})", at(o.getInput()), at(o.getGrad())));
      })
      .Case([&](RmsNormOp o) {
        body_ += fmt::format(
            "      {{ const float* x = {0};\n"
            "        float ss = 0.0f;\n"
            "        #pragma omp simd reduction(+ : ss)\n"
            "        for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];\n"
            "        const float rstd = 1.0f / sqrtf(ss / (float)C + {3});\n"
            "        #pragma omp simd\n"
            "        for (int64_t c = 0; c < C; ++c) {2}[c] = x[c] * rstd * {1}[c]; }}\n",
            row(o.getInput()), row(o.getWeight()), row(o.getResult()),
            cppgen::floatLit(o.getEpsilon().convertToDouble()));
      })
      .Case([&](SoftmaxOp o) {
        std::string x = row(o.getInput()), y = row(o.getResult());
        std::string n = o.getCausal() ? fmt::format("(r % {}) + 1", shape_[shape_.size() - 2]) : "C";
        body_ += fmt::format(
            "      {{ const int64_t n = {2};\n"
            "        float mx = -INFINITY;\n"
            "        for (int64_t c = 0; c < n; ++c) mx = {0}[c] > mx ? {0}[c] : mx;\n"
            "        float sum = 0.0f;\n"
            "        for (int64_t c = 0; c < n; ++c) {{ {1}[c] = tessel_exp({0}[c] - mx); sum += {1}[c]; }}\n"
            "        const float inv = 1.0f / sum;\n"
            "        #pragma omp simd\n"
            "        for (int64_t c = 0; c < n; ++c) {1}[c] *= inv;\n"
            "        for (int64_t c = n; c < C; ++c) {1}[c] = 0.0f; }}\n",
            x, y, n);
      })
      .Case([&](SoftmaxGradOp o) {
        body_ += fmt::format(
            "      {{ float dot = 0.0f;\n"
            "        #pragma omp simd reduction(+ : dot)\n"
            "        for (int64_t c = 0; c < C; ++c) dot += {0}[c] * {1}[c];\n"
            "        #pragma omp simd\n"
            "        for (int64_t c = 0; c < C; ++c) {2}[c] = {0}[c] * ({1}[c] - dot); }}\n",
            row(o.getOutput()), row(o.getGrad()), row(o.getResult()));
      })
      .Case([&](LayerNormOp o) {
        body_ += fmt::format(
            "      {{ const float* x = {0};\n"
            "        float mean = 0.0f;\n"
            "        #pragma omp simd reduction(+ : mean)\n"
            "        for (int64_t c = 0; c < C; ++c) mean += x[c];\n"
            "        mean /= (float)C;\n"
            "        float var = 0.0f;\n"
            "        #pragma omp simd reduction(+ : var)\n"
            "        for (int64_t c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean);\n"
            "        const float rstd = 1.0f / sqrtf(var / (float)C + {4});\n"
            "        #pragma omp simd\n"
            "        for (int64_t c = 0; c < C; ++c) {3}[c] = (x[c] - mean) * rstd * {1}[c] + {2}[c]; }}\n",
            row(o.getInput()), row(o.getGamma()), row(o.getBeta()), row(o.getResult()),
            cppgen::floatLit(o.getEpsilon().convertToDouble()));
      })
      .Case([&](AdamWOp o) {
        // torch.optim.AdamW (single tensor): decay, moments, bias-corrected step.
        body_ += fmt::format(
            "      {{ const float lr = {4}, b1 = {5}, b2 = {6}, eps = {7}, wd = {8}, t = {9};\n"
            "        const float decay = {13} ? 1.0f - lr * wd : 1.0f;\n"
            "        const float bc1 = 1.0f - powf(b1, t), bc2s = sqrtf(1.0f - powf(b2, t));\n"
            "        const float stepSize = lr / bc1;\n"
            "        #pragma omp simd\n"
            "        for (int64_t c = 0; c < C; ++c) {{\n"
            "          const float g = {1}[c];\n"
            "          const float m = b1 * {2}[c] + (1.0f - b1) * g;\n"
            "          const float v = b2 * {3}[c] + (1.0f - b2) * g * g;\n"
            "          const float p = {0}[c] * decay;\n"
            "          {11}[c] = m; {12}[c] = v;\n"
            "          {10}[c] = p - stepSize * m / (sqrtf(v) / bc2s + eps);\n"
            "        }} }}\n",
            row(o.getParam()), row(o.getGrad()), row(o.getExpAvg()), row(o.getExpAvgSq()),
            scalarOf(o.getLr()), scalarOf(o.getBeta1()), scalarOf(o.getBeta2()), scalarOf(o.getEps()),
            scalarOf(o.getWeightDecay()), scalarOf(o.getStep()), row(o.getNewParam()),
            row(o.getNewExpAvg()), row(o.getNewExpAvgSq()), o.getDecay() ? "true" : "false");
      })
      .Case([&](SGDOp o) {
        body_ += fmt::format(
            "      {{ const float lr = {3}, mom = {4}, wd = {5};\n"
            "        const bool first = {6} == 1.0f;\n"
            "        #pragma omp simd\n"
            "        for (int64_t c = 0; c < C; ++c) {{\n"
            // torch.optim.SGD: with momentum 0 the buffer is unused and passed through.
            "          const float g = {1}[c] + ({9} ? wd * {0}[c] : 0.0f);\n"
            "          const float buf = mom == 0.0f ? {2}[c] : first ? g : mom * {2}[c] + g;\n"
            "          const float update = mom == 0.0f ? g : buf;\n"
            "          {8}[c] = buf;\n"
            "          {7}[c] = {0}[c] - lr * update;\n"
            "        }} }}\n",
            row(o.getParam()), row(o.getGrad()), row(o.getMomentumBuffer()), scalarOf(o.getLr()),
            scalarOf(o.getMomentum()), scalarOf(o.getWeightDecay()), scalarOf(o.getStep()),
            row(o.getNewParam()), row(o.getNewMomentumBuffer()), o.getDecay() ? "true" : "false");
      })
      .Default([&](mlir::Operation* other) {
        throw std::invalid_argument(fmt::format("'{}' at {} is not row-local and cannot be fused",
                                                other->getName().getStringRef().str(),
                                                locationString(other->getLoc())));
      });
  // A bf16 result is a bf16 value: round it where the unfused kernel would store it, so
  // fusion never changes the numerics (rows are computed in f32 scratch).
  for (mlir::Value r : m->getResults())
    if (isBF16(r))
      body_ += fmt::format("      for (int64_t c = 0; c < C; ++c) {0}[c] = tessel_round_bf16({0}[c]);\n",
                           row(r));
}

std::string Emitter::emit(llvm::StringRef symbol) {
  mlir::Block& body = op_.getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  std::string decls, rowSetup;
  // Arguments as the unfused kernels write them: one per line, with its shape comment in
  // the dimension letters of the rows (suffixes of them for broadcast operands).
  const cppgen::Letters letters = cppgen::rowLetters(shape_.size());
  auto argument = [&](const std::string& decl, const std::string& name, mlir::Value v,
                      const cppgen::Letters& dims) {
    decls += cppgen::withComment(decl, cppgen::shapeComment(name, cppgen::shapeOf(v), dims));
  };
  int scratch = 0;
  auto scratchRow = [&] { return fmt::format("scratch + {} * C", scratch++); };
  // Results: out<k> (one per yielded value; a value yielded twice shares the first). Rows are
  // computed in f32: an f32 result is written in place, a bf16 one in scratch and stored.
  llvm::DenseMap<mlir::Value, int> outIndex;
  for (auto [k, v] : llvm::enumerate(yield.getValues())) {
    mlir::Value result = op_.getResult(k);
    argument(fmt::format("  {0}* out{1} = ({0}*)args[{1}];", cppgen::elementType(result), k),
             fmt::format("out{}", k), result, letters);
    if (!isBF16(result)) outIndex.try_emplace(v, static_cast<int>(k));
  }
  size_t nOut = yield.getValues().size();
  for (auto [j, arg] : llvm::enumerate(body.getArguments())) {
    auto type = mlir::cast<mlir::RankedTensorType>(arg.getType());
    std::string elem = cppgen::elementType(arg);
    argument(fmt::format("  const {0}* in{1} = (const {0}*)args[{2}];", elem, j, nOut + j),
             fmt::format("in{}", j), arg, cppgen::suffixLetters(letters, type.getRank()));
    if (type.getRank() == 0) {
      decls += fmt::format("  const float s{0} = in{0}[0];\n", j);
      scalar_[arg] = fmt::format("s{}", j);
      continue;
    }
    int64_t argRows = 1;
    for (int64_t i = 0; i + 1 < type.getRank(); ++i) argRows *= type.getDimSize(i);
    std::string rowIndex = argRows == rows_ ? "r" : argRows == 1 ? "0" : fmt::format("(r % {})", argRows);
    if (isBF16(arg))  // widened to f32 once per row
      rowSetup += fmt::format("      float* in{0}r = {2};\n"
                              "      for (int64_t c = 0; c < C; ++c) in{0}r[c] = in{0}[{1} * C + c];\n",
                              j, rowIndex, scratchRow());
    else
      rowSetup += fmt::format("      const float* in{0}r = in{0} + {1} * C;\n", j, rowIndex);
    rowPtr_[arg] = fmt::format("in{}r", j);
  }
  for (mlir::Operation& m : body.without_terminator())
    for (mlir::Value r : m.getResults()) {
      auto it = outIndex.find(r);
      std::string name = fmt::format("v{}", rowPtr_.size());
      if (it != outIndex.end())
        rowSetup += fmt::format("      float* {} = out{} + r * C;\n", name, it->second);
      else
        rowSetup += fmt::format("      float* {} = {};\n", name, scratchRow());
      rowPtr_[r] = name;
    }
  for (mlir::Operation& m : body.without_terminator()) member(&m);
  // A yielded block argument, a value yielded a second time, or a bf16 result is stored to its
  // output.
  for (auto [k, v] : llvm::enumerate(yield.getValues())) {
    auto it = outIndex.find(v);
    if (mlir::isa<mlir::BlockArgument>(v) || it == outIndex.end() || it->second != static_cast<int>(k))
      body_ += fmt::format("      for (int64_t c = 0; c < C; ++c) out{}[r * C + c] = {}[c];\n", k,
                           rowPtr_.lookup(v));
  }

  return fmt::format(
      "// tessel.fused at {0}: {1} rows of C = {2}: {8}\n"
      "extern \"C\" void {3}(void** args) {{\n"
      "  const int64_t R = {1}, C = {2};\n"
      "{4}"
      "  #pragma omp parallel\n"
      "  {{\n"
      "    std::vector<float> scratchRows({5} * C + 1);\n"
      "    float* scratch = scratchRows.data();\n"
      "    #pragma omp for schedule(static)\n"
      "    for (int64_t r = 0; r < R; ++r) {{\n"
      "{6}{7}"
      "    }}\n"
      "  }}\n"
      "}}\n",
      locationString(op_.getLoc()), rows_, c_, symbol.str(), decls, scratch, rowSetup, body_,
      memberNames());
}

}  // namespace

std::string fusedKernelPreamble() {
  // The math helpers (tessel_exp, tessel_gelu, tessel_gelu_grad) come from
  // cppKernelPreamble(), so fused and unfused kernels compute the same function.
  return "#include <vector>\n";
}

std::string emitFusedCppKernel(FusedOp op, llvm::StringRef symbol) {
  mlir::Block& body = op.getBody().front();
  std::optional<llvm::SmallVector<int64_t>> shape;
  for (mlir::Operation& m : body.without_terminator()) {
    auto s = rowLocalShape(&m);
    if (!s || (shape && *s != *shape))
      throw std::invalid_argument(fmt::format("'{}' at {} is not row-local in the group's shape",
                                              m.getName().getStringRef().str(),
                                              locationString(m.getLoc())));
    shape = s;
  }
  if (!shape) throw std::invalid_argument("an empty tessel.fused region has nothing to emit");
  return Emitter(op, *shape).emit(symbol);
}

}  // namespace tessel
