//===- FullyShard.cpp - FSDP: parameters stored split on dimension 0 -----------===//
//
// Algorithm (see passes/Passes.td):
//   1. For each tessel.param of the forward function (rank >= 1), its compute layout S is
//      what tessel-propagate-sharding gave it (replicated without tensor parallelism); its
//      storage layout S' is S with dimension 0 split over the fully-sharded axis
//      (FSDP2-style: per parameter, no flattening; storageLayout):
//      - dimension 0 not split in S: split over fsdp alone. A first dimension G that fsdp
//        (F ranks) does not divide is stored padded to F x ceil(G / F), the padding at the
//        end (tessel-partition records it, the runtime starts it at zero);
//      - dimension 0 split in S over tensor-parallel axes (column-parallel weights and
//        their biases, the vocabulary-parallel embedding): split over those axes then fsdp,
//        listed [tp, fsdp] in #tessel.sharding (first outermost): tp major, fsdp minor.
//        That is FSDP2 over a TP DTensor (torchtitan's mesh [dp_shard, tp]: FSDP2 shards
//        the TP-local tensor again, its _StridedShard placement): each tensor-parallel
//        rank's block is split over fsdp, so the gather over fsdp alone rebuilds exactly
//        the tp-local compute block (with fsdp major, a tp rank's rows would be scattered
//        over every fsdp group: no single gather makes them). Blocks (the fused q, k, v
//        weight) are kept: each rank holds its fsdp part of its tp part of every block.
//        Padding a dimension split over two axes is refused (tp x fsdp must divide each
//        block).
//   2. The parameter takes S', and its users read `tessel.reshard %p from S' to S`, placed
//      right before the first user, so tessel-reshard-to-collectives makes it an all-gather
//      over fsdp along dimension 0 (trimming the padding of an uneven one). Autodiff
//      transposes that gather into a reduce-scatter (padding the gradient with zeros): the
//      per-rank gradients of the split batch are summed into each rank's shard (ZeRO-3's
//      gradient reduce-scatter; tessel-gradient-all-reduce turns the sum into the mean).
//   3. Units (`units` globs, compiler/FsdpUnits.h): each sharded parameter is tagged with
//      its unit, and the gathers of a unit move together, in parameter order, right
//      before the earliest of them (the unit's first use), so the unit is gathered as one
//      group; a parameter op below that point moves up with its gather.
//   The optimizer lays its state out like the parameter, so each rank updates its shard.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FsdpUnits.h"
#include "compiler/FunctionAttrs.h"
#include "compiler/Glob.h"
#include "compiler/PlanSite.h"
#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "tessel-fully-shard"

