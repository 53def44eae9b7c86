// The CUDA kernel of a tessel.fused region (the twin of FusedEmitter.cpp).
//
// 1. Name every value: inputs are in<j> (scalars read once into s<j>, row operands loaded
//    into a<j>), results out<k>; member results are per-element locals v<m> (v<m>_<k> for
//    member m's k-th result). Every member value of an element is a function of that
//    element of the inputs and of per-row scalars (a softmax's max and 1/sum, a layer norm's
//    mean and rstd, a softmax_grad's dot), so nothing but those scalars is ever stored.
// 2. Without row reductions the region is elementwise: one grid-stride loop over all
//    rows x C elements (float4 where C allows), computing the members in body order.
// 3. With row reductions: one block per row. Each reduction gets its passes over the row
//    (a loop over the row computing just the members it depends on, then a block
//    reduction); a last pass computes what is yielded and stores it. Recomputing the cheap
//    elementwise prefix in each pass (from cache) keeps the registers per thread constant,
//    whatever C: these kernels cannot spill.
// Expressions and constants are FusedEmitter.cpp's, token for token: the same floats up to
// the reductions' summation order.
#include "codegen/CudaEmitterInternal.h"

#include "compiler/Location.h"
#include "compiler/RowLocal.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace tessel::cudagen {
namespace {

std::string num(double v) { return fmt::format("{:.17g}", v); }

bool isStaticFloat(mlir::Type t) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(t);
  return tensor && tensor.hasStaticShape() &&
         (tensor.getElementType().isF32() || tensor.getElementType().isBF16());
}

bool isReduction(mlir::Operation* m) {
  return mlir::isa<SoftmaxOp, LayerNormOp, SoftmaxGradOp>(m) ||
         mlir::isa<RmsNormOp>(m);
}

class FusedCuda {
 public:
  FusedCuda(CudaWriter& w, FusedOp op, llvm::ArrayRef<int64_t> shape)
      : w_(w), op_(op), body_(op.getBody().front()), shape_(shape.begin(), shape.end()) {
    c_ = shape_.back();
    rows_ = numel(shape_) / std::max<int64_t>(c_, 1);
  }

  void emit();

 private:
  /// An expression for the current element of v (a local, or a scalar).
  std::string at(mlir::Value v) const { return names_.lookup(v); }
  /// The members needed to compute `targets` for one element, in body order.
  std::vector<mlir::Operation*> closure(llvm::ArrayRef<mlir::Value> targets) const;
  /// The row operands (block arguments) that `members` and `targets` read.
  std::vector<unsigned> argsRead(const std::vector<mlir::Operation*>& members,
                                 llvm::ArrayRef<mlir::Value> targets) const;
  /// Statements computing `m`'s results for one element (those in `needed`).
  std::string element(mlir::Operation* m, const llvm::SetVector<mlir::Value>& needed,
                      bool comment) const;
  /// Uniform values a member needs (the optimizers' hyper-parameter terms).
  std::string prologue(mlir::Operation* m) const;
  /// One pass over row r: loads, the members `targets` need, then `tail`.
  std::string pass(llvm::ArrayRef<mlir::Value> targets, const std::string& tail,
                   bool comments) const;
  std::string rowLoad(unsigned j) const;

  CudaWriter& w_;
  FusedOp op_;
  mlir::Block& body_;
  std::vector<int64_t> shape_;
  int64_t rows_ = 1, c_ = 1;
  llvm::DenseMap<mlir::Value, std::string> names_;
  llvm::DenseMap<mlir::Operation*, unsigned> index_;  // member -> its number m
  std::vector<int64_t> argRows_;                      // per block argument; -1: scalar
};

std::vector<mlir::Operation*> FusedCuda::closure(llvm::ArrayRef<mlir::Value> targets) const {
  llvm::SetVector<mlir::Operation*> need;
  std::vector<mlir::Value> work(targets.begin(), targets.end());
  while (!work.empty()) {
    mlir::Value v = work.back();
    work.pop_back();
    mlir::Operation* def = v.getDefiningOp();
    if (!def || !need.insert(def)) continue;
    for (mlir::Value operand : def->getOperands()) work.push_back(operand);
  }
  std::vector<mlir::Operation*> ordered(need.begin(), need.end());
  std::sort(ordered.begin(), ordered.end(), [&](mlir::Operation* a, mlir::Operation* b) {
    return index_.lookup(a) < index_.lookup(b);
  });
  return ordered;
}

