//===- FuseGemmEpilogues.cpp - bias, GELU, residual, bias gradient into the GEMM --===//
//
// Algorithm (see passes/PassesCore.td):
//   1. Backward: a weight-gradient matmul dY^T X (transpose_lhs, rank-2 f32) whose lhs is dY
//      (through reshapes) and a tessel.reduce_sum of the same dY over every dimension but
//      the last become one tessel.matmul_epilogue ... bias_gradient (cuBLASLt's BGRADA).
//   2. Forward, along the matmul's single-user chain: `add` of a rank-1 [N] bias, then
//      `gelu` (whose input may also feed `gelu_grad`: kept as the pre-activation result),
//      or else an `add` of a tensor of the result's type (the residual); every value
//      replaced has no users but the ones fused (and gelu_grad).
//   3. THE PARTIAL-SUM RULE: step 2 never fuses into a matmul whose product is a pending
//      partial sum (pendingPartialSum), see there.
//   4. The fused op goes where the last fused op was, with the matmul's location; every
//      replaced value's remaining users follow it.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/PipelineAttrs.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "tessel-fuse-gemm-epilogues"

namespace tessel {
#define GEN_PASS_DEF_FUSEGEMMEPILOGUES
#include "passes/Passes.h.inc"

namespace {

using mlir::Operation;
using mlir::Value;

/// `v` with every tessel.reshape on its way looked through (a reshape aliases its operand).
Value root(Value v) {
  while (auto r = v.getDefiningOp<ReshapeOp>()) v = r.getInput();
  return v;
}

mlir::RankedTensorType typeOf(Value v) { return mlir::cast<mlir::RankedTensorType>(v.getType()); }

/// THE PARTIAL-SUM RULE (runtime/exec/Program.h GemmEpilogue): an epilogue that changes the
/// product (bias, GELU, residual) must never fuse into a GEMM whose output is a pending
/// partial sum, or it would be applied once per rank before the sum. After tessel-partition
/// and tessel-reshard-to-collectives a pending partial sum carries no sharding any more: it
/// is a value that reaches a summing collective (tessel.all_reduce: Megatron's g after a
/// row-parallel projection, or the transpose of tessel.replicate in the backward pass;
/// tessel.reduce_scatter under sequence parallelism; a gradient bucket's
/// tessel.all_reduce_start over the batch axes) through ops that keep a sum pending
/// (ShardingRules' keepPartial ops add, sub and scale, and the layout ops reshape,
/// transpose and cast). Any such path makes the product pending: it is refused.
bool pendingPartialSum(Value product) {
  llvm::SmallVector<Value> work{product};
  llvm::SmallPtrSet<Operation*, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation* user : v.getUsers()) {
      if (!seen.insert(user).second) continue;
      if (mlir::isa<AllReduceOp, AllReduceStartOp, ReduceScatterOp, ReduceScatterStartOp>(user)) return true;
      if (mlir::isa<AddOp, SubOp, ScaleOp, ReshapeOp, TransposeOp, CastOp>(user))
        for (Value r : user->getResults()) work.push_back(r);
    }
  }
  return false;
}

/// The single user of `v` if it is one op of type OpT in `v`'s block.
template <typename OpT>
OpT soleUser(Value v) {
  if (!v.hasOneUse()) return nullptr;
  auto op = mlir::dyn_cast<OpT>(*v.getUsers().begin());
  return op && op->getBlock() == v.getParentBlock() ? op : nullptr;
}

/// The operand of binary `add` that is not `v` (nullptr when both are `v`).
Value other(AddOp add, Value v) {
  if (add.getLhs() == v && add.getRhs() != v) return add.getRhs();
  if (add.getRhs() == v && add.getLhs() != v) return add.getLhs();
  return nullptr;
}

/// Whether every user of `v` other than `except` comes after `anchor` in its block.
bool usersFollow(Value v, Operation* anchor, llvm::ArrayRef<Operation*> except) {
  return llvm::all_of(v.getUsers(), [&](Operation* u) {
    return llvm::is_contained(except, u) || (u->getBlock() == anchor->getBlock() && anchor->isBeforeInBlock(u));
  });
}

struct FuseGemmEpiloguesPass : impl::FuseGemmEpiloguesBase<FuseGemmEpiloguesPass> {
  void runOnOperation() override {
    mlir::func::FuncOp f = getOperation();
    // Stage: after autodiff, the optimizer and the collectives' placement, before tessel-fuse
    // (which would hide the bias add and GELU inside fused regions).
    const PipelineStage stage(f);
    if (mlir::failed(stage.require(DEBUG_TYPE, f, {}, {StageFact::Fused}, "after tessel-autodiff and before tessel-fuse")))
      return signalPassFailure();
    llvm::SmallVector<MatmulOp> matmuls(f.getBody().front().getOps<MatmulOp>());
    for (MatmulOp mm : matmuls)
      if (!fuseBiasGradient(mm)) fuseForward(mm);
  }

