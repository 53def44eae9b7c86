//===- ShardBatch.cpp - data parallelism: local batch shapes -------------------===//
//
// Algorithm (see passes/Passes.td):
//   1. Check that every input has the same leading dimension B, divisible by `parts`.
//   2. Inputs get B / parts rows; walking the ops in order, results of ops with a sharded
//      operand whose leading dimension is B are sharded too; changed ops are re-verified.
//   3. Check that the loss is a mean over the batch.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"

#define DEBUG_TYPE "tessel-shard-batch"

namespace tessel {
#define GEN_PASS_DEF_SHARDBATCH
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

/// `t` with its leading dimension replaced by `rows`.
mlir::RankedTensorType withRows(mlir::Type t, int64_t rows) {
  auto r = mlir::cast<mlir::RankedTensorType>(t);
  llvm::SmallVector<int64_t> shape(r.getShape());
  shape[0] = rows;
  return mlir::RankedTensorType::get(shape, r.getElementType());
}

struct ShardBatchPass : impl::ShardBatchBase<ShardBatchPass> {
  using ShardBatchBase::ShardBatchBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto f = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(forwardName);
    if (!f) {
      module.emitError() << "tessel-shard-batch: no function @" << forwardName;
      return signalPassFailure();
    }
    // Stage: the forward function on the global batch, before autodiff (which must derive
    // the backward pass on the local shapes) and before fusion.
    if (mlir::failed(PipelineStage(module, forwardName)
                         .require(DEBUG_TYPE, f, {},
                                  {StageFact::TrainStep, StageFact::BatchSharded,
                                   StageFact::Fused},
                                  "once (parts = data-parallel ranks x microsteps), before "
                                  "tessel-autodiff")))
      return signalPassFailure();
    int64_t parts = this->parts;
    if (parts < 1) {
      f.emitError() << "tessel-shard-batch: parts must be >= 1, got " << parts;
      return signalPassFailure();
    }
    if (mlir::failed(shard(f))) return signalPassFailure();
    setBatchShards(f, parts);
  }

  mlir::LogicalResult shard(mlir::func::FuncOp f) {
    const int64_t parts = this->parts;
    mlir::Block& body = f.getBody().front();
    if (body.getNumArguments() == 0)
      return f.emitError() << "data parallelism splits the inputs' batch, but @"
                           << f.getSymName() << " has no inputs";
    // 1. The global batch B: the leading dimension every input shares.
    int64_t batch = -1;
    for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
      auto type = mlir::cast<mlir::RankedTensorType>(arg.getType());
      auto name = inputName(f, i);
      std::string what = name ? "input '" + name.str() + "'" : "argument #" + std::to_string(i);
      if (type.getRank() == 0)
        return mlir::emitError(arg.getLoc())
               << "data parallelism splits the inputs' leading (batch) dimension, but " << what
               << " is a scalar";
      int64_t rows = type.getShape()[0];
      if (batch < 0) batch = rows;
      if (rows != batch)
        return mlir::emitError(arg.getLoc())
               << "data parallelism splits the inputs' leading (batch) dimension, but " << what
               << " has " << rows << " rows and the first input " << batch;
      if (rows % parts != 0)
        return mlir::emitError(arg.getLoc())
               << "the global batch " << rows << " of " << what << " is not divisible by "
               << parts << " (the data-parallel degree times the microsteps)";
    }
    int64_t local = batch / parts;

    // 2. Propagate the local batch.
    llvm::DenseSet<Value> sharded;
    for (Value arg : body.getArguments()) {
      arg.setType(withRows(arg.getType(), local));
      sharded.insert(arg);
    }
    for (mlir::Operation& op : body.without_terminator()) {
      if (!llvm::any_of(op.getOperands(), [&](Value v) { return sharded.contains(v); }))
        continue;
      for (Value r : op.getResults()) {
        auto type = mlir::dyn_cast<mlir::RankedTensorType>(r.getType());
        if (!type || type.getRank() == 0 || type.getShape()[0] != batch) continue;
        r.setType(withRows(type, local));
        sharded.insert(r);
      }
      if (mlir::failed(mlir::verify(&op)))
        return op.emitError() << "cannot run on a local batch of " << local << " rows ("
                              << batch << " split over " << parts << ")";
    }
    auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
    f.setFunctionType(mlir::FunctionType::get(f.getContext(), body.getArgumentTypes(),
                                              ret.getOperandTypes()));

    // 3. The loss must be a batch mean.
    for (unsigned i = 0; i < f.getNumResults(); ++i) {
      auto out = outputName(f, i);
      if (!out || out.getValue() != "loss") continue;
      mlir::Operation* def = ret.getOperand(i).getDefiningOp();
      bool mean = def && mlir::isa<CrossEntropyOp, ReduceMeanOp>(def) &&
                  sharded.contains(def->getOperand(0));
      if (!mean) {
        mlir::Location loc = def ? def->getLoc() : ret.getLoc();
        return mlir::emitError(loc)
               << "data parallelism averages the ranks' losses and gradients, so the loss must "
                  "be a mean over the batch (tessel.cross_entropy or tessel.reduce_mean of a "
                  "batched value)";
      }
    }
    return mlir::success();
  }
};

}  // namespace
}  // namespace tessel