std::vector<unsigned> FusedCuda::argsRead(const std::vector<mlir::Operation*>& members,
                                          llvm::ArrayRef<mlir::Value> targets) const {
  std::vector<bool> read(body_.getNumArguments(), false);
  auto mark = [&](mlir::Value v) {
    if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) read[arg.getArgNumber()] = true;
  };
  for (mlir::Operation* m : members)
    for (mlir::Value v : m->getOperands()) mark(v);
  for (mlir::Value v : targets) mark(v);
  std::vector<unsigned> out;
  for (unsigned j = 0; j < read.size(); ++j)
    if (read[j] && argRows_[j] >= 0) out.push_back(j);
  return out;
}

std::string FusedCuda::rowLoad(unsigned j) const {
  int64_t argRows = argRows_[j];
  std::string row = argRows == rows_ ? "r * C + c"
                    : argRows == 1   ? "c"
                                     : fmt::format("r % {} * C + c", argRows);
  return fmt::format("const float a{0} = in{0}[{1}];\n", j, row);
}

std::string FusedCuda::prologue(mlir::Operation* m) const {
  unsigned k = index_.lookup(m);
  if (auto o = mlir::dyn_cast<AdamWOp>(m))  // torch.optim.AdamW (single tensor), in float
    return fmt::format(
        "const float lr{0} = {1}, b1{0} = {2}, b2{0} = {3}, eps{0} = {4}, wd{0} = {5}, t{0} = "
        "{6};\n"
        "const float decay{0} = {7} ? 1.0f - lr{0} * wd{0} : 1.0f;\n"
        "const float bc1{0} = 1.0f - powf(b1{0}, t{0}), bc2s{0} = sqrtf(1.0f - powf(b2{0}, "
        "t{0}));\n"
        "const float stepSize{0} = lr{0} / bc1{0};\n",
        k, at(o.getLr()), at(o.getBeta1()), at(o.getBeta2()), at(o.getEps()),
        at(o.getWeightDecay()), at(o.getStep()), o.getDecay() ? "true" : "false");
  if (auto o = mlir::dyn_cast<SGDOp>(m))
    return fmt::format(
        "const float lr{0} = {1}, mom{0} = {2}, wd{0} = {3};\n"
        "const bool first{0} = {4} == 1.0f;\n",
        k, at(o.getLr()), at(o.getMomentum()), at(o.getWeightDecay()), at(o.getStep()));
  return "";
}

