// Model (the root module) and Program (the compiled result).
#include "dsl/Graph.h"

#include "compiler/Interpreter.h"
#include "compiler/Pipeline.h"

#include <fmt/format.h>

namespace tessel {

struct Program::Impl {
  // Shared with the Model: the graph owns the MLIRContext and the module, and is frozen
  // (finalized) once compiled, so later calls on the model fail with a diagnostic.
  std::shared_ptr<Graph> graph;
  std::vector<ParameterSpec> parameters;
  std::vector<std::pair<std::string, Shape>> inputs;
  std::vector<std::string> outputs;
};

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

std::string Program::ir(bool locations) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  impl_->graph->module()->print(os, mlir::OpPrintingFlags().enableDebugInfo(locations, false));
  return text;
}

const std::vector<ParameterSpec>& Program::parameters() const { return impl_->parameters; }
const std::vector<std::pair<std::string, Shape>>& Program::inputs() const { return impl_->inputs; }
const std::vector<std::string>& Program::outputs() const { return impl_->outputs; }

std::vector<ref::Tensor> Program::run_reference(const std::map<std::string, ref::Tensor>& params,
                                                const std::vector<ref::Tensor>& inputs) const {
  mlir::func::FuncOp func;
  for (auto f : impl_->graph->module().getOps<mlir::func::FuncOp>()) func = f;
  return interpret(func, params, inputs);
}

Model::Model(std::string name) : Module(this), graph_(std::make_shared<Graph>(name)) {}
Model::~Model() = default;

Tensor Model::input(const std::string& name, Shape shape, DType dtype, Loc loc) {
  return graph_->addInput(name, shape, dtype, graph_->location(loc, ""));
}

void Model::set_loss(const Tensor& loss, Loc loc) {
  mlir::Location l = graph_->location(loc, "");
  Graph::of(loss, loc);
  if (!loss.shape().empty() || loss.dtype() != DType::F32)
    graph_->fail(l, fmt::format("the loss must be an f32 scalar, got a tensor of shape {}",
                                shapes::str(loss.shape())));
  graph_->addOutput("loss", loss, l, /*front=*/true);
}

void Model::add_output(const std::string& name, const Tensor& value, Loc loc) {
  Graph::of(value, loc);
  graph_->addOutput(name, value, graph_->location(loc, ""), /*front=*/false);
}

const std::vector<ParameterSpec>& Model::parameters() const { return graph_->parameters(); }

Program Model::compile(const CompileOptions& options) {
  if (graph_->finalized())
    throw std::logic_error("tessel::Model::compile() called twice on the same model");
  graph_->finalize();
  auto impl = std::make_unique<Program::Impl>();
  impl->parameters = graph_->parameters();
  impl->inputs = graph_->inputs();
  impl->outputs = graph_->outputNames();
  mlir::ModuleOp module = graph_->module();
  if (mlir::failed(runPipeline(module, PipelineOptions{options.dump_ir_dir})))
    graph_->throwCaptured(module.getLoc(), "the compiler pipeline failed");
  impl->graph = graph_;
  return Program(std::move(impl));
}

}  // namespace tessel
