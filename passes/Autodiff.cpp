//===- Autodiff.cpp - reverse-mode automatic differentiation -------------------===//
//
// Algorithm (see passes/Passes.td):
//   1. Clone @forward into @train_step that returns only the loss.
//   2. Forward-mark every value reachable from a trainable tessel.param; backward-mark every
//      value the loss reaches. The ops whose results carry both marks are differentiated.
//   3. Seed d(loss) = 1 and visit the ops last to first, calling VJPOpInterface::buildVJP and
//      summing gradients that reach the same value.
//   4. Return the loss and one gradient per trainable parameter, in parameter order;
//      parameters the loss ignores get an explicit zero and a remark saying that training
//      leaves them untouched (no reduction, no update, no decay, no state).
// A pipeline stage (tessel-split-stages) also differentiates through its transfers: a
// tessel.recv result is a root of the forward marks (it depends on another stage's
// parameters) and a tessel.send operand one of the backward marks (another stage's loss
// depends on it). In the reverse sweep a send becomes a recv of its operand's gradient from
// the same peer, and a recv a send of its result's gradient (zeros if the loss ignores it),
// always, so that both sides of every pair post the backward transfer. The backward ops built
// from an op of a chunk get its tessel.pp_chunk and tessel.pp_action = "B".
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/PipelineAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#define DEBUG_TYPE "tessel-autodiff"

