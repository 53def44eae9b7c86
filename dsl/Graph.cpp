// Graph: building and checking the IR of a model; see Graph.h.
#include "dsl/Graph.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/TesselDialect.h"

#include "mlir/IR/DialectRegistry.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <iostream>

namespace tessel {

ModelError::ModelError(Diagnostic d)
    : std::runtime_error(fmt::format("{}:{}:{}: error: {}{}", d.file, d.line, d.column, d.message,
                                     d.path.empty() ? "" : fmt::format(" [{}]", d.path))),
      diag_(std::move(d)) {}

int64_t Tensor::dim(int64_t i) const {
  int64_t r = rank();
  if (i < -r || i >= r)
    throw std::out_of_range(fmt::format("dimension {} of a rank-{} tensor", i, r));
  return shape_[i < 0 ? i + r : i];
}

namespace {

mlir::DialectRegistry makeRegistry() {
  mlir::DialectRegistry registry;
  registerTesselDialects(registry);
  return registry;
}

/// Splits a location into the user's file/line/column and the parameter path.
Diagnostic decompose(mlir::Location loc, std::string message) {
  Diagnostic d;
  d.message = std::move(message);
  mlir::Location cur = loc;
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(cur)) {
    d.path = name.getName().str();
    cur = name.getChildLoc();
  }
  if (auto flc = mlir::dyn_cast<mlir::FileLineColLoc>(cur)) {
    d.file = flc.getFilename().str();
    d.line = static_cast<int>(flc.getLine());
    d.column = static_cast<int>(flc.getColumn());
  } else {
    d.file = "<unknown>";
  }
  return d;
}

}  // namespace

Graph::Graph(const std::string& functionName, const std::source_location& where)
    : context_(makeRegistry()), builder_(&context_) {
  context_.loadAllAvailableDialects();
  // Diagnostics go to the user as "file:line:col: error: ..."; a dump of the op is noise.
  context_.printOpOnDiagnostic(false);
  // Errors are captured and thrown as ModelError at the right moment; remarks and warnings
  // (e.g. "parameter 'x' does not affect the loss") go straight to stderr, in the same
  // "file:line:col: remark: ... [path]" form.
  handler_ = context_.getDiagEngine().registerHandler([this](mlir::Diagnostic& diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error) {
      captured_.push_back(std::move(diag));
      return mlir::success();
    }
    const char* kind = diag.getSeverity() == mlir::DiagnosticSeverity::Warning ? "warning" : "remark";
    Diagnostic d = decompose(diag.getLocation(), diag.str());
    std::cerr << fmt::format("{}:{}:{}: {}: {}{}\n", d.file, d.line, d.column, kind, d.message,
                             d.path.empty() ? "" : fmt::format(" [{}]", d.path));
    return mlir::success();
  });
  mlir::Location modelLoc = location(where, "");
  if (functionName.empty() ||
      !std::all_of(functionName.begin(), functionName.end(),
                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
    throw ModelError(decompose(modelLoc, fmt::format("model name '{}' must be a non-empty "
                                                     "identifier (letters, digits, '_')",
                                                     functionName)));
  module_ = mlir::ModuleOp::create(modelLoc);
  builder_.setInsertionPointToEnd(module_->getBody());
  function_ = mlir::func::FuncOp::create(builder_, modelLoc, functionName,
                                         builder_.getFunctionType({}, {}));
  body_ = function_.addEntryBlock();
  builder_.setInsertionPointToEnd(body_);
}

Graph::~Graph() { context_.getDiagEngine().eraseHandler(handler_); }

Graph& Graph::of(const Tensor& t, const std::source_location& loc) {
  if (!t.graph_)
    throw ModelError(Diagnostic{loc.file_name(), static_cast<int>(loc.line()),
                                static_cast<int>(loc.column()), "",
                                "use of an empty tessel::Tensor (it was never assigned a value)"});
  return *t.graph_;
}

mlir::Location Graph::location(const std::source_location& loc, const std::string& path) {
  mlir::Location flc = mlir::FileLineColLoc::get(&context_, loc.file_name(), loc.line(),
                                                 loc.column());
  if (path.empty()) return flc;
  return mlir::NameLoc::get(mlir::StringAttr::get(&context_, path), flc);
}

mlir::Location Graph::location(const std::source_location& loc) {
  return location(loc, scopes_.empty() ? std::string() : scopes_.back());
}

void Graph::fail(mlir::Location loc, const std::string& message) {
  captured_.clear();
  mlir::emitError(loc) << message;
  throwCaptured(loc, message);
}

void Graph::throwCaptured(mlir::Location loc, const std::string& fallback) {
  for (mlir::Diagnostic& d : captured_) {
    if (d.getSeverity() != mlir::DiagnosticSeverity::Error) continue;
    std::string text = d.str();
    Diagnostic out = decompose(d.getLocation(), text);
    // Each note on a line of its own at its location, as compilers print them (a plan's
    // conflict points at the other entry, a tp error at the attention it does not fit).
    for (mlir::Diagnostic& note : d.getNotes()) {
      Diagnostic n = decompose(note.getLocation(), note.str());
      out.message += fmt::format("\n{}:{}:{}: note: {}{}", n.file, n.line, n.column, n.message,
                                 n.path.empty() ? "" : fmt::format(" [{}]", n.path));
    }
    captured_.clear();
    throw ModelError(std::move(out));
  }
  captured_.clear();
  throw ModelError(decompose(loc, fallback));
}

mlir::RankedTensorType Graph::tensorType(const Shape& shape, mlir::Type elementType) {
  return mlir::RankedTensorType::get(shape, elementType);
}

mlir::RankedTensorType Graph::tensorType(const Shape& shape, DType dtype) {
  mlir::Type elem;
  switch (dtype) {
    case DType::F32: elem = builder_.getF32Type(); break;
    case DType::BF16: elem = builder_.getBF16Type(); break;
    case DType::I32: elem = builder_.getI32Type(); break;
  }
  return tensorType(shape, elem);
}

void Graph::checkShape(const Shape& shape, const std::string& what, mlir::Location loc) {
  std::optional<int64_t> n = shapes::numElements(shape);
  if (!n || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d <= 0; }))
    fail(loc, fmt::format("{} has shape {}; every dimension must be positive and the element "
                          "count below 2^48",
                          what, shapes::str(shape)));
}

