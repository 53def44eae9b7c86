// Model (the root module) and Program (the compiled result).
#include "dsl/Graph.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/Interpreter.h"
#include "compiler/Pipeline.h"
#include "compiler/PlanSite.h"
#include "dsl/PlanIr.h"
#include "dsl/ProgramImpl.h"

#include "mlir/IR/SymbolTable.h"

#include <fmt/format.h>
#include <stdexcept>

namespace tessel {

namespace {
/// The tessel.param ops of `f` as specs, in order.
std::vector<ParameterSpec> paramsOf(mlir::func::FuncOp f) {
  std::vector<ParameterSpec> specs;
  f.walk([&](ParamOp p) {
    ParameterSpec s;
    s.name = p.getName().str();
    auto shape = p.getType().getShape();
    s.shape.assign(shape.begin(), shape.end());
    switch (p.getInit()) {
    case InitKind::normal: s.init = Init::Normal; break;
    case InitKind::zeros: s.init = Init::Zeros; break;
    case InitKind::ones: s.init = Init::Ones; break;
    }
    if (auto stddev = p.getStd()) s.std = stddev->convertToDouble();
    s.state = p.getState();
    specs.push_back(std::move(s));
  });
  return specs;
}

/// The plan's pipeline (pp() > 1) in the pipeline's options: M_eff = microbatches x
/// grad_accumulation microbatches per @train_step, so microsteps is 1 (no @accumulate_step,
/// no tessel-gradient-accumulation) and shard-batch splits the batch into dp x M_eff pieces
/// (batchPieces). The stage (pipelineStage) comes from CompileOptions.
void applyPipeline(const Plan& plan, PipelineOptions& pipeline) {
  if (plan.pp() == 1) return;
  pipeline.pipelineAxis = plan.pipeline_axis();
  pipeline.pipelineStages = plan.pp();
  pipeline.pipelineSchedule = plan.pipeline_schedule();
  pipeline.pipelineMicrobatches = plan.pipeline_microbatches_per_step();
  pipeline.pipelineVirtualStages = plan.pipeline_virtual_stages();
  pipeline.pipelineLayerRanges = plan.pipeline_layer_ranges();
  const PlanSite& site = plan.pipeline_site();
  pipeline.pipelineSite = planSiteString(site.file, site.line, site.column);
  pipeline.microsteps = 1;
}

/// The plan's checks that need the model (shard() entries against the parameters,
/// checkpoint() entries and fully_shard units against the modules, tp against the attention heads; ModelError at
/// the plan's lines), its checkpointing in the pipeline's options, then, for a plan that is
/// more than data parallelism, its mesh and shardings in the module (writePlanToModule) and
/// in the pipeline's options.
void applyPlan(Graph& graph, const Plan& plan, PipelineOptions& pipeline) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const ParameterSpec& p : graph.parameters()) shapes.emplace_back(p.name, p.shape);
  std::vector<ParameterSharding> shardings = plan.resolve_shardings(shapes);
  if (!plan.batch_axes().empty()) pipeline.batchAxis = fmt::format("{}", fmt::join(plan.batch_axes(), ","));
  std::vector<std::string> parameterNames;
  for (const auto& [name, shape] : shapes) parameterNames.push_back(name);
  plan.resolve_checkpoints(graph.modulePaths(), parameterNames);
  for (const CheckpointEntry& e : plan.checkpoints()) pipeline.checkpointModules.push_back(e.glob);
  if (!plan.checkpoints().empty()) {
    const CheckpointEntry& first = plan.checkpoints().front();
    pipeline.checkpointMode = checkpointModeName(first.mode);
    pipeline.checkpointSite = planSiteString(first.site.file, first.site.line, first.site.column);
  }
  std::vector<std::pair<std::string, int64_t>> sizes;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    sizes.emplace_back(name, n);
  }
  std::vector<std::string> fsdpUnits = plan.resolve_fsdp_units(graph.modulePaths(), sizes);
  plan.resolve_pipeline_layers(graph.modulePaths());
  applyPipeline(plan, pipeline);
  if (!plan.needs_grid()) return;
  mlir::ModuleOp module = graph.module();
  const PlanSite& tpSite = plan.tensor_parallel_site();
  std::string site = planSiteString(tpSite.file, tpSite.line, tpSite.column);
  if (mlir::failed(checkTensorParallelHeads(module, plan.tensor_parallel_axis(), plan.tp(),
                                            planSiteLocation(module.getContext(), site, module.getLoc()))))
    graph.throwCaptured(module.getLoc(), "tp does not divide the attention heads");
  if (plan.sequence_parallel()) {
    const PlanSite& spSite = plan.sequence_parallel_site();
    mlir::Location spLoc = planSiteLocation(module.getContext(),
                                            planSiteString(spSite.file, spSite.line, spSite.column), module.getLoc());
    if (mlir::failed(checkSequenceParallelNorms(module, plan.tensor_parallel_axis(), spLoc)))
      graph.throwCaptured(module.getLoc(), "sequence_parallel has no [B, T, C] norm to split");
  }
  writePlanToModule(graph, plan, shardings);
  pipeline.mesh = plan.mesh().axes();
  if (!plan.tensor_parallel_axis().empty()) {
    pipeline.tensorParallelAxis = plan.tensor_parallel_axis();
    pipeline.tensorParallelSite = site;
  }
  pipeline.sequenceParallel = plan.sequence_parallel();
  if (plan.mesh().size(plan.fully_shard_axis()) > 1) pipeline.fullyShardAxis = plan.fully_shard_axis();
  pipeline.reshardAfterForward = plan.reshard_after_forward();
  pipeline.zeroStage = plan.zero_stage();
  pipeline.fsdpReduceScatter = fsdpReduceScatterName(plan.fsdp_reduce_scatter());
  pipeline.fsdpUnits = std::move(fsdpUnits);
  pipeline.fsdpPrefetch = plan.fsdp_prefetch();
  const PlanSite& fsdpSite = plan.fully_shard_site();
  pipeline.fullyShardSite = planSiteString(fsdpSite.file, fsdpSite.line, fsdpSite.column);
  pipeline.shardedParameters = !shardings.empty();
}

}  // namespace

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
  return interpret(impl_->function(impl_->forwardName), params, inputs);
}

