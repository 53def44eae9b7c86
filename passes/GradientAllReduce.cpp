//===- GradientAllReduce.cpp - average gradients over the replica group --------===//
//
// Algorithm (see passes/Passes.td): before the return of @train_step, every gradient
// result g (except autodiff's explicit zeros) becomes
//   %f = tessel.all_reduce_start %g reduce avg axis <axis> group <N> bucket <i>
//   %r = tessel.all_reduce_wait %f
// and the function returns %r. Buckets are numbered in result order here;
// tessel-bucket-gradients renumbers them in production order.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#define DEBUG_TYPE "tessel-gradient-all-reduce"

namespace tessel {
#define GEN_PASS_DEF_GRADIENTALLREDUCE
#include "passes/Passes.h.inc"

namespace {

struct GradientAllReducePass : impl::GradientAllReduceBase<GradientAllReducePass> {
  using GradientAllReduceBase::GradientAllReduceBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    // Stage: gradients as autodiff (or accumulation) returns them, not yet reduced, and no
    // optimizer yet (clipping must see the reduced gradients).
    auto step = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(trainStepName);
    mlir::Operation* anchor = step ? step.getOperation() : module.getOperation();
    if (mlir::failed(PipelineStage(module, trainStepName, trainStepName)
                         .require(DEBUG_TYPE, anchor, {StageFact::TrainStep},
                                  {StageFact::GradientsReduced, StageFact::Optimizer,
                                   StageFact::Fused},
                                  "once, after tessel-autodiff and before tessel-optimizer")))
      return signalPassFailure();
    if (group < 1 || axis.empty()) {
      step.emitError() << "tessel-gradient-all-reduce: needs a mesh axis and group >= 1";
      return signalPassFailure();
    }
    auto ret = llvm::cast<mlir::func::ReturnOp>(step.getBody().front().getTerminator());
    mlir::OpBuilder b(ret);
    int64_t bucket = 0;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto name = gradName(step, i);
      if (!name) continue;
      mlir::Value g = ret.getOperand(i);
      if (auto zero = g.getDefiningOp<ConstantOp>(); zero && zero.getValue().isZero()) continue;
      mlir::Location loc = g.getLoc();
      auto start = AllReduceStartOp::create(
          b, loc, mlir::ValueRange{g}, ReduceKindAttr::get(b.getContext(), ReduceKind::avg),
          b.getStringAttr(axis), b.getI64IntegerAttr(group), b.getI64IntegerAttr(bucket++),
          b.getStrArrayAttr({name.getValue()}));
      auto wait = AllReduceWaitOp::create(b, loc, start.getInFlight());
      ret.setOperand(i, wait.getResults()[0]);
    }
  }
};

}  // namespace
}  // namespace tessel