std::string FusedCuda::element(mlir::Operation* m, const llvm::SetVector<mlir::Value>& needed,
                               bool comment) const {
  unsigned k = index_.lookup(m);
  std::string s = comment ? fmt::format("// {} at {}\n", m->getName().getStringRef().str(),
                                        locationString(m->getLoc()))
                          : "";
  // A bf16 member result is rounded where the unfused kernel would store it, so fusion
  // never changes the numerics (FusedEmitter.cpp does the same).
  auto def = [&](mlir::Value v, const std::string& expr) {
    if (!needed.contains(v)) return;
    bool bf16 = mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType().isBF16();
    s += bf16 ? fmt::format("const float {} = tessel_round_bf16({});\n", at(v), expr)
              : fmt::format("const float {} = {};\n", at(v), expr);
  };
  llvm::TypeSwitch<mlir::Operation*>(m)
      .Case([&](AddOp o) { def(o, at(o.getLhs()) + " + " + at(o.getRhs())); })
      .Case([&](SubOp o) { def(o, at(o.getLhs()) + " - " + at(o.getRhs())); })
      .Case([&](MulOp o) { def(o, at(o.getLhs()) + " * " + at(o.getRhs())); })
      .Case([&](ScaleOp o) {
        def(o, fmt::format("{} * {}f", at(o.getInput()), num(o.getFactor().convertToDouble())));
      })
      .Case([&](GeluOp o) { def(o, fmt::format("tessel_gelu({})", at(o.getInput()))); })
      .Case([&](ReluOp o) { def(o, fmt::format("{0} > 0.0f ? {0} : 0.0f", at(o.getInput()))); })
      .Case([&](CastOp o) { def(o, at(o.getInput())); })
      .Case([&](GeluGradOp o) {
        def(o, fmt::format("tessel_gelu_grad({}, {})", at(o.getInput()), at(o.getGrad())));
      })
      .Case([&](ReluGradOp o) {
        def(o, fmt::format("{} > 0.0f ? {} : 0.0f", at(o.getInput()), at(o.getGrad())));
      })
      .Case([&](SiluOp o) { def(o, fmt::format("tessel_silu({})", at(o.getInput()))); })
      .Case([&](SiluGradOp o) {
        def(o, fmt::format("tessel_silu_grad({}, {})", at(o.getInput()), at(o.getGrad())));
      })
      .Case([&](RmsNormOp o) {
        def(o, fmt::format("{} * rstd{} * {}", at(o.getInput()), k, at(o.getWeight())));
      })
      .Case([&](SoftmaxOp o) {
        def(o,
            fmt::format("c < n{0} ? tessel_exp({1} - mx{0}) * inv{0} : 0.0f", k, at(o.getInput())));
      })
      .Case([&](LayerNormOp o) {
        def(o, fmt::format("({} - mean{}) * rstd{} * {} + {}", at(o.getInput()), k, k,
                           at(o.getGamma()), at(o.getBeta())));
      })
      .Case([&](SoftmaxGradOp o) {
        def(o, fmt::format("{} * ({} - dot{})", at(o.getOutput()), at(o.getGrad()), k));
      })
      .Case([&](AdamWOp o) {
        s += fmt::format(
            "const float g{0} = {1};\n"
            "const float m{0} = b1{0} * {2} + (1.0f - b1{0}) * g{0};\n"
            "const float v{0} = b2{0} * {3} + (1.0f - b2{0}) * g{0} * g{0};\n",
            k, at(o.getGrad()), at(o.getExpAvg()), at(o.getExpAvgSq()));
        def(o.getNewExpAvg(), fmt::format("m{}", k));
        def(o.getNewExpAvgSq(), fmt::format("v{}", k));
        def(o.getNewParam(),
            fmt::format("{} * decay{} - stepSize{} * m{} / (sqrtf(v{}) / bc2s{} + eps{})",
                        at(o.getParam()), k, k, k, k, k, k));
      })
      .Case([&](SGDOp o) {
        s += fmt::format(
            // torch.optim.SGD: with momentum 0 the buffer is unused and passed through.
            "const float g{0} = {1} + ({3} ? wd{0} * {2} : 0.0f);\n"
            "const float buf{0} = mom{0} == 0.0f ? {4} : first{0} ? g{0} : mom{0} * {4} + g{0};\n"
            "const float upd{0} = mom{0} == 0.0f ? g{0} : buf{0};\n",
            k, at(o.getGrad()), at(o.getParam()), o.getDecay() ? "true" : "false",
            at(o.getMomentumBuffer()));
        def(o.getNewMomentumBuffer(), fmt::format("buf{}", k));
        def(o.getNewParam(), fmt::format("{} - lr{} * upd{}", at(o.getParam()), k, k));
      })
      .Default([](mlir::Operation* other) {  // fusedSupported admits only the ops above
        throw std::logic_error("CUDA fused emitter: no member rule for '" +
                               other->getName().getStringRef().str() + "'");
      });
  return s;
}

std::string FusedCuda::pass(llvm::ArrayRef<mlir::Value> targets, const std::string& tail,
                            bool comments) const {
  std::vector<mlir::Operation*> members = closure(targets);
  llvm::SetVector<mlir::Value> needed;
  for (mlir::Value t : targets) needed.insert(t);
  for (mlir::Operation* m : members)
    for (mlir::Value v : m->getOperands()) needed.insert(v);
  std::string s;
  for (unsigned j : argsRead(members, targets)) s += rowLoad(j);
  for (mlir::Operation* m : members) s += element(m, needed, comments);
  return "for (idx_t c = threadIdx.x; c < C; c += THREADS) {\n" + indent(s + tail, 2) + "}\n";
}