bool Program::trains() const { return impl_->trains; }
const std::vector<ParameterSpec>& Program::state() const {
  return impl_->trains ? impl_->state : impl_->parameters;
}
const std::vector<std::string>& Program::train_inputs() const { return impl_->trainInputs; }

std::vector<ref::Tensor> Program::train_step_reference(std::map<std::string, ref::Tensor>& state,
                                                       const std::vector<ref::Tensor>& inputs) const {
  if (!impl_->trains)
    throw std::logic_error("train_step_reference: the program was compiled without a train step");
  ParameterMap assigned;
  std::vector<ref::Tensor> out =
      interpret(impl_->function("train_step"), state, inputs, {}, &assigned);
  for (auto& [name, value] : assigned) state[name] = std::move(value);
  return out;
}

Model::Model(std::string name, Loc loc)
    : Module(this), graph_(std::make_shared<Graph>(name, loc)) {}
Model::~Model() = default;

Tensor Model::input(const std::string& name, Shape shape, DType dtype, Loc loc) {
  return graph_->addInput(name, shape, dtype, graph_->location(loc, ""));
}

void Model::set_loss(const Tensor& loss, Loc loc) {
  mlir::Location l = graph_->location(loc, "");
  Graph::of(loss, loc);
  if (!loss.shape().empty() || loss.dtype() != DType::F32)
    graph_->fail(l, fmt::format("the loss must be an f32 scalar, got {} {}",
                                loss.dtype() == DType::F32    ? "f32"
                                : loss.dtype() == DType::BF16 ? "bf16"
                                                              : "i32",
                                loss.shape().empty() ? "scalar" : shapes::str(loss.shape())));
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
  if (options.precision == DType::I32)
    throw std::invalid_argument("tessel::CompileOptions::precision must be F32 or BF16, not I32");
  if (options.pipeline_stage < 0 || options.pipeline_stage >= options.plan.pp())
    throw std::invalid_argument(fmt::format(
        "tessel::CompileOptions::pipeline_stage is {}, but the plan has {} pipeline stage{} (stages 0 to {})",
        options.pipeline_stage, options.plan.pp(), options.plan.pp() == 1 ? "" : "s", options.plan.pp() - 1));
  graph_->finalize();
  auto impl = std::make_unique<Program::Impl>();
  impl->parameters = graph_->parameters();
  impl->inputs = graph_->inputs();
  impl->outputs = graph_->outputNames();
  impl->forwardName = graph_->function().getSymName().str();
  bool hasLoss = !impl->outputs.empty() && impl->outputs.front() == "loss";
  impl->trains = options.train && hasLoss;
  mlir::ModuleOp module = graph_->module();
  PipelineOptions pipeline{options.dump_ir_dir, impl->trains, options.optimizer,
                           options.precision == DType::BF16 ? "bf16" : "f32",
                           impl->forwardName};
  const Plan& plan = options.plan;
  pipeline.pipelineStage = options.pipeline_stage;
  pipeline.decomposeAttention = options.decompose_attention;
  pipeline.fuseGemmEpilogues = options.fuse_gemm_epilogues;
  if (impl->trains && (plan.dp() * plan.microsteps() > 1 || plan.pp() > 1)) {
    if (!impl->inputs.empty() && !impl->inputs.front().second.empty())
      plan.check_batch(impl->inputs.front().second.front());
    pipeline.dp = plan.dp();
    pipeline.microsteps = plan.microsteps();
    pipeline.bucketMb = plan.bucket_mb();
    pipeline.overlap = plan.overlap();
  }
  applyPlan(*graph_, plan, pipeline);
  if (mlir::failed(runPipeline(module, pipeline)))
    graph_->throwCaptured(module.getLoc(), "the compiler pipeline failed");
  if (impl->trains) {
    mlir::func::FuncOp step = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>("train_step");
    impl->state = paramsOf(step);
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (auto name = inputName(step, i))
        impl->trainInputs.push_back(name.str());
  }
  impl->graph = graph_;
  return Program(std::move(impl));
}

}  // namespace tessel
