//===- GradientAccumulation.cpp - k microsteps per optimizer step --------------===//
//
// Algorithm (see passes/Passes.td):
//   1. Clone @train_step into @accumulate_step: grad_accum += g for every gradient, return
//      the loss only (no collectives, no optimizer: the no-sync microstep).
//   2. In @train_step: return (grad_accum + g) * (1/k) and assign zeros to grad_accum.
//   With reduce-scatter=last-microstep, a gradient g = reduce_scatter(x) (or, under mixed
//   precision, cast(reduce_scatter(x))) is first replaced by the whole local gradient x (in
//   f32), so 1. accumulates x, and 2. returns reduce_scatter(grad_accum + x) * (1/k): one
//   reduce-scatter per step. every-microstep (the default) accumulates g, the block.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include <map>

#define DEBUG_TYPE "tessel-gradient-accumulation"

namespace tessel {
#define GEN_PASS_DEF_GRADIENTACCUMULATION
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

/// The gradient results of `f` that are not autodiff's explicit zeros, as (result index,
/// parameter name).
llvm::SmallVector<std::pair<unsigned, std::string>> gradients(mlir::func::FuncOp f) {
  llvm::SmallVector<std::pair<unsigned, std::string>> out;
  auto ret = llvm::cast<mlir::func::ReturnOp>(f.getBody().front().getTerminator());
  for (unsigned i = 0; i < f.getNumResults(); ++i) {
    auto name = gradName(f, i);
    if (!name) continue;
    if (auto zero = ret.getOperand(i).getDefiningOp<ConstantOp>(); zero && zero.getValue().isZero())
      continue;
    out.emplace_back(i, name.str());
  }
  return out;
}

/// A zero-initialised state parameter `<name>:grad_accum` of type `type`, after the last
/// tessel.param of `body`.
Value accumulator(mlir::OpBuilder& b, mlir::Block& body, const std::string& name,
                  mlir::Type type, mlir::Location loc) {
  mlir::OpBuilder::InsertionGuard guard(b);
  ParamOp last;
  for (auto p : body.getOps<ParamOp>()) last = p;
  if (last) b.setInsertionPointAfter(last);
  else b.setInsertionPointToStart(&body);
  return ParamOp::create(b, loc, type, b.getStringAttr(name + ":grad_accum"),
                         InitKindAttr::get(b.getContext(), InitKind::zeros), mlir::FloatAttr(),
                         b.getUnitAttr());
}

/// How a reduce-scattered gradient was reduced: rebuilt once per step (last-microstep).
struct Scatter {
  mlir::RankedTensorType block;  // the gradient's type, one rank's block
  ReduceKindAttr reduce;
  mlir::FlatSymbolRefAttr grid;
  mlir::DenseI16ArrayAttr gridAxes;
  mlir::IntegerAttr scatterAxis;
};

/// last-microstep: replaces each reduce-scattered gradient result of `step` by the whole
/// local gradient it scatters (cast to f32 first under mixed precision, so that the sum of
/// the microsteps and of the ranks is in f32), erasing the reduce-scatter; returns how each
/// result was scattered, by result index.
std::map<unsigned, Scatter> unscatter(mlir::func::FuncOp step,
                                      llvm::ArrayRef<std::pair<unsigned, std::string>> grads) {
  std::map<unsigned, Scatter> out;
  auto ret = llvm::cast<mlir::func::ReturnOp>(step.getBody().front().getTerminator());
  for (auto& [index, name] : grads) {
    Value g = ret.getOperand(index);
    auto cast = g.getDefiningOp<CastOp>();
    auto rs = (cast ? cast.getInput() : g).getDefiningOp<ReduceScatterOp>();
    if (!rs || !rs->hasOneUse() || (cast && !cast->hasOneUse())) continue;
    Value whole = rs.getInput();
    if (cast) {
      mlir::OpBuilder b(rs);
      auto wide = mlir::cast<mlir::RankedTensorType>(whole.getType())
                      .clone(mlir::cast<mlir::RankedTensorType>(g.getType()).getElementType());
      whole = CastOp::create(b, rs.getLoc(), wide, whole);
    }
    out[index] = {mlir::cast<mlir::RankedTensorType>(g.getType()), rs.getReduceAttr(),
                  rs.getGridAttr(), rs.getGridAxesAttr(), rs.getScatterAxisAttr()};
    ret.setOperand(index, whole);
    if (cast) cast.erase();
    rs.erase();
  }
  step.setFunctionType(mlir::FunctionType::get(step.getContext(), step.getArgumentTypes(), ret.getOperandTypes()));
  return out;
}

struct GradientAccumulationPass : impl::GradientAccumulationBase<GradientAccumulationPass> {
  using GradientAccumulationBase::GradientAccumulationBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::SymbolTable symbols(module);
    // Stage: @train_step as autodiff leaves it: the microstep must not synchronise or update,
    // so no all-reduce and no optimizer yet, and it is accumulated only once.
    auto step = symbols.lookup<mlir::func::FuncOp>(trainStepName);
    mlir::Operation* anchor = step ? step.getOperation() : module.getOperation();
    if (mlir::failed(PipelineStage(module, trainStepName, trainStepName)
                         .require(DEBUG_TYPE, anchor, {StageFact::TrainStep},
                                  {StageFact::AccumulateStep, StageFact::GradientsReduced,
                                   StageFact::Optimizer, StageFact::Fused},
                                  "once, after tessel-autodiff and before "
                                  "tessel-gradient-all-reduce and tessel-optimizer")))
      return signalPassFailure();
    if (microsteps < 2) {
      step.emitError() << "tessel-gradient-accumulation: microsteps must be >= 2, got "
                       << static_cast<int64_t>(microsteps);
      return signalPassFailure();
    }
    if (symbols.lookup(kAccumulateStep)) {  // another kind of symbol (the stage check sees functions)
      step.emitError() << "tessel-gradient-accumulation: @" << kAccumulateStep
                       << " already exists";
      return signalPassFailure();
    }
    if (reduceScatter != "every-microstep" && reduceScatter != "last-microstep") {
      step.emitError() << "tessel-gradient-accumulation: reduce-scatter=" << reduceScatter
                       << " (expected every-microstep or last-microstep)";
      return signalPassFailure();
    }
    auto grads = gradients(step);
    if (grads.empty()) {
      step.emitError() << "tessel-gradient-accumulation: @" << trainStepName
                       << " returns no gradients";
      return signalPassFailure();
    }
    std::map<unsigned, Scatter> scattered;
    if (reduceScatter == "last-microstep") scattered = unscatter(step, grads);