void FusedCuda::emit() {
  auto yield = llvm::cast<YieldOp>(body_.getTerminator());
  std::vector<mlir::Value> yields(yield.getValues().begin(), yield.getValues().end());
  Letters letters = rowLetters(shape_.size());
  bool rowMode = false;
  for (auto [m, op] : llvm::enumerate(body_.without_terminator())) {
    index_[&op] = static_cast<unsigned>(m);
    rowMode = rowMode || isReduction(&op);
    for (auto [k, r] : llvm::enumerate(op.getResults()))
      names_[r] = op.getNumResults() == 1 ? fmt::format("v{}", m) : fmt::format("v{}_{}", m, k);
  }
  w_.kind(rowMode ? CudaKernelKind::FusedRow : CudaKernelKind::FusedElementwise);
  w_.describe(fmt::format("{} rows of C = {}: {}", rows_, c_, fmt::join(kernelcommon::fusedMemberNames(op_), ", ")));
  w_.describe(rowMode ? "one block per row: a pass over the row per reduction, then the results"
                      : "elementwise over rows x C, the members in body order per element");
  for (auto [k, v] : llvm::enumerate(yields))
    w_.output(fmt::format("out{}", k), op_.getResult(k), letters);
  std::string scalars;
  for (auto [j, arg] : llvm::enumerate(body_.getArguments())) {
    std::vector<int64_t> s = shapeOf(arg);
    w_.input(fmt::format("in{}", j), op_.getOperand(j), suffixLetters(letters, s.size()));
    if (s.empty()) {
      argRows_.push_back(-1);
      names_[arg] = fmt::format("s{}", j);
      scalars += fmt::format("const float s{0} = in{0}[0];\n", j);
    } else {
      argRows_.push_back(numel(s) / std::max<int64_t>(c_, 1));
      names_[arg] = fmt::format("a{}", j);
    }
  }
  for (mlir::Operation& m : body_.without_terminator()) scalars += prologue(&m);
  w_.code(scalars);
  std::vector<std::string> outputs;
  for (auto [k, v] : llvm::enumerate(yields))
    outputs.push_back(fmt::format("const float o{} = {};\n", k, at(v)));

  if (!rowMode) {
    std::vector<mlir::Operation*> members = closure(yields);
    llvm::SetVector<mlir::Value> needed(yields.begin(), yields.end());
    for (mlir::Operation* m : members)
      for (mlir::Value v : m->getOperands()) needed.insert(v);
    std::vector<EwInput> inputs;
    for (unsigned j : argsRead(members, yields))
      inputs.push_back({fmt::format("in{}", j), fmt::format("a{}", j),
                        argRows_[j] == rows_ ? 0 : argRows_[j] * c_});
    std::string body;
    for (mlir::Operation* m : members) body += element(m, needed, true);
    std::vector<EwOutput> outs;
    for (size_t k = 0; k < yields.size(); ++k) {
      body += outputs[k];
      outs.push_back({fmt::format("out{}", k), fmt::format("o{}", k)});
    }
    w_.constant("N", rows_ * c_, "elements");
    emitElementwiseLoop(w_, rows_ * c_, inputs, outs, body, true);
    return;
  }

  w_.constant("R", rows_, "rows");
  w_.constant("C", c_);
  unsigned threads = rowThreads(c_);
  w_.launch(static_cast<unsigned>(std::clamp<int64_t>(rows_, 1, kResidentThreads / threads)),
            threads, "one block per row (grid-stride over rows)");
  w_.useBlockReductions(true);
  std::string row;
  for (mlir::Operation& op : body_.without_terminator()) {
    unsigned k = index_.lookup(&op);
    std::string name =
        fmt::format("{} at {}", op.getName().getStringRef().str(), locationString(op.getLoc()));
    if (auto o = mlir::dyn_cast<SoftmaxOp>(op)) {
      mlir::Value x = o.getInput();
      row += fmt::format("// {}: max, then sum of exp over the first n{} entries\n", name, k);
      row +=
          fmt::format("const idx_t n{} = {};\n", k,
                      o.getCausal() ? fmt::format("r % {} + 1", shape_[shape_.size() - 2]) : "C");
      row += fmt::format("float mx{} = -INFINITY;\n", k);
      row += pass({x}, fmt::format("if (c < n{0}) mx{0} = {1} > mx{0} ? {1} : mx{0};\n", k, at(x)),
                  false);
      row += blockReduce(fmt::format("mx{}", k), "max");
      row += fmt::format("float sum{} = 0.0f;\n", k);
      row += pass({x}, fmt::format("if (c < n{0}) sum{0} += tessel_exp({1} - mx{0});\n", k, at(x)),
                  false);
      row += blockReduce(fmt::format("sum{}", k), "sum");
      row += fmt::format("const float inv{0} = 1.0f / sum{0};\n", k);
    } else if (auto o = mlir::dyn_cast<LayerNormOp>(op)) {
      mlir::Value x = o.getInput();
      row += fmt::format("// {}: mean, then variance (two passes)\n", name);
      row += fmt::format("float mean{} = 0.0f;\n", k);
      row += pass({x}, fmt::format("mean{} += {};\n", k, at(x)), false);
      row += blockReduce(fmt::format("mean{}", k), "sum");
      row += fmt::format("mean{0} /= (float)C;\nfloat var{0} = 0.0f;\n", k);
      row +=
          pass({x}, fmt::format("var{0} += ({1} - mean{0}) * ({1} - mean{0});\n", k, at(x)), false);
      row += blockReduce(fmt::format("var{}", k), "sum");
      row += fmt::format("const float rstd{0} = 1.0f / sqrtf(var{0} / (float)C + {1}f);\n", k,
                         num(o.getEpsilon().convertToDouble()));
    } else if (auto o = mlir::dyn_cast<RmsNormOp>(op)) {
      mlir::Value x = o.getInput();
      row += fmt::format("// {}: mean of squares\n", name);
      row += fmt::format("float ss{} = 0.0f;\n", k);
      row += pass({x}, fmt::format("ss{0} += {1} * {1};\n", k, at(x)), false);
      row += blockReduce(fmt::format("ss{}", k), "sum");
      row += fmt::format("const float rstd{0} = 1.0f / sqrtf(ss{0} / (float)C + {1}f);\n", k,
                         num(o.getEpsilon().convertToDouble()));
    } else if (auto o = mlir::dyn_cast<SoftmaxGradOp>(op)) {
      row += fmt::format("// {}: dot = sum of out * dout\n", name);
      row += fmt::format("float dot{} = 0.0f;\n", k);
      row += pass({o.getOutput(), o.getGrad()},
                  fmt::format("dot{} += {} * {};\n", k, at(o.getOutput()), at(o.getGrad())), false);
      row += blockReduce(fmt::format("dot{}", k), "sum");
    }
  }
  std::string stores;
  for (size_t k = 0; k < yields.size(); ++k)
    stores += outputs[k] + fmt::format("out{0}[r * C + c] = o{0};\n", k);
  row += "// the results\n" + pass(yields, stores, true);
  w_.code("for (idx_t r = blockIdx.x; r < R; r += gridDim.x) {\n" + indent(row, 2) + "}\n");
}

}  // namespace

