//===- PropagateSharding.cpp - a sharding for every value ----------------------===//
//
// Algorithm (see passes/Passes.td):
//   1. Forward walk in program order. Each op's operand shardings are its producers'
//      (arguments replicated, parameters as the plan says); a parameter the plan left free
//      takes what its first use's rule asks for and is fixed from then on; the op's rule
//      (compiler/ShardingRules.h) gives its results' shardings.
//   2. Backward walk: where a user asks an elementwise op's result for splits it lacks
//      (and, under sequence parallelism, every layer or RMS norm's input for its rows split
//      over the axis), that becomes a hint for the producer.
//   3. With hints, the forward walk again; its shardings are recorded as tessel.shardings.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "tessel-propagate-sharding"

namespace tessel {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

/// The norms whose inputs sequence parallelism splits by rows: layer_norm and rms_norm.
bool isNorm(mlir::Operation& op) { return mlir::isa<LayerNormOp, RmsNormOp>(op); }

struct PropagateShardingPass : impl::PropagateShardingBase<PropagateShardingPass> {
  using PropagateShardingBase::PropagateShardingBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto target = shardingTarget(module, forwardName, DEBUG_TYPE, {},
                                 {StageFact::TrainStep, StageFact::ShardingsPropagated,
                                   StageFact::Partitioned},
                                 "once, after the plan's seeds and before "
                                  "tessel-insert-reshards");
    if (mlir::failed(target)) return signalPassFailure();
    mlir::func::FuncOp f = target->function;
    const GridInfo* grid = &target->grid;
    int16_t sequence = -1;
    if (!sequenceAxis.empty()) {
      sequence = grid->axis(sequenceAxis);
      if (sequence < 0) {
        module.emitError() << DEBUG_TYPE << ": sequence-axis '" << sequenceAxis
                           << "' is not an axis of @mesh";
        return signalPassFailure();
      }
    }
    if (sequence >= 0)
      for (mlir::Operation& ln : f.getBody().front()) {
        if (!isNorm(ln)) continue;
        auto type = mlir::cast<mlir::RankedTensorType>(ln.getOperand(0).getType());
        int64_t rows = type.getRank() >= 3 ? type.getShape()[1] : 0;
        if (rows % grid->sizes[sequence] != 0) {
          ln.emitError() << "sequence parallelism splits the sequence (T = " << rows << ") of this "
                         << (mlir::isa<RmsNormOp>(ln) ? "RMS" : "layer") << " norm's input over "
                         << sequenceAxis << "=" << grid->sizes[sequence]
                         << ", which does not divide it (padding the sequence would put padded rows into "
                            "attention and into the loss's mean)";
          return signalPassFailure();
        }
      }
    propagate(f, grid->ref, sequence);
  }

  using Shardings = llvm::DenseMap<Value, TensorSharding>;

  /// `v`'s sharding in `current`, else its defining op's (replicated for an argument).
  static TensorSharding lookup(const Shardings& current, Value v) {
    auto it = current.find(v);
    return it != current.end() ? it->second : shardingOf(v);
  }

  /// The users' hint for `op`'s one result, or null.
  static const TensorSharding* hintFor(const Shardings& hints, mlir::Operation& op) {
    if (op.getNumResults() != 1) return nullptr;
    auto it = hints.find(op.getResult(0));
    return it != hints.end() ? &it->second : nullptr;
  }

  /// One forward walk: every value's sharding given the users' hints. Free parameters adopt
  /// what their first use asks for.
  Shardings walk(mlir::func::FuncOp f, const Shardings& hints) {
    auto shardings = TesselDialect::ShardingsAttrHelper(&getContext());
    Shardings current;
    llvm::DenseSet<Value> free;  // parameters no plan entry and no use has fixed yet
    auto get = [&](Value v) { return lookup(current, v); };
    for (mlir::Operation& op : f.getBody().front()) {
      if (auto p = mlir::dyn_cast<ParamOp>(op)) {
        if (!shardings.isAttrPresent(p)) free.insert(p.getResult());
        continue;
      }
      llvm::SmallVector<TensorSharding> in;
      for (Value v : op.getOperands()) in.push_back(get(v));
      const TensorSharding* hint = hintFor(hints, op);
      OpSharding rule = shardOp(&op, in, hint);
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
          changed = true;
        }
        if (!changed) break;
        rule = shardOp(&op, in, hint);
      }
      for (auto [r, s] : llvm::zip(op.getResults(), rule.results)) current[r] = s;
    }
    return current;
  }

  /// The backward walk: the splits each value's users ask for beyond what it has, for the
  /// values an elementwise op produces (they can take a split for free) and the inputs of
  /// layer and RMS norms under sequence parallelism (the seed).
  Shardings hintsFrom(mlir::func::FuncOp f, const Shardings& current, int16_t sequenceAxis) {
    Shardings hints;
    auto get = [&](Value v) { return lookup(current, v); };
    for (mlir::Operation& op : llvm::reverse(f.getBody().front())) {
      if (mlir::isa<ParamOp>(op)) continue;
      if (isNorm(op) && sequenceAxis >= 0) {
        TensorSharding s = get(op.getOperand(0)).withoutPartial();
        if (s.dims.size() >= 3 && !s.usesAxis(sequenceAxis)) {
          s.dims[1] = DimSharding{{sequenceAxis}, 1};
          hints[op.getOperand(0)] = s;
        }
      }
      llvm::SmallVector<TensorSharding> in;
      for (Value v : op.getOperands()) in.push_back(get(v));
      const TensorSharding* hint = hintFor(hints, op);
      OpSharding rule = shardOp(&op, in, hint);
      for (auto [i, v] : llvm::enumerate(op.getOperands())) {
        mlir::Operation* def = v.getDefiningOp();
        const bool elementwise =
            def && (mlir::isa<AddOp, SubOp, MulOp, ScaleOp, GeluOp, ReluOp, CastOp>(def) ||
                    mlir::isa<SiluOp>(def));
        if (!elementwise) continue;
        TensorSharding want = rule.operands[i].withoutPartial();
        TensorSharding have = in[i];
        bool adds = false;
        for (size_t d = 0; d < want.dims.size() && d < have.dims.size(); ++d)
          adds |= want.dims[d].split() && !have.dims[d].split();
        if (adds && !hints.count(v)) hints[v] = want;
      }
    }
    return hints;
  }

  void propagate(mlir::func::FuncOp f, mlir::FlatSymbolRefAttr grid, int16_t sequenceAxis) {
    Shardings current = walk(f, Shardings());
    Shardings hints = hintsFrom(f, current, sequenceAxis);
    if (!hints.empty()) current = walk(f, hints);
    for (mlir::Operation& op : f.getBody().front()) {
      if (op.getNumResults() == 0) continue;
      if (auto p = mlir::dyn_cast<ParamOp>(op)) {
        auto it = current.find(p.getResult());
        if (it != current.end() && !it->second.isReplicated()) setShardings(p, {it->second}, grid);
        continue;
      }
      llvm::SmallVector<TensorSharding> results;
      for (Value r : op.getResults()) results.push_back(current.lookup(r));
      setShardings(&op, results, grid);
    }
  }
};

}  // namespace
}  // namespace tessel
