//===- ActivationCheckpointing.cpp - recompute activations in backward (remat) -===//
//
// Activation checkpointing runs last, after tessel-autodiff and tessel-fuse, on the training
// functions (@train_step, and @accumulate_step with gradient accumulation), and clones
// forward ops next to their first backward use, the usual way of rematerialising in a
// compiler: the backward pass then reads the clones, so the originals die as soon as the
// forward pass is done with them. After autodiff, because autodiff and the VJP rules then
// know nothing of recomputation and the pass sees exactly which forward values the backward
// pass reads (the saved activations); after fusion, because it clones whole kernels: a
// fused region is recomputed as the same region, so every recomputed value comes from the
// same generated kernel as the original (the host compiler may contract a*b+c into an FMA
// differently in two kernels that compute one value, so recomputing an op inside another
// fused kernel would not be bitwise equal).
//
// Algorithm (see passes/Passes.td):
//   1. The forward ops of a function are the ops the loss depends on (a reverse sweep from
//      the returned loss); every other op is backward (or optimizer) work.
//   2. Each forward op belongs to the module of its location's NameLoc path
//      ("blocks.0.attn.qkv"; a fused kernel has its first op's); its checkpointed unit is
//      the shortest dotted prefix of that path that a `modules` glob matches ("blocks.0"
//      for "blocks.*").
//   3. Regions to recompute, per unit: full mode, every forward op of the unit except
//      tessel.param and the ops that read parameters only (a parameter's bf16 cast, the
//      gather of a stored shard: kept, not recomputed); selective mode (Megatron-LM's), the core attention of the unit: each
//      causal softmax (or fused kernel holding one) with the ops between it and the matmul
//      on either side (q k^T, the scale, the softmax, the product with v); a fused
//      causal_attention or grouped_attention saves no probabilities, so there is nothing to
//      recompute in it.
//   4. A region's internal values are results that no forward op outside it reads (the
//      block's output, read by the next block, is kept: it is the next block's input).
//      Those internal values that a backward op reads are recomputed: the region's ops
//      they need are cloned, in forward order, right before the first backward op that
//      reads any of them, and every backward use is redirected to the clone.
//
// The clones are the same ops and kernels on the same operands, so they compute every value
// with the same floating-point operations in the same order: the losses and parameters are
// bitwise those of the run without checkpointing. A value computed by a forward kernel
// that also computes the next unit's values (the residual add that ends a block is fused
// with the next block's first layer norm) is that unit's output, and is kept. The clones
// stand where the backward pass first needs them and after any collective start already
// placed there, so a later prefetch of a sharded unit's parameters can be hoisted above the
// recomputation and still overlap it.
//
// Recomputation never communicates: the result of a collective (tensor parallelism's
// all-reduce after a row-parallel projection, sequence parallelism's all-gather) is kept,
// and the clones read it, as Megatron-LM's full recomputation would otherwise repeat the
// all-reduce. A second run finds no backward use of an internal value (they all read
// clones) and changes nothing.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/Location.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/Glob.h"
#include "compiler/PlanSite.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"


#define DEBUG_TYPE "tessel-activation-checkpointing"

namespace tessel {
#define GEN_PASS_DEF_ACTIVATIONCHECKPOINTING
#include "passes/Passes.h.inc"

namespace {

using mlir::Operation;
using mlir::Value;

/// Ops that move data between ranks: recomputing one would repeat the communication (and
/// change every rank's collective schedule), so their results are kept instead.
bool isCollective(Operation* op) {
  return mlir::isa<AllReduceOp, AllReduceStartOp, AllReduceWaitOp, AllGatherOp, AllGatherStartOp,
                   AllGatherWaitOp, ReduceScatterOp, ReduceScatterStartOp, ReduceScatterWaitOp,
                   AllToAllOp, AllToAllStartOp, AllToAllWaitOp, ReshardOp, SendOp, RecvOp>(op);
}

/// A causal softmax, or a fused kernel that computes one (tessel-fuse puts the scale before
/// it in the same kernel).
bool isCausalSoftmax(Operation* op) {
  if (auto softmax = mlir::dyn_cast<SoftmaxOp>(op)) return softmax.getCausal();
  if (!mlir::isa<FusedOp>(op)) return false;
  bool found = false;
  op->walk([&](SoftmaxOp s) { found |= s.getCausal(); });
  return found && op->getNumOperands() >= 1;
}

/// A set of forward ops recomputed together, in block order, and the unit they belong to.
struct Region {
  std::string unit;
  llvm::SmallVector<Operation*> ops;
};

struct ActivationCheckpointingPass : impl::ActivationCheckpointingBase<ActivationCheckpointingPass> {
  using ActivationCheckpointingBase::ActivationCheckpointingBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    // Stage: after autodiff (there is a backward pass to feed), last (after tessel-fuse,
    // which would otherwise put recomputed ops in other kernels than the originals).
    if (mlir::failed(PipelineStage(module, "train_step")
                         .require(DEBUG_TYPE, module, {StageFact::TrainStep}, {},
                                  "after tessel-autodiff, last (after tessel-fuse)")))
      return signalPassFailure();
    site_ = planSiteLocation(&getContext(), planSite, module.getLoc());
    if (mode != "full" && mode != "selective") {
      mlir::emitError(site_) << DEBUG_TYPE << ": mode '" << mode << "' must be full or selective";
      return signalPassFailure();
    }
    if (modules.empty()) return;
    for (auto f : module.getOps<mlir::func::FuncOp>()) {
      if (f.isExternal()) continue;
      std::optional<unsigned> loss = findOutput(f, "loss");
      if (!loss) continue;
      if (mlir::failed(runOn(f, *loss))) return signalPassFailure();
    }
  }

