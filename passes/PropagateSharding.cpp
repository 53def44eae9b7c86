//===- PropagateSharding.cpp - a sharding for every value ----------------------===//
//
// Algorithm (see passes/Passes.td): one walk in program order. Each op's operand shardings
// are its producers' (arguments replicated, parameters as the plan says); a parameter the
// plan left free takes what its first use's rule asks for and is fixed from then on; the
// op's rule (compiler/ShardingRules.h) then gives its results' shardings, recorded as
// `tessel.shardings`.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#define DEBUG_TYPE "tessel-propagate-sharding"

namespace tessel {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

struct PropagateShardingPass : impl::PropagateShardingBase<PropagateShardingPass> {
  using PropagateShardingBase::PropagateShardingBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto f = mlir::SymbolTable(module).lookup<mlir::func::FuncOp>(forwardName);
    if (!f) {
      module.emitError() << DEBUG_TYPE << ": no function @" << forwardName;
      return signalPassFailure();
    }
    if (mlir::failed(PipelineStage(module, forwardName)
                         .require(DEBUG_TYPE, f, {},
                                  {StageFact::TrainStep, StageFact::ShardingsPropagated,
                                   StageFact::Partitioned},
                                  "once, after the plan's seeds and before "
                                  "tessel-insert-reshards")))
      return signalPassFailure();
    auto grid = findGrid(module, DEBUG_TYPE);
    if (mlir::failed(grid)) return signalPassFailure();
    propagate(f, grid->ref);
  }

  void propagate(mlir::func::FuncOp f, mlir::FlatSymbolRefAttr grid) {
    auto shardings = TesselDialect::ShardingsAttrHelper(&getContext());
    llvm::DenseMap<Value, TensorSharding> current;
    llvm::DenseSet<Value> free;  // parameters no plan entry and no use has fixed yet
    auto get = [&](Value v) {
      auto it = current.find(v);
      return it != current.end() ? it->second : shardingOf(v);
    };
    for (mlir::Operation& op : f.getBody().front()) {
      if (auto p = mlir::dyn_cast<ParamOp>(op)) {
        if (!shardings.isAttrPresent(p)) free.insert(p.getResult());
        continue;
      }
      llvm::SmallVector<TensorSharding> in;
      for (Value v : op.getOperands()) in.push_back(get(v));
      OpSharding rule = shardOp(&op, in);
      // Free parameters adopt what this use asks for; the rule is then re-evaluated (an
      // adoption can only add splits, so this settles in at most one round per operand).
      for (unsigned round = 0; round <= op.getNumOperands(); ++round) {
        bool changed = false;
        for (auto [i, v] : llvm::enumerate(op.getOperands())) {
          if (!free.contains(v)) continue;
          free.erase(v);
          if (rule.operands[i] == in[i]) continue;
          in[i] = rule.operands[i];
          current[v] = in[i];
          if (!in[i].isReplicated()) setShardings(v.getDefiningOp(), {in[i]}, grid);
          changed = true;
        }
        if (!changed) break;
        rule = shardOp(&op, in);
      }
      if (op.getNumResults() == 0) continue;
      for (auto [r, s] : llvm::zip(op.getResults(), rule.results)) current[r] = s;
      setShardings(&op, rule.results, grid);
    }
  }
};

}  // namespace
}  // namespace tessel
