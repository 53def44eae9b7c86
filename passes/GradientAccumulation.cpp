//===- GradientAccumulation.cpp - k microsteps per optimizer step --------------===//
//
// Algorithm (see passes/Passes.td):
//   1. Clone @train_step into @accumulate_step: grad_accum += g for every gradient, return
//      the loss only (no collectives, no optimizer: the no-sync microstep).
//   2. In @train_step: return (grad_accum + g) * (1/k) and assign zeros to grad_accum.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

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
    auto grads = gradients(step);
    if (grads.empty()) {
      step.emitError() << "tessel-gradient-accumulation: @" << trainStepName
                       << " returns no gradients";
      return signalPassFailure();
    }

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
      Value mean = ScaleOp::create(b, g.getLoc(), g.getType(), sum, b.getF64FloatAttr(inv));
      Value zero = ConstantOp::create(b, g.getLoc(), g.getType(), b.getF64FloatAttr(0.0));
      AssignOp::create(b, g.getLoc(), b.getStringAttr(name + ":grad_accum"), zero);
      ret.setOperand(index, mean);
    }
  }
};

}  // namespace
}  // namespace tessel