  /// The checkpointed unit of `op`: the shortest dotted prefix of its module path that a
  /// glob matches, or "".
  std::string unitOf(Operation* op) const {
    llvm::StringRef path = modulePath(op->getLoc());
    for (size_t end = 0; end != llvm::StringRef::npos && !path.empty();) {
      end = path.find('.', end + 1);
      llvm::StringRef prefix = path.substr(0, end);
      for (const std::string& glob : modules)
        if (globMatches(glob, std::string_view(prefix.data(), prefix.size()))) return prefix.str();
    }
    return "";
  }

  mlir::LogicalResult runOn(mlir::func::FuncOp f, unsigned lossIndex) {
    mlir::Block& body = f.getBody().front();
    // 1. Forward ops: those the loss depends on.
    llvm::DenseSet<Operation*> forward = opsResultDependsOn(f, lossIndex);
    // 2-3. Regions, in forward order (full mode: one per unit).
    llvm::SmallVector<Region> regions;
    llvm::StringMap<size_t> regionOfUnit;
    bool anyUnit = false;
    // Ops that read parameters only (a parameter's bf16 cast, the gather of a stored shard)
    // belong to no region: their values are the same in backward, so they are kept, not
    // recomputed (FSDP's backward gathers read the cast, and a region reaching them would
    // be recomputed before its forward gathers complete).
    llvm::DenseSet<Operation*> fromParameters;
    auto readsParametersOnly = [&](Operation& op) {
      return op.getNumOperands() > 0 && llvm::all_of(op.getOperands(), [&](mlir::Value v) {
               Operation* def = v.getDefiningOp();
               return def && (mlir::isa<ParamOp>(def) || fromParameters.contains(def));
             });
    };
    for (Operation& op : body.without_terminator()) {
      if (!forward.contains(&op) || mlir::isa<ParamOp>(op)) continue;
      if (readsParametersOnly(op)) {
        fromParameters.insert(&op);
        continue;
      }
      std::string unit = unitOf(&op);
      if (unit.empty()) continue;
      anyUnit = true;
      if (mode == "full") {
        auto [it, fresh] = regionOfUnit.try_emplace(unit, regions.size());
        if (fresh) regions.push_back(Region{unit, {}});
        regions[it->second].ops.push_back(&op);
      } else if (mlir::isa<CausalAttentionOp, GroupedAttentionOp>(op)) {
        // Fused attention is its own core attention: its backward recomputes the
        // probabilities from q and k, so nothing inside it is saved and nothing is recomputed.
        regions.push_back(Region{unit, {&op}});
      } else if (isCausalSoftmax(&op)) {
        regions.push_back(coreAttention(&op, unit, forward));
      }
    }
    if (!anyUnit) {
      mlir::emitError(site_) << DEBUG_TYPE << ": no op of @" << f.getSymName()
                             << " belongs to a module that the checkpoint globs match ("
                             << llvm::join(modules, ", ") << ")";
      return mlir::failure();
    }
    if (mode == "selective" && regions.empty()) {
      mlir::emitError(site_) << DEBUG_TYPE << ": selective checkpointing found no core attention "
                             << "(a causal softmax) in the checkpointed modules of @" << f.getSymName();
      return mlir::failure();
    }
    // 4. Recompute. Regions do not interact: a clone reads only its own region's clones
    //    and values that forward ops outside the region read too, never another region's
    //    internal values, so no clone is another region's insertion point.
    for (Region& r : regions)
      if (mlir::failed(recompute(f, r, forward))) return mlir::failure();
    return mlir::success();
  }

