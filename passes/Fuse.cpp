//===- Fuse.cpp - group row-local ops into fused kernel regions ----------------===//
//
// Algorithm (see passes/Passes.td):
//   1. In block order, a row-local op joins the group of one of its operands' producers if
//      the group has its shape and all its other operands are defined before the group's
//      first op; otherwise it starts a new group.
//   2. Each group of >= 2 ops is cloned into a tessel.fused op placed at its first op:
//      inputs = operands from outside (first-use order), results = values used outside.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/PipelineAttrs.h"

#include "passes/PipelineStage.h"

#include "compiler/RowLocal.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#define DEBUG_TYPE "tessel-fuse"

namespace tessel {
#define GEN_PASS_DEF_FUSE
#include "passes/Passes.h.inc"

namespace {

struct Group {
  llvm::SmallVector<mlir::Operation*> ops;
  llvm::SmallVector<int64_t> shape;
};

/// True if `v` is available before `op` (a block argument or defined earlier in the block).
bool definedBefore(mlir::Value v, mlir::Operation* op) {
  mlir::Operation* def = v.getDefiningOp();
  return !def || def->isBeforeInBlock(op);
}

void outline(Group& g) {
  llvm::SmallPtrSet<mlir::Operation*, 16> members(g.ops.begin(), g.ops.end());
  llvm::SmallVector<mlir::Value> inputs, outputs;
  llvm::DenseSet<mlir::Value> seenInput;
  for (mlir::Operation* op : g.ops)
    for (mlir::Value v : op->getOperands())
      if (!members.contains(v.getDefiningOp()) && seenInput.insert(v).second) inputs.push_back(v);
  for (mlir::Operation* op : g.ops)
    for (mlir::Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](mlir::Operation* u) { return !members.contains(u); }))
        outputs.push_back(r);

  mlir::OpBuilder b(g.ops.front());
  llvm::SmallVector<mlir::Type> resultTypes;
  for (mlir::Value v : outputs) resultTypes.push_back(v.getType());
  auto fused = FusedOp::create(b, g.ops.front()->getLoc(), resultTypes, inputs);
  copyPipelineTags(g.ops.front(), fused);  // a pipeline stage's action it runs in
  mlir::Block* body = new mlir::Block();
  fused.getBody().push_back(body);
  mlir::IRMapping map;
  for (mlir::Value v : inputs) map.map(v, body->addArgument(v.getType(), v.getLoc()));
  mlir::OpBuilder inner = mlir::OpBuilder::atBlockEnd(body);
  for (mlir::Operation* op : g.ops) inner.clone(*op, map);
  llvm::SmallVector<mlir::Value> yielded;
  for (mlir::Value v : outputs) yielded.push_back(map.lookup(v));
  YieldOp::create(inner, fused.getLoc(), yielded);

  for (auto [old, replacement] : llvm::zip(outputs, fused.getResults()))
    old.replaceUsesWithIf(replacement, [&](mlir::OpOperand& use) {
      return !members.contains(use.getOwner());
    });
  for (mlir::Operation* op : llvm::reverse(g.ops)) op->erase();
}

struct FusePass : impl::FuseBase<FusePass> {
  void runOnOperation() override {
    // Stage: the last rewrite; every pass before it sees unfused ops.
    if (mlir::failed(PipelineStage(getOperation())
                         .require(DEBUG_TYPE, getOperation(), {}, {StageFact::Fused},
                                  "once, last")))
      return signalPassFailure();
    mlir::Block& block = getOperation().getBody().front();
    std::vector<Group> groups;
    llvm::DenseMap<mlir::Operation*, size_t> groupOf;
    for (mlir::Operation& op : block) {
      std::optional<llvm::SmallVector<int64_t>> shape = rowLocalShape(&op);
      if (!shape) continue;
      std::optional<size_t> chosen;
      for (mlir::Value v : op.getOperands()) {
        auto it = groupOf.find(v.getDefiningOp());
        if (it == groupOf.end() || groups[it->second].shape != *shape) continue;
        Group& g = groups[it->second];
        llvm::SmallPtrSet<mlir::Operation*, 16> members(g.ops.begin(), g.ops.end());
        bool acyclic = llvm::all_of(op.getOperands(), [&](mlir::Value w) {
          return members.contains(w.getDefiningOp()) || definedBefore(w, g.ops.front());
        });
        if (acyclic) {
          chosen = it->second;
          break;
        }
      }
      if (!chosen) {
        groups.push_back(Group{{}, *shape});
        chosen = groups.size() - 1;
      }
      groups[*chosen].ops.push_back(&op);
      groupOf[&op] = *chosen;
    }
    for (Group& g : groups)
      if (g.ops.size() >= 2) outline(g);
  }
};

}  // namespace
}  // namespace tessel