namespace tessel {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

bool isTrainable(ParamOp p) { return !p.getState(); }

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::SymbolTable symbols(module);
    auto forward = symbols.lookup<mlir::func::FuncOp>(forwardName);
    if (!forward) {
      module.emitError() << "tessel-autodiff: no function @" << forwardName << " to differentiate";
      return signalPassFailure();
    }
    // Stage: the forward function as built, not yet differentiated or fused (fused regions
    // have no VJP rule).
    if (mlir::failed(PipelineStage(module, forwardName, trainStepName)
                         .require(DEBUG_TYPE, forward, {},
                                  {StageFact::TrainStep, StageFact::Fused},
                                  "once, before tessel-fuse")))
      return signalPassFailure();
    std::optional<unsigned> loss = findOutput(forward, "loss");
    if (!loss) {
      forward.emitError() << "tessel-autodiff: @" << forwardName << " has no result tagged {"
                          << kOutputAttr << " = \"loss\"}";
      return signalPassFailure();
    }
    auto step = forward.clone();
    step.setSymName(trainStepName);
    module.getBody()->push_back(step);
    if (mlir::failed(differentiate(step, *loss))) signalPassFailure();
  }

  mlir::LogicalResult differentiate(mlir::func::FuncOp f, unsigned lossResult) {
    mlir::Block& body = f.getBody().front();
    auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(lossResult);

    // 2. Marks: depends on a trainable parameter (forward) and reaches the loss (backward).
    llvm::SmallVector<ParamOp> params;
    llvm::DenseSet<Value> fromParams, toLoss;
    for (mlir::Operation& op : body.without_terminator()) {
      if (auto p = llvm::dyn_cast<ParamOp>(op); p && isTrainable(p)) {
        params.push_back(p);
        fromParams.insert(p.getResult());
        continue;
      }
      if (auto recv = llvm::dyn_cast<RecvOp>(op)) {
        fromParams.insert(recv.getResult());
        continue;
      }
      if (llvm::any_of(op.getOperands(), [&](Value v) { return fromParams.contains(v); }))
        for (Value r : op.getResults()) fromParams.insert(r);
    }
    toLoss.insert(loss);
    for (mlir::Operation& op : llvm::reverse(body.without_terminator()))
      if (llvm::isa<SendOp>(op) || llvm::any_of(op.getResults(), [&](Value v) { return toLoss.contains(v); }))
        for (Value o : op.getOperands()) toLoss.insert(o);

    // 3. Reverse sweep, appending backward ops before the return.
    mlir::OpBuilder b(ret);
    llvm::DenseMap<Value, Value> grads;
    auto accumulate = [&](Value v, Value g, mlir::Location loc) {
      auto [it, inserted] = grads.try_emplace(v, g);
      if (!inserted) it->second = AddOp::create(b, loc, v.getType(), it->second, g);
    };
    if (fromParams.contains(loss))
      grads[loss] = ConstantOp::create(b, ret.getLoc(), loss.getType(), b.getF64FloatAttr(1.0));
    llvm::SmallVector<mlir::Operation*> forwardOps;
    for (mlir::Operation& op : body.without_terminator()) forwardOps.push_back(&op);
    // The ops built from `op` (since `last`) belong to its chunk's backward action; those
    // built from a free op (a parameter's cast or all-gather, which every chunk using it
    // computes) to the action that produced its gradient (`from`).
    auto tag = [&](mlir::Operation* op, mlir::Operation* last, Value from = Value()) {
      std::optional<int64_t> chunk = pipelineTag(op, PipelineTag::Chunk);
      if (!chunk && from && from.getDefiningOp()) chunk = pipelineTag(from.getDefiningOp(), PipelineTag::Chunk);
      if (!chunk) return;
      for (mlir::Operation* o = last ? last->getNextNode() : &body.front(); o && o != ret.getOperation();
           o = o->getNextNode()) {
        setPipelineTag(o, PipelineTag::Chunk, *chunk);
        setAction(o, /*backward=*/true);
      }
    };
    for (mlir::Operation* op : llvm::reverse(forwardOps)) {
      if (llvm::isa<ParamOp>(op)) continue;
      mlir::Operation* last = ret->getPrevNode();
      if (auto send = llvm::dyn_cast<SendOp>(op)) {
        // The gradient of what this stage sent comes back from the same peer.
        Value in = send.getInput();
        auto g = RecvOp::create(b, op->getLoc(), in.getType(), send.getPeerAttr(), send.getGridAttr(),
                                send.getGridAxesAttr());
        if (fromParams.contains(in)) accumulate(in, g, op->getLoc());
        tag(op, last);
        continue;
      }
      if (auto recv = llvm::dyn_cast<RecvOp>(op)) {
        Value r = recv.getResult();
        Value g = toLoss.contains(r) ? grads.lookup(r) : Value();
        if (!g) g = ConstantOp::create(b, op->getLoc(), r.getType(), b.getF64FloatAttr(0.0));
        SendOp::create(b, op->getLoc(), g, recv.getPeerAttr(), recv.getGridAttr(), recv.getGridAxesAttr());
        tag(op, last);
        continue;
      }
      llvm::SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        Value g = (fromParams.contains(r) && toLoss.contains(r)) ? grads.lookup(r) : Value();
        resultGrads.push_back(g);
        any |= static_cast<bool>(g);
      }
      if (!any) continue;
      auto vjp = llvm::dyn_cast<VJPOpInterface>(op);
      if (!vjp)
        return op->emitError() << "'" << op->getName()
                               << "' has no VJP rule, so the loss cannot be differentiated "
                                  "through it";
      llvm::SmallVector<Value> operandGrads;
      if (mlir::failed(vjp.buildVJP(b, resultGrads, operandGrads))) return mlir::failure();
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
        if (g && fromParams.contains(operand)) accumulate(operand, g, op->getLoc());
      tag(op, last, *llvm::find_if(resultGrads, [](Value g) { return static_cast<bool>(g); }));
    }

    // 4. One gradient per trainable parameter, explicit zeros where the loss ignores it.
    llvm::SmallVector<Value> results{loss};
    for (ParamOp p : params) {
      Value g = grads.lookup(p.getResult());
      if (!g) {
        // The zero is the contract every later pass keeps (GradientAllReduce,
        // ReduceScatterGradients, GradientAccumulation and Optimizer skip it), so the remark
        // can say what training does with the parameter.
        mlir::emitRemark(p.getLoc())
            << "parameter '" << p.getName()
            << "' does not affect the loss; its gradient is zero, so it is not all-reduced and the optimizer "
               "leaves it as it is: no update, no weight decay, no optimizer state (as torch.optim skips a "
               "parameter whose .grad is None)";
        g = ConstantOp::create(b, p.getLoc(), p.getType(), b.getF64FloatAttr(0.0));
      }
      results.push_back(g);
    }
    mlir::func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();

    llvm::SmallVector<mlir::Type> types;
    for (Value v : results) types.push_back(v.getType());
    f.setFunctionType(b.getFunctionType(body.getArgumentTypes(), types));
    llvm::SmallVector<mlir::DictionaryAttr> attrs;
    attrs.push_back(outputAttrs(f.getContext(), "loss"));
    for (ParamOp p : params) attrs.push_back(gradAttrs(f.getContext(), p.getName()));
    f.setAllResultAttrs(attrs);
    return mlir::success();
  }
};

}  // namespace
}  // namespace tessel