  /// Step 1. The bias gradient only reads op(lhs) and writes its own buffer: it leaves the
  /// product alone, so the partial-sum rule does not concern it (a weight gradient under
  /// data parallelism is a partial sum over the batch, and so is its bias gradient: each is
  /// reduced by its own collective, as in the unfused program).
  bool fuseBiasGradient(MatmulOp mm) {
    auto lhs = typeOf(mm.getLhs()), rhs = typeOf(mm.getRhs());
    if (!mm.getTransposeLhs() || lhs.getRank() != 2 || rhs.getRank() != 2 || !lhs.getElementType().isF32())
      return false;
    Value dy = root(mm.getLhs());
    for (Operation* user : dy.getUsers()) {
      auto rs = mlir::dyn_cast<ReduceSumOp>(user);
      if (!rs || rs->getBlock() != mm->getBlock()) continue;
      auto in = typeOf(rs.getInput());
      auto out = typeOf(rs.getResult());
      llvm::SmallVector<int64_t> dims(rs.getDims());
      llvm::sort(dims);
      bool allButLast = static_cast<int64_t>(dims.size()) == in.getRank() - 1 &&
                        llvm::all_of(llvm::enumerate(dims), [](auto d) { return d.value() == static_cast<int64_t>(d.index()); });
      if (!allButLast || in.getShape().back() != lhs.getDimSize(1) || out.getRank() != 1 ||
          !out.getElementType().isF32())
        continue;
      Operation* anchor = mm->isBeforeInBlock(rs) ? rs.getOperation() : mm.getOperation();
      if (!usersFollow(mm.getResult(), anchor, {}) || !usersFollow(rs.getResult(), anchor, {})) continue;
      mlir::OpBuilder b(anchor);
      auto fused = MatmulEpilogueOp::create(b, mm.getLoc(), mlir::TypeRange{mm.getType(), rs.getType()},
                                            mm.getLhs(), mm.getRhs(), Value(), Value(), mm.getTransposeLhs(),
                                            mm.getTransposeRhs(), false, false, true);
      copyPipelineTags(mm, fused);
      mm.getResult().replaceAllUsesWith(fused.getResult());
      rs.getResult().replaceAllUsesWith(fused.getBiasGradientResult());
      rs.erase();
      mm.erase();
      return true;
    }
    return false;
  }

  /// Steps 2 to 4.
  void fuseForward(MatmulOp mm) {
    Value product = mm.getResult();
    auto type = typeOf(product);
    if (pendingPartialSum(product)) return;  // THE PARTIAL-SUM RULE: never fuse into it.
    const int64_t n = type.getShape().back();
    Value cur = product, bias, residual, pre;
    bool gelu = false;
    llvm::SmallVector<Operation*> fusedOps;  // after the matmul, in order
    if (AddOp add = soleUser<AddOp>(cur)) {
      Value b = other(add, cur);
      if (b && typeOf(b).getRank() == 1 && typeOf(b).getDimSize(0) == n &&
          typeOf(b).getElementType() == type.getElementType() && add.getType() == type) {
        bias = b;
        fusedOps.push_back(add);
        cur = add.getResult();
      }
    }
    // GELU: its input's users are one gelu and any gelu_grads of it (reading it as x, not
    // dy). bf16 fuses the bias alone: the epilogue rounds C once where the unfused program
    // rounds every intermediate (GemmEpilogue.h), which is the same only for one add.
    const bool f32 = type.getElementType().isF32();
    GeluOp geluOp;
    llvm::SmallVector<Operation*> grads;
    bool otherUser = false;
    for (Operation* u : cur.getUsers()) {
      auto g = mlir::dyn_cast<GeluOp>(u);
      auto gg = mlir::dyn_cast<GeluGradOp>(u);
      if (g && !geluOp && g->getBlock() == mm->getBlock())
        geluOp = g;
      else if (gg && gg.getInput() == cur && gg.getGrad() != cur)
        grads.push_back(gg);
      else
        otherUser = true;
    }
    if (!f32) {
      // bias only (above)
    } else if (geluOp && !otherUser && (grads.empty() || n % 8 == 0) && usersFollow(cur, geluOp, {geluOp})) {
      gelu = true;
      if (!grads.empty()) pre = cur;
      fusedOps.push_back(geluOp);
      cur = geluOp.getResult();
    } else if (AddOp add = soleUser<AddOp>(cur)) {
      // A residual (only without GELU: cuBLASLt adds C before the activation) that does not
      // share the GEMM's operands' bytes (Program.h: epilogue buffers never overlap A or B).
      Value r = other(add, cur);
      if (r && r.getType() == type && add.getType() == type && root(r) != root(mm.getLhs()) &&
          root(r) != root(mm.getRhs())) {
        residual = r;
        fusedOps.push_back(add);
        cur = add.getResult();
      }
    }
    if (fusedOps.empty()) return;
    Operation* anchor = fusedOps.back();
    llvm::SmallVector<mlir::Type> results{type};
    if (pre) results.push_back(type);
    mlir::OpBuilder b(anchor);
    auto fused = MatmulEpilogueOp::create(b, mm.getLoc(), results, mm.getLhs(), mm.getRhs(), bias, residual,
                                          mm.getTransposeLhs(), mm.getTransposeRhs(), gelu, static_cast<bool>(pre),
                                          false);
    copyPipelineTags(mm, fused);
    cur.replaceAllUsesWith(fused.getResult());
    if (pre) pre.replaceAllUsesWith(fused.getPreActivationResult());
    for (Operation* op : llvm::reverse(fusedOps)) op->erase();
    mm.erase();
  }
};

}  // namespace
}  // namespace tessel