    // 1. @accumulate_step.
    auto acc = step.clone();
    acc.setSymName(kAccumulateStep);
    module.getBody()->push_back(acc);
    {
      mlir::Block& body = acc.getBody().front();
      auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
      mlir::OpBuilder b(ret);
      for (auto& [index, name] : grads) {
        Value g = ret.getOperand(index);
        Value a = accumulator(b, body, name, g.getType(), g.getLoc());
        Value sum = AddOp::create(b, g.getLoc(), g.getType(), a, g);
        AssignOp::create(b, g.getLoc(), b.getStringAttr(name + ":grad_accum"), sum);
      }
      Value loss = ret.getOperand(0);
      mlir::func::ReturnOp::create(b, ret.getLoc(), mlir::ValueRange{loss});
      ret.erase();
      acc.setFunctionType(b.getFunctionType(body.getArgumentTypes(), {loss.getType()}));
      acc.setAllResultAttrs(
          llvm::ArrayRef<mlir::DictionaryAttr>{outputAttrs(acc.getContext(), "loss")});
    }

    // 2. @train_step: the mean over the k microsteps, and the accumulators reset.
    mlir::Block& body = step.getBody().front();
    auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
    mlir::OpBuilder b(ret);
    double inv = 1.0 / static_cast<double>(microsteps);
    for (auto& [index, name] : grads) {
      Value g = ret.getOperand(index);
      Value a = accumulator(b, body, name, g.getType(), g.getLoc());
      Value sum = AddOp::create(b, g.getLoc(), g.getType(), a, g);
      if (auto it = scattered.find(index); it != scattered.end()) {  // last-microstep
        const Scatter& s = it->second;
        sum = ReduceScatterOp::create(b, g.getLoc(), s.block, sum, s.reduce, s.grid, s.gridAxes, s.scatterAxis);
      }
      Value mean = ScaleOp::create(b, g.getLoc(), sum.getType(), sum, b.getF64FloatAttr(inv));
      Value zero = ConstantOp::create(b, g.getLoc(), g.getType(), b.getF64FloatAttr(0.0));
      AssignOp::create(b, g.getLoc(), b.getStringAttr(name + ":grad_accum"), zero);
      ret.setOperand(index, mean);
    }
    step.setFunctionType(b.getFunctionType(body.getArgumentTypes(), ret.getOperandTypes()));
  }
};

}  // namespace
}  // namespace tessel