mlir::Value Graph::unwrap(const Tensor& t, mlir::Location loc) {
  if (!t.graph_) fail(loc, "use of an empty tessel::Tensor (it was never assigned a value)");
  if (t.graph_ != this)
    fail(loc, "a tensor from a different model is used here; each model builds its own graph");
  return mlir::Value::getFromOpaquePointer(t.value_);
}

Tensor Graph::wrap(mlir::Value v) {
  Tensor t;
  t.graph_ = this;
  t.value_ = v.getAsOpaquePointer();
  auto type = mlir::cast<mlir::RankedTensorType>(v.getType());
  t.shape_.assign(type.getShape().begin(), type.getShape().end());
  mlir::Type e = type.getElementType();
  t.dtype_ = e.isF32() ? DType::F32 : e.isBF16() ? DType::BF16 : DType::I32;
  return t;
}

Shape Graph::check(const shapes::Result& rule, llvm::StringRef opName, mlir::Location loc) {
  check(rule.error, opName, loc);
  return rule.shape;
}

void Graph::check(const std::string& error, llvm::StringRef opName, mlir::Location loc) {
  if (!error.empty()) fail(loc, fmt::format("'{}' op {}", opName.str(), error));
}

void Graph::checkOpen(mlir::Location loc) {
  if (finalized_) fail(loc, "the model was already compiled; it cannot be extended");
}

void Graph::verify(mlir::Operation* op) {
  if (finalized_) {
    mlir::Location loc = op->getLoc();
    op->erase();
    checkOpen(loc);
  }
  captured_.clear();
  if (mlir::succeeded(mlir::verify(op, /*verifyRecursively=*/false))) return;
  mlir::Location loc = op->getLoc();
  op->erase();
  throwCaptured(loc, "op failed to verify");
}

void Graph::declareParameter(ParameterSpec spec, mlir::Location loc) {
  if (finalized_) fail(loc, "the model was already compiled; no parameters can be added");
  auto it = specIndex_.find(spec.name);
  if (it != specIndex_.end()) {
    Diagnostic first = decompose(specLocs_[it->second], "");
    fail(loc, fmt::format("parameter '{}' is declared twice (first at {}:{}:{})", spec.name,
                          first.file, first.line, first.column));
  }
  checkShape(spec.shape, fmt::format("parameter '{}'", spec.name), loc);
  if (spec.init == Init::Normal && !(spec.std > 0.0 && std::isfinite(spec.std)))
    fail(loc, fmt::format("parameter '{}' has normal init with std {}; it must be positive and "
                          "finite",
                          spec.name, spec.std));
  specIndex_[spec.name] = specs_.size();
  specs_.push_back(std::move(spec));
  specLocs_.push_back(loc);
}