bool fusedSupported(mlir::Operation* op) {
  auto fused = mlir::dyn_cast<FusedOp>(op);
  if (!fused || fused.getBody().empty()) return false;
  for (mlir::Type t : op->getOperandTypes())
    if (!isStaticFloat(t)) return false;
  for (mlir::Type t : op->getResultTypes())
    if (!isStaticFloat(t)) return false;
  mlir::Block& body = fused.getBody().front();
  std::optional<llvm::SmallVector<int64_t>> shape;
  for (mlir::Operation& m : body.without_terminator()) {
    const bool hasRule =
        mlir::isa<AddOp, SubOp, MulOp, ScaleOp, GeluOp, ReluOp, GeluGradOp, ReluGradOp, CastOp,
                  SoftmaxOp, SoftmaxGradOp, LayerNormOp, AdamWOp, SGDOp>(m) ||
        mlir::isa<SiluOp, SiluGradOp>(m) ||
        mlir::isa<RmsNormOp>(m);
    if (!hasRule) return false;  // a row-local op this emitter has no member rule for
    auto s = rowLocalShape(&m);
    if (!s || (shape && *s != *shape)) return false;
    shape = s;
  }
  return shape.has_value();
}

void emitFused(CudaWriter& w) {
  auto op = mlir::cast<FusedOp>(w.op());
  llvm::SmallVector<int64_t> shape;
  for (mlir::Operation& m : op.getBody().front().without_terminator()) {
    shape = *rowLocalShape(&m);
    break;
  }
  FusedCuda(w, op, shape).emit();
}

}  // namespace tessel::cudagen
