// Program::Impl, shared by the files that implement Program (dsl/ internal).
#pragma once

#include "dsl/Graph.h"

#include "mlir/IR/SymbolTable.h"

#include <memory>
#include <string>
#include <vector>

namespace tessel {

struct Program::Impl {
  // Shared with the Model: the graph owns the MLIRContext and the module, and is frozen
  // (finalized) once compiled, so later calls on the model fail with a diagnostic.
  std::shared_ptr<Graph> graph;
  std::vector<ParameterSpec> parameters;
  std::vector<std::pair<std::string, Shape>> inputs;
  std::vector<std::string> outputs;
  std::string forwardName;
  bool trains = false;
  std::vector<ParameterSpec> state;
  std::vector<std::string> trainInputs;

  mlir::func::FuncOp function(llvm::StringRef name) const {
    return mlir::SymbolTable(graph->module()).lookup<mlir::func::FuncOp>(name);
  }
};

}  // namespace tessel