void Graph::materialize(size_t index) {
  const ParameterSpec& spec = specs_[index];
  mlir::OpBuilder::InsertionGuard guard(builder_);
  if (lastParam_)
    builder_.setInsertionPointAfter(lastParam_);
  else
    builder_.setInsertionPointToStart(body_);
  InitKind init = spec.init == Init::Normal  ? InitKind::normal
                  : spec.init == Init::Zeros ? InitKind::zeros
                                             : InitKind::ones;
  mlir::FloatAttr stddev =
      spec.init == Init::Normal ? builder_.getF64FloatAttr(spec.std) : mlir::FloatAttr();
  auto op = ParamOp::create(builder_, specLocs_[index], tensorType(spec.shape, DType::F32),
                            builder_.getStringAttr(spec.name),
                            InitKindAttr::get(builder_.getContext(), init),
                            stddev);
  verify(op);  // erases the op and throws on failure, so lastParam_ never dangles
  lastParam_ = op;
  paramValues_[spec.name] = op.getResult();
}

Tensor Graph::parameter(const std::string& name, mlir::Location useLoc) {
  auto it = specIndex_.find(name);
  if (it == specIndex_.end()) fail(useLoc, fmt::format("no parameter named '{}'", name));
  if (!paramValues_.count(name)) materialize(it->second);
  return wrap(paramValues_.at(name));
}

Tensor Graph::addInput(const std::string& name, const Shape& shape, DType dtype,
                       mlir::Location loc) {
  if (finalized_) fail(loc, "the model was already compiled; no inputs can be added");
  if (name.empty()) fail(loc, "an input needs a non-empty name");
  for (const auto& [existing, s] : inputs_)
    if (existing == name) fail(loc, fmt::format("input '{}' is declared twice", name));
  checkShape(shape, fmt::format("input '{}'", name), loc);
  // Parameters declared so far appear first, in declaration order (not in the order the
  // model happens to use them, which C++ argument evaluation order would scramble).
  if (inputs_.empty())
    for (size_t i = 0; i < specs_.size(); ++i)
      if (!paramValues_.count(specs_[i].name)) materialize(i);
  mlir::BlockArgument arg = body_->addArgument(tensorType(shape, dtype), loc);
  inputs_.emplace_back(name, shape);
  return wrap(arg);
}

void Graph::addOutput(const std::string& name, const Tensor& value, mlir::Location loc,
                      bool front) {
  if (finalized_) fail(loc, "the model was already compiled; no outputs can be added");
  if (name.empty()) fail(loc, "an output needs a non-empty name");
  if (name == "loss" && !front)
    fail(loc, "the output name 'loss' is reserved for set_loss()");
  for (const std::string& existing : outputNames_)
    if (existing == name) fail(loc, fmt::format("output '{}' is set twice", name));
  mlir::Value v = unwrap(value, loc);
  auto pos = front ? 0 : outputNames_.size();
  outputNames_.insert(outputNames_.begin() + pos, name);
  outputs_.insert(outputs_.begin() + pos, v);
  outputLocs_.insert(outputLocs_.begin() + pos, loc);
}

void Graph::finalize() {
  if (finalized_) return;
  mlir::Location loc = function_.getLoc();
  if (outputs_.empty())
    fail(loc, "the model has no outputs: call set_loss() or add_output() before compile()");
  for (size_t i = 0; i < specs_.size(); ++i)
    if (!paramValues_.count(specs_[i].name)) materialize(i);
  builder_.setInsertionPointToEnd(body_);
  mlir::func::ReturnOp::create(builder_, outputLocs_.front(), outputs_);
  llvm::SmallVector<mlir::Type> argTypes(body_->getArgumentTypes());
  llvm::SmallVector<mlir::Type> resultTypes;
  for (mlir::Value v : outputs_) resultTypes.push_back(v.getType());
  function_.setFunctionType(builder_.getFunctionType(argTypes, resultTypes));
  for (size_t i = 0; i < inputs_.size(); ++i) setInputName(function_, i, inputs_[i].first);
  for (size_t i = 0; i < outputNames_.size(); ++i) setOutputName(function_, i, outputNames_[i]);
  captured_.clear();
  if (mlir::failed(mlir::verify(*module_))) throwCaptured(loc, "the model failed to verify");
  finalized_ = true;
}

}  // namespace tessel
