//===- MixedPrecision.cpp - bf16 compute with f32 master weights ---------------===//
//
// Algorithm (see passes/Passes.td), on the forward function before autodiff:
//   1. Each trainable f32 `tessel.param` (the master weight) and each f32 tensor argument
//      gets one `tessel.cast` to bf16 right after its definition; every use reads the cast,
//      except an embedding's table: the embedding gathers f32 rows, and the ops that read
//      them cast them (step 2), which gives the same values and keeps the table's gradient
//      (a scatter-add over many tokens) in f32.
//   2. In program order, an op with at least one bf16 float operand computes in bf16: its
//      remaining f32 float operands are cast to bf16 and its float results become bf16,
//      except the f32 scalar results the dialect fixes (cross_entropy's loss, the
//      vocab-parallel cross-entropy's row statistics). Ops that see only f32 (the loss and
//      what follows it) stay f32.
//   3. A returned value whose type changed is cast back to the function's declared result
//      type, so the function's signature (and the runtime's view of it) is unchanged.
// Autodiff then differentiates the casts (VJP: cast back), so every parameter gradient
// arrives in f32 and the optimizer updates f32 masters with f32 state.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#define DEBUG_TYPE "tessel-mixed-precision"

namespace tessel {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"

namespace {

using mlir::RankedTensorType;
using mlir::Value;

RankedTensorType floatTensor(mlir::Type t) {
  auto tensor = mlir::dyn_cast<RankedTensorType>(t);
  return tensor && mlir::isa<mlir::FloatType>(tensor.getElementType()) ? tensor : nullptr;
}

bool isF32Tensor(Value v) {
  auto t = floatTensor(v.getType());
  return t && t.getElementType().isF32();
}

bool isBF16Tensor(Value v) {
  auto t = floatTensor(v.getType());
  return t && t.getElementType().isBF16();
}

/// An embedding gathers from its f32 table; the gathered rows are cast instead (the same
/// values: rounding commutes with a gather), so the table's gradient is summed in f32.
bool isEmbeddingTable(mlir::OpOperand& use) {
  if (auto e = mlir::dyn_cast<EmbeddingOp>(use.getOwner())) return use.get() == e.getTable();
  if (auto e = mlir::dyn_cast<EmbeddingShardOp>(use.getOwner())) return use.get() == e.getTable();
  return false;
}

/// The vocab-parallel cross-entropy's row statistics are f32 by definition (its ops read bf16
/// logits and give f32 maxima, sums and target logits, and the loss): such an op keeps its
/// f32 operands and results, as the loss of cross_entropy does.
bool keepsF32Statistics(mlir::Operation& op) {
  return mlir::isa<RowMaxOp, SumExpOp, TargetLogitOp, CrossEntropyFromStatsOp>(op);
}

/// Casts `v` to bf16 right after its definition and makes its uses read the cast (all but
/// embedding tables).
void castAllUses(mlir::OpBuilder& b, Value v, mlir::Location loc) {
  if (llvm::all_of(v.getUses(), isEmbeddingTable)) return;
  auto type = mlir::cast<RankedTensorType>(v.getType());
  Value cast = CastOp::create(b, loc, type.clone(b.getBF16Type()), v);
  v.replaceUsesWithIf(cast, [&](mlir::OpOperand& use) {
    return use.getOwner() != cast.getDefiningOp() && !isEmbeddingTable(use);
  });
}

struct MixedPrecisionPass : impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<mlir::func::FuncOp>(functionName);
    if (!func) {
      getOperation().emitError() << "tessel-mixed-precision: no function @" << functionName;
      return signalPassFailure();
    }
    // Stage: the forward function in f32, before autodiff (the backward pass must be derived
    // from the casts, or the rewrite would change @forward alone) and before fusion.
    if (mlir::failed(PipelineStage(getOperation(), functionName)
                         .require(DEBUG_TYPE, func, {},
                                  {StageFact::TrainStep, StageFact::MixedPrecision,
                                   StageFact::Fused},
                                  "once, before tessel-autodiff")))
      return signalPassFailure();
    mlir::Block& body = func.getBody().front();
    mlir::OpBuilder b(func.getContext());

    // 1. Master weights and float inputs enter the computation through a cast.
    b.setInsertionPointToStart(&body);
    for (mlir::BlockArgument arg : body.getArguments())
      if (isF32Tensor(arg) && mlir::cast<RankedTensorType>(arg.getType()).getRank() > 0)
        castAllUses(b, arg, func.getLoc());
    for (ParamOp p : llvm::make_early_inc_range(body.getOps<ParamOp>())) {
      if (p.getState() || !isF32Tensor(p.getResult())) continue;
      b.setInsertionPointAfter(p);
      castAllUses(b, p.getResult(), p.getLoc());
    }

    // 2. Ops that read bf16 compute in bf16.
    for (mlir::Operation& op : llvm::make_early_inc_range(body)) {
      if (mlir::isa<CastOp, ParamOp, mlir::func::ReturnOp>(op)) continue;
      if (llvm::none_of(op.getOperands(), isBF16Tensor) || keepsF32Statistics(op)) continue;
      b.setInsertionPoint(&op);
      if (auto sum = mlir::dyn_cast<AllReduceOp>(op)) {
        // Partial sums add up in f32 (the runtime's all-reduces are f32, and the sum of bf16
        // parts rounds once instead of once per rank); the users cast the f32 result.
        auto type = mlir::cast<RankedTensorType>(sum.getInput().getType());
        sum.getInputMutable().assign(CastOp::create(b, op.getLoc(), type.clone(b.getF32Type()), sum.getInput()));
        sum.getResult().setType(type.clone(b.getF32Type()));
        continue;
      }
      for (mlir::OpOperand& operand : op.getOpOperands()) {
        if (!isF32Tensor(operand.get())) continue;
        auto type = mlir::cast<RankedTensorType>(operand.get().getType());
        operand.set(CastOp::create(b, op.getLoc(), type.clone(b.getBF16Type()), operand.get()));
      }
      if (mlir::isa<CrossEntropyOp>(op)) continue;  // the loss stays an f32 scalar
      for (Value r : op.getResults())
        if (isF32Tensor(r))
          r.setType(mlir::cast<RankedTensorType>(r.getType()).clone(b.getBF16Type()));
    }

    // 3. The signature is unchanged: results go back to their declared types.
    auto ret = mlir::cast<mlir::func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    for (auto [operand, type] : llvm::zip(ret->getOpOperands(), func.getResultTypes()))
      if (operand.get().getType() != type)
        operand.set(CastOp::create(b, ret.getLoc(), type, operand.get()));

    if (mlir::failed(mlir::verify(func))) return signalPassFailure();
    setMixedPrecision(func);
  }
};

}  // namespace
}  // namespace tessel
