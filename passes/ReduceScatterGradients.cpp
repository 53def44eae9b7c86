//===- ReduceScatterGradients.cpp - ZeRO-2: gradients reduced into blocks -------===//
//
// Algorithm (see passes/Passes.td), on @train_step as autodiff leaves it (local shapes):
//   1. For each gradient result g (not autodiff's explicit zero) whose parameter has ZeRO
//      blocks over `axis` (ZeroBlocks.h: rank >= 1, replicated on dimension 0, divisible),
//      g becomes `tessel.reduce_scatter g reduce sum` over the axis along dimension 0: rank
//      k keeps the sum over the axis of rows [k R, k R + R), R = rows / ranks. It is placed
//      right after the gradient is computed, as ZeRO-3's reduce-scatter (autodiff's transpose
//      of the gather) is, so that the whole gradient dies there rather than at the return.
//   2. The function's result types follow.
//   The sum becomes the mean in tessel-gradient-all-reduce (its scattered-axis), after any
//   gradient accumulation, exactly as for ZeRO-3's reduce-scatters.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"
#include "passes/ZeroBlocks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include <map>

#define DEBUG_TYPE "tessel-reduce-scatter-gradients"

namespace tessel {
#define GEN_PASS_DEF_REDUCESCATTERGRADIENTS
#include "passes/Passes.h.inc"

namespace {

struct ReduceScatterGradientsPass : impl::ReduceScatterGradientsBase<ReduceScatterGradientsPass> {
  using ReduceScatterGradientsBase::ReduceScatterGradientsBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    // Stage: gradients as autodiff returns them: not accumulated (the microsteps must see
    // the blocks), not reduced, no optimizer.
    auto step = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(trainStepName);
    mlir::Operation* anchor = step ? step.getOperation() : module.getOperation();
    if (mlir::failed(PipelineStage(module, trainStepName, trainStepName)
                         .require(DEBUG_TYPE, anchor, {StageFact::TrainStep},
                                  {StageFact::AccumulateStep, StageFact::GradientsReduced, StageFact::Optimizer,
                                   StageFact::Fused},
                                  "once, after tessel-autodiff and before "
                                  "tessel-gradient-accumulation, tessel-gradient-all-reduce and tessel-optimizer")))
      return signalPassFailure();
    auto grid = findGrid(module, DEBUG_TYPE);
    if (mlir::failed(grid)) return signalPassFailure();
    const int16_t shardAxis = grid->axis(axis);
    if (shardAxis < 0) {
      module.emitError() << DEBUG_TYPE << ": axis '" << axis << "' is not an axis of @mesh";
      return signalPassFailure();
    }
    std::map<std::string, ParamOp> params;
    for (auto p : step.getBody().front().getOps<ParamOp>()) params[p.getName().str()] = p;
    auto ret = llvm::cast<mlir::func::ReturnOp>(step.getBody().front().getTerminator());
    mlir::OpBuilder b(ret);
    auto sum = ReduceKindAttr::get(b.getContext(), ReduceKind::sum);
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto name = gradName(step, i);
      if (!name) continue;
      mlir::Value g = ret.getOperand(i);
      if (auto zero = g.getDefiningOp<ConstantOp>(); zero && zero.getValue().isZero()) continue;
      auto it = params.find(name.str());
      if (it == params.end()) {
        step.emitError() << DEBUG_TYPE << ": result #" << i << " is the gradient of '" << name.getValue()
                         << "', which is not a tessel.param of @" << step.getSymName();
        return signalPassFailure();
      }
      mlir::FailureOr<bool> blocked = hasZeroBlocks(it->second, *grid, shardAxis, DEBUG_TYPE);
      if (mlir::failed(blocked)) return signalPassFailure();
      if (!*blocked) continue;
      // 1. The block of the summed gradient, right after the gradient.
      auto type = mlir::cast<mlir::RankedTensorType>(g.getType());
      mlir::OpBuilder::InsertionGuard guard(b);
      if (mlir::Operation* def = g.getDefiningOp()) b.setInsertionPointAfter(def);
      auto rs = ReduceScatterOp::create(b, g.getLoc(), zeroBlockType(type, grid->sizes[shardAxis]), g, sum,
                                        grid->ref, b.getDenseI16ArrayAttr({shardAxis}), b.getI64IntegerAttr(0));
      ret.setOperand(i, rs.getResult());
    }
    // 2. The result types.
    step.setFunctionType(b.getFunctionType(step.getArgumentTypes(), ret.getOperandTypes()));
  }
};

}  // namespace
}  // namespace tessel