  /// The core attention around `softmax` (a causal softmax or a fused kernel holding one):
  /// up through single-operand ops from its first operand to the q k^T matmul, down through
  /// the forward users to the product with v (both included).
  Region coreAttention(Operation* softmax, const std::string& unit,
                       const llvm::DenseSet<Operation*>& forward) const {
    Region r{unit, {}};
    llvm::SmallVector<Operation*> up;
    for (Operation* def = softmax->getOperand(0).getDefiningOp();
         def && forward.contains(def) && def->getNumResults() == 1;
         def = def->getNumOperands() == 1 ? def->getOperand(0).getDefiningOp() : nullptr) {
      up.push_back(def);
      if (mlir::isa<MatmulOp>(def)) break;
    }
    r.ops.assign(up.rbegin(), up.rend());
    r.ops.push_back(softmax);
    for (Operation* cur = softmax; cur->getNumResults() == 1;) {
      llvm::SmallVector<Operation*> users;
      for (Operation* u : cur->getResult(0).getUsers())
        if (forward.contains(u)) users.push_back(u);
      if (users.size() != 1) break;
      cur = users.front();
      r.ops.push_back(cur);
      if (mlir::isa<MatmulOp>(cur)) break;
    }
    return r;
  }

  mlir::LogicalResult recompute(mlir::func::FuncOp f, Region& region,
                                const llvm::DenseSet<Operation*>& forward) {
    llvm::SmallPtrSet<Operation*, 32> members(region.ops.begin(), region.ops.end());
    auto isBackward = [&](Operation* user) { return !forward.contains(user); };
    // Internal values: read by no forward op outside the region (nor returned).
    auto internal = [&](Value v) {
      return llvm::all_of(v.getUsers(), [&](Operation* u) {
        return members.contains(u) || (isBackward(u) && !mlir::isa<mlir::func::ReturnOp>(u));
      });
    };
    llvm::SmallVector<Value> saved;  // internal values the backward pass reads
    for (Operation* op : region.ops)
      for (Value r : op->getResults())
        if (!isCollective(op) && internal(r) && llvm::any_of(r.getUsers(), isBackward)) saved.push_back(r);
    if (saved.empty()) return mlir::success();

    // The ops the saved values need, through internal values only (a value the region
    // shares with later forward ops is kept, so its original is read) and never through a
    // collective (its result is kept).
    llvm::SmallPtrSet<Operation*, 32> cloned;
    llvm::SmallVector<Operation*> work;
    for (Value v : saved) work.push_back(v.getDefiningOp());
    while (!work.empty()) {
      Operation* op = work.pop_back_val();
      if (!cloned.insert(op).second) continue;
      for (Value v : op->getOperands())
        if (Operation* def = v.getDefiningOp();
            def && members.contains(def) && !isCollective(def) && internal(v))
          work.push_back(def);
    }

    // Insert right before the first backward op that reads a saved value.
    Operation* at = nullptr;
    for (Value v : saved)
      for (Operation* u : v.getUsers())
        if (isBackward(u) && (!at || u->isBeforeInBlock(at))) at = u;
    mlir::OpBuilder b(at);
    mlir::IRMapping map;
    llvm::SmallPtrSet<Operation*, 32> clones;
    for (Operation* op : region.ops) {
      if (!cloned.contains(op)) continue;
      for (Value v : op->getOperands())
        if (Operation* def = v.getDefiningOp(); def && !map.contains(v) && !def->isBeforeInBlock(at))
          return op->emitError() << DEBUG_TYPE << ": operand of '" << op->getName()
                                 << "' is defined after its recomputation point";
      clones.insert(b.clone(*op, map));
    }
    for (Value v : saved)
      v.replaceUsesWithIf(map.lookup(v), [&](mlir::OpOperand& use) {
        return isBackward(use.getOwner()) && !clones.contains(use.getOwner());
      });
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": @" << f.getSymName() << " recomputes " << clones.size()
                            << " ops of '" << region.unit << "' before " << *at << "\n");
    return mlir::success();
  }

  mlir::LocationAttr site_;  // where the plan asks for checkpointing (errors point there)
};

}  // namespace
}  // namespace tessel
