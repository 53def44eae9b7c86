// Graph: the IR a Model builds (internal to dsl/; model code never sees it).
//
// It owns the MLIRContext, the module and the function under construction, captures
// diagnostics instead of printing them, turns the user's std::source_location plus the
// current module path into NameLoc(path, FileLineColLoc), and creates ops: the result type
// comes from the shared shape rule (compiler/Shapes.h), so a shape error is reported at the
// user's line before any op exists, and every new op is verified.
#pragma once

#include "dsl/tessel.h"

#include "compiler/Shapes.h"
#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"

#include <map>
#include <string>
#include <vector>

namespace tessel {

class Graph {
 public:
  /// `where` is the model's declaration, the location of the module and the function.
  Graph(const std::string& functionName, const std::source_location& where);
  ~Graph();

  /// The graph a tensor belongs to. An empty (default-constructed) Tensor has none: that is
  /// a ModelError at the user's line, but with no graph to format it we throw directly.
  static Graph& of(const Tensor& t, const std::source_location& loc);

  mlir::MLIRContext& context() { return context_; }
  mlir::OpBuilder& builder() { return builder_; }
  mlir::ModuleOp module() { return *module_; }
  mlir::func::FuncOp function() { return function_; }

  /// NameLoc(path, FileLineColLoc(file, line, column)); plain FileLineColLoc if path is "".
  mlir::Location location(const std::source_location& loc, const std::string& path);
  /// The location for a free-function op: the innermost open Module::Scope's path.
  mlir::Location location(const std::source_location& loc);

  /// Reports an error at `loc` and throws ModelError with it.
  [[noreturn]] void fail(mlir::Location loc, const std::string& message);
  /// Throws ModelError built from the diagnostics captured so far (or `fallback`).
  [[noreturn]] void throwCaptured(mlir::Location loc, const std::string& fallback);

  /// The tensor type of a shape and dtype.
  mlir::RankedTensorType tensorType(const Shape& shape, DType dtype);
  mlir::RankedTensorType tensorType(const Shape& shape, mlir::Type elementType);

  mlir::Value unwrap(const Tensor& t, mlir::Location loc);
  Tensor wrap(mlir::Value v);

  /// Checks a shape rule; on failure reports "'<opName>' op <error>" at loc and throws.
  Shape check(const shapes::Result& rule, llvm::StringRef opName, mlir::Location loc);
  /// Checks an attribute rule (e.g. shapes::normEpsilonError): a non-empty `error` is
  /// reported as "'<opName>' op <error>" at loc and thrown.
  void check(const std::string& error, llvm::StringRef opName, mlir::Location loc);

  /// Verifies a freshly created op; on failure erases it and throws the diagnostic.
  void verify(mlir::Operation* op);
  /// Throws a ModelError at loc once the graph is finalized (compiled).
  void checkOpen(mlir::Location loc);
  /// Throws unless every dimension is positive and the element count fits (2^48).
  void checkShape(const Shape& shape, const std::string& what, mlir::Location loc);

  /// Module::Scope bookkeeping.
  void pushScope(const std::string& path) { scopes_.push_back(path); }
  void popScope() { scopes_.pop_back(); }
  /// Every Module's path, in construction order (the plan's checkpoint globs match them).
  void declareModule(const std::string& path) { modulePaths_.push_back(path); }
  const std::vector<std::string>& modulePaths() const { return modulePaths_; }

  // ---- parameters, inputs, outputs ----
  void declareParameter(ParameterSpec spec, mlir::Location loc);
  /// The parameter's SSA value (its tessel.param op is created on first use).
  Tensor parameter(const std::string& name, mlir::Location useLoc);
  const std::vector<ParameterSpec>& parameters() const { return specs_; }
  Tensor addInput(const std::string& name, const Shape& shape, DType dtype, mlir::Location loc);
  void addOutput(const std::string& name, const Tensor& value, mlir::Location loc, bool front);
  const std::vector<std::pair<std::string, Shape>>& inputs() const { return inputs_; }
  const std::vector<std::string>& outputNames() const { return outputNames_; }

  /// Creates the missing params, the func.return and the final signature, then verifies
  /// the whole module. After this the graph is frozen.
  void finalize();
  bool finalized() const { return finalized_; }

 private:
  void materialize(size_t specIndex);

  mlir::MLIRContext context_;
  mlir::OpBuilder builder_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp function_;
  mlir::Block* body_ = nullptr;
  std::vector<mlir::Diagnostic> captured_;
  mlir::DiagnosticEngine::HandlerID handler_ = 0;
  std::vector<std::string> scopes_;
  std::vector<std::string> modulePaths_;

  std::vector<ParameterSpec> specs_;
  std::vector<mlir::Location> specLocs_;
  std::map<std::string, size_t> specIndex_;
  std::map<std::string, mlir::Value> paramValues_;
  mlir::Operation* lastParam_ = nullptr;

  std::vector<std::pair<std::string, Shape>> inputs_;
  std::vector<std::string> outputNames_;
  std::vector<mlir::Value> outputs_;
  std::vector<mlir::Location> outputLocs_;
  bool finalized_ = false;
};


}  // namespace tessel