namespace tessel {
#define GEN_PASS_DEF_FULLYSHARD
#include "passes/Passes.h.inc"

namespace {

/// The layout parameter `p` (of compute layout `compute`) is stored in when fully sharded
/// over grid axis `fsdp` (step 1 of the algorithm above): `compute` with dimension 0 split
/// over fsdp, innermost. Emits the error at `p` and fails when that layout cannot be: `p`
/// already split over fsdp, or a dimension 0 split over tensor-parallel axes whose blocks
/// tp x fsdp does not divide.
mlir::FailureOr<TensorSharding> storageLayout(ParamOp p, const TensorSharding& compute, int16_t fsdp,
                                              const GridInfo& grid) {
  const llvm::StringRef axis = grid.names[fsdp];
  if (compute.usesAxis(fsdp))
    return p.emitError() << "parameter '" << p.getName() << "' is already split over " << axis << " ("
                         << describeSharding(compute, grid.names)
                         << "); tessel-fully-shard runs once, on parameters laid out for compute";
  TensorSharding storage = compute;
  DimSharding& dim0 = storage.dims[0];
  if (dim0.split()) {
    const int64_t rows = mlir::cast<mlir::RankedTensorType>(p.getType()).getShape()[0];
    const int64_t parts = dim0.blocks * grid.groupSize(dim0.axes) * grid.sizes[fsdp];
    if (rows % parts != 0) {
      auto diag = p.emitError() << "parameter '" << p.getName() << "': dimension 0 has " << rows
                                << " rows, already split " << describeSharding(compute, grid.names)
                                << "; fully sharding it over " << axis << "=" << grid.sizes[fsdp]
                                << " as well needs " << parts;
      if (dim0.blocks > 1) diag << " (" << dim0.blocks << " blocks x " << parts / dim0.blocks << " ranks)";
      return diag << " to divide it (a dimension split over two axes is not padded): choose degrees "
                     "whose product divides it";
    }
  }
  dim0.axes.push_back(fsdp);  // innermost: tp major, fsdp minor (see the top of the file)
  dim0.padding = 0;           // tessel-partition derives it from the global size
  return storage;
}

/// Checks that every unit glob matches a module (a proper dotted prefix of a parameter
/// name), then tags each gathered parameter with its unit and moves the gathers of each
/// unit together right before the earliest of them. `gathers`: (parameter, its gather) in
/// parameter order. Errors at `site`.
mlir::LogicalResult groupGathersByUnit(llvm::ArrayRef<std::pair<ParamOp, ReshardOp>> gathers,
                                       llvm::ArrayRef<ParamOp> params, const std::vector<std::string>& globs,
                                       mlir::Location site) {
  for (const std::string& glob : globs) {
    bool matched = false;
    for (ParamOp p : params) {
      llvm::StringRef name = p.getName();
      for (size_t dot = name.find('.'); !matched && dot != llvm::StringRef::npos; dot = name.find('.', dot + 1))
        matched = globMatches(glob, std::string_view(name.data(), dot));
    }
    if (!matched)
      return mlir::emitError(site) << DEBUG_TYPE << ": the unit glob '" << glob
                                   << "' matches no module that holds a parameter";
  }
  llvm::StringMap<mlir::Operation*> first;  // unit -> its earliest gather
  std::vector<std::string> unitOf;
  for (auto [p, gather] : gathers) {
    llvm::StringRef name = p.getName();
    unitOf.push_back(fsdpUnitOf(std::string_view(name.data(), name.size()), globs));
    p->setAttr(kFsdpUnitAttr, mlir::StringAttr::get(p.getContext(), unitOf.back()));
    if (!gather) continue;
    auto [it, fresh] = first.try_emplace(unitOf.back(), gather);
    if (!fresh && gather->isBeforeInBlock(it->second)) it->second = gather;
  }
  // In parameter order, each gather goes right after the previous one of its unit; the
  // earliest stays, and the unit's later gathers follow it.
  for (auto [i, pg] : llvm::enumerate(gathers)) {
    auto [p, gather] = pg;
    if (!gather) continue;
    mlir::Operation*& at = first[unitOf[i]];
    if (at == gather.getOperation()) {
      at = gather->getNextNode();
      continue;
    }
    gather->moveBefore(at);
    if (gather->isBeforeInBlock(p)) p->moveBefore(gather);
  }
  return mlir::success();
}

struct FullyShardPass : impl::FullyShardBase<FullyShardPass> {
  using FullyShardBase::FullyShardBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto target = shardingTarget(module, forwardName, DEBUG_TYPE, {StageFact::ShardingsPropagated},
                                 {StageFact::Partitioned, StageFact::TrainStep},
                                 "once, after tessel-insert-reshards and before tessel-partition");
    if (mlir::failed(target)) return signalPassFailure();
    const GridInfo& grid = target->grid;
    int16_t shardAxis = grid.axis(axis);
    if (shardAxis < 0) {
      module.emitError() << DEBUG_TYPE << ": axis '" << axis << "' is not an axis of @mesh";
      return signalPassFailure();
    }
    llvm::SmallVector<std::pair<ParamOp, ReshardOp>> gathers;  // 3. every sharded parameter's
    llvm::SmallVector<ParamOp> params(target->function.getBody().getOps<ParamOp>());
    for (auto p : llvm::make_early_inc_range(target->function.getBody().getOps<ParamOp>())) {
      auto type = mlir::cast<mlir::RankedTensorType>(p.getType());
      if (type.getRank() == 0) continue;  // a scalar stays replicated; its gradient is averaged
      TensorSharding compute = shardingOf(p.getResult());
      if (compute.dims.empty()) compute = TensorSharding::replicated(type.getRank());
      mlir::FailureOr<TensorSharding> stored = storageLayout(p, compute, shardAxis, grid);
      if (mlir::failed(stored)) return signalPassFailure();
      const TensorSharding& storage = *stored;
      mlir::Operation* first = nullptr;
      for (mlir::Operation* user : p->getUsers())
        if (!first || user->isBeforeInBlock(first)) first = user;
      setShardings(p, {storage}, grid.ref);
      if (!first) {  // an unused parameter: stored sharded, never gathered
        gathers.push_back({p, ReshardOp()});
        continue;
      }
      mlir::OpBuilder b(first);
      auto gather = ReshardOp::create(b, p.getLoc(), type, p.getResult(),
                                      storage.toAttr(&getContext(), grid.ref),
                                      compute.toAttr(&getContext(), grid.ref));
      setShardings(gather, {compute}, grid.ref);
      p.getResult().replaceAllUsesExcept(gather.getResult(), gather);
      gathers.push_back({p, gather});
    }
    if (units.empty()) return;
    std::vector<std::string> globs(units.begin(), units.end());
    if (mlir::failed(groupGathersByUnit(gathers, params, globs,
                                        planSiteLocation(&getContext(), planSite, module.getLoc()))))
      signalPassFailure();
  }
};

}  // namespace
}  // namespace tessel
