//===- InsertReshards.cpp - a tessel.reshard where a user needs another layout ---===//
//
// Algorithm (see passes/Passes.td): for each op in order (the return included), its rule
// (compiler/ShardingRules.h) on its operands' current shardings says what each operand
// must be; every operand that differs is read through a tessel.reshard to that sharding,
// one per (value, sharding), placed before its first user.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <optional>

#define DEBUG_TYPE "tessel-insert-reshards"

namespace tessel {
#define GEN_PASS_DEF_INSERTRESHARDS
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

struct InsertReshardsPass : impl::InsertReshardsBase<InsertReshardsPass> {
  using InsertReshardsBase::InsertReshardsBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto target = shardingTarget(module, forwardName, DEBUG_TYPE, {StageFact::ShardingsPropagated},
                                 {StageFact::ReshardsPending, StageFact::Partitioned,
                                   StageFact::TrainStep},
                                 "once, after tessel-propagate-sharding and before "
                                  "tessel-reshard-to-collectives");
    if (mlir::failed(target)) return signalPassFailure();
    mlir::func::FuncOp f = target->function;
    const GridInfo* grid = &target->grid;

    std::map<std::pair<const void*, const void*>, Value> made;  // (value, target attr) -> reshard
    for (mlir::Operation& op : llvm::make_early_inc_range(f.getBody().front())) {
      if (mlir::isa<ParamOp, ReshardOp>(op)) continue;
      llvm::SmallVector<TensorSharding> in;
      for (Value v : op.getOperands()) in.push_back(shardingOf(v));
      // The op's own result layout is the hint propagation used (a sequence split taken
      // from a user), so the rule asks the operands for what that layout needs.
      std::optional<TensorSharding> hint;
      if (op.getNumResults() == 1) hint = shardingOf(op.getResult(0));
      OpSharding rule = shardOp(&op, in, hint ? &*hint : nullptr);
      for (auto [i, v] : llvm::enumerate(op.getOperands())) {
        if (rule.operands[i] == in[i]) continue;
        ShardingAttr want = rule.operands[i].toAttr(&getContext(), grid->ref);
        Value& r = made[{v.getAsOpaquePointer(), want.getAsOpaquePointer()}];
        if (!r) {
          mlir::OpBuilder b(&op);
          auto reshard = ReshardOp::create(b, op.getLoc(), v.getType(), v,
                                           in[i].toAttr(&getContext(), grid->ref), want);
          setShardings(reshard, {rule.operands[i]}, grid->ref);
          r = reshard.getResult();
        }
        op.setOperand(i, r);
      }
    }
  }
};

}  // namespace
}  // namespace tessel
