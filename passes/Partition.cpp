//===- Partition.cpp - global shapes become per-rank local shapes --------------===//
//
// Algorithm (see passes/Passes.td):
//   1. Local types: each result's split dimensions are divided by the size of their axes;
//      attention keeps its share of the heads (causal_attention, grouped_attention and rope:
//      heads / P, each rank whole heads). A dimension G that its axes (P ranks) do not
//      divide is padded to P x ceil(G / P) (Megatron pads its vocabulary the same way; the
//      padding is recorded in a parameter's #tessel.sharding, and the runtime starts it at
//      zero). Padding is accepted only where it provably stays zero and out of the math:
//      every op that reads or makes a padded dimension must keep zeros zero (matmul, mul,
//      scale, gelu, relu, cast, reduce_sum, the collectives, and add/sub when every addend is
//      padded alike), so padded activations
//      are zero, their gradients are zero, and the padding of a parameter is never updated;
//      the vocabulary's cross-entropy masks its padded logits to -inf
//      (tessel.mask_vocab_padding). A fully sharded parameter's padded first dimension is
//      gathered whole, then trimmed (isTrimmedGather). Anything else (a layer norm or
//      softmax over a padded dimension, a partial gather of one, a blocked dimension) is an
//      error at the op that says why.
//   2. Megatron's f: an operand replicated over an axis that the op's computation is split
//      or partial over is read through one tessel.replicate per (value, axes), placed
//      after the value's definition.
//      A gathered tensor's users must run split over the axes it was gathered over (the
//      batch axes count: fully sharded data parallelism).
//   3. tessel.shardings stays only on split parameters; the function is marked
//      tessel.partitioned; every changed op is re-verified. Reshards keep their two
//      layouts (tessel-reshard-to-collectives turns them into collectives on local shapes).
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/FunctionAttrs.h"
#include "compiler/ShardingRules.h"
#include "compiler/VocabParallel.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"

#include <limits>
#include <map>

#define DEBUG_TYPE "tessel-partition"

namespace tessel {
#define GEN_PASS_DEF_PARTITION
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

struct PartitionPass : impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto target = shardingTarget(module, forwardName, DEBUG_TYPE, {StageFact::ShardingsPropagated},
                                 {StageFact::Partitioned, StageFact::TrainStep},
                                 "once, after tessel-insert-reshards and before "
                                  "tessel-reshard-to-collectives");
    if (mlir::failed(target)) return signalPassFailure();
    mlir::func::FuncOp f = target->function;
    const GridInfo* grid = &target->grid;
    grid_ = *grid;
    mlir::Block& body = f.getBody().front();
    // Read every sharding before any type changes.
    llvm::DenseMap<Value, TensorSharding> sharding;
    for (mlir::Operation& op : body)
      for (Value r : op.getResults()) sharding[r] = shardingOf(r);
    auto of = [&](Value v) {
      auto it = sharding.find(v);
      return it != sharding.end() ? it->second : shardingOf(v);
    };
    if (mlir::failed(checkGatheredUses(body)) || mlir::failed(localTypes(body, of)) ||
        mlir::failed(checkPaddingStaysZero(body)) || mlir::failed(replicateInputs(body, of)))
      return signalPassFailure();
    vocabParallel(body, of);
    auto helper = TesselDialect::ShardingsAttrHelper(&getContext());
    for (mlir::Operation& op : body) {
      if (auto p = mlir::dyn_cast<ParamOp>(op); p && !of(p.getResult()).isReplicated()) {
        TensorSharding s = of(p.getResult());
        for (size_t d = 0; d < s.dims.size(); ++d) s.dims[d].padding = paddingOf(p.getResult(), d);
        setShardings(p, {s}, grid_.ref);
        continue;
      }
      helper.removeAttr(&op);
    }
    for (mlir::Operation& op : body.without_terminator())
      if (mlir::failed(mlir::verify(&op))) {
        op.emitError() << DEBUG_TYPE << ": the op does not verify on its local shapes";
        return signalPassFailure();
      }
    auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
    f.setFunctionType(mlir::FunctionType::get(&getContext(), body.getArgumentTypes(),
                                              ret.getOperandTypes()));
    setPartitioned(f);
  }

  template <typename Of>
  mlir::LogicalResult localTypes(mlir::Block& body, Of of) {
    for (mlir::Operation& op : body.without_terminator()) {
      for (Value r : op.getResults()) {
        auto type = mlir::dyn_cast<mlir::RankedTensorType>(r.getType());
        TensorSharding s = of(r);
        if (!type || s.dims.empty()) continue;
        llvm::SmallVector<int64_t> shape(type.getShape());
        for (size_t d = 0; d < shape.size(); ++d) {
          const DimSharding& dim = s.dims[d];
          if (!dim.split()) continue;
          int64_t n = grid_.groupSize(dim.axes);
          if (shape[d] % (n * dim.blocks) != 0) {
            if (dim.blocks > 1) {
              auto diag = op.emitError();
              if (auto p = mlir::dyn_cast<ParamOp>(op))
                diag << "parameter '" << p.getName() << "': dimension " << d << " has ";
              else
                diag << "dimension " << d << " of this result has ";
              return diag << shape[d] << " elements in " << dim.blocks
                          << " blocks, not divisible by the " << n << " ranks it is split over "
                          << describeSharding(s, grid_.names)
                          << "; a block (a head's queries, keys or values) cannot be padded, "
                             "since one rank must hold each head whole";
            }
            int64_t local = (shape[d] + n - 1) / n;
            padded_[r].push_back({static_cast<int64_t>(d), local * n - shape[d]});
            shape[d] = local;
            continue;
          }
          shape[d] /= n;
        }
        r.setType(mlir::RankedTensorType::get(shape, type.getElementType()));
      }
      if (auto attn = mlir::dyn_cast<CausalAttentionOp>(op)) {
        int64_t n = grid_.groupSize(of(attn.getQkv()).dims[2].axes);
        attn.setNumHeads(attn.getNumHeads() / n);
      }
      if (mlir::failed(localHeads(op, of))) return mlir::failure();
    }
    return mlir::success();
  }

  /// rope and grouped_attention keep their share of the heads: the channel dimension of
  /// their operands is split in whole heads (compiler/ShardingRules.h), so each rank holds
  /// heads / P consecutive heads of each. P must divide every head count it splits.
  template <typename Of>
  mlir::LogicalResult localHeads(mlir::Operation& op, Of of) {
    auto share = [&](Value v, int64_t heads, const char* what) -> mlir::FailureOr<int64_t> {
      int64_t n = grid_.groupSize(of(v).dims[2].axes);
      if (heads % n == 0) return heads / n;
      op.emitError() << DEBUG_TYPE << ": " << what << " " << heads << " are split over " << n
                     << " ranks " << describeSharding(of(v), grid_.names)
                     << ", which do not divide them (each rank must hold whole heads)";
      return mlir::failure();
    };
    if (auto rope = mlir::dyn_cast<RopeOp>(op)) {
      auto heads = share(rope.getInput(), static_cast<int64_t>(rope.getNumHeads()), "the heads");
      if (mlir::failed(heads)) return mlir::failure();
      rope.setNumHeads(*heads);
    }
    if (auto attn = mlir::dyn_cast<GroupedAttentionOp>(op)) {
      auto heads =
          share(attn.getQ(), static_cast<int64_t>(attn.getNumHeads()), "the query heads");
      if (mlir::failed(heads)) return mlir::failure();
      auto kvHeads =
          share(attn.getK(), static_cast<int64_t>(attn.getNumKvHeads()), "the key/value heads");
      if (mlir::failed(kvHeads)) return mlir::failure();
      attn.setNumHeads(*heads);
      attn.setNumKvHeads(*kvHeads);
    }
    return mlir::success();
  }

  /// The padding of dimension `d` of `v` (0 when it is not padded).
  int64_t paddingOf(Value v, size_t d) const {
    auto it = padded_.find(v);
    if (it == padded_.end()) return 0;
    for (auto [dim, pad] : it->second)
      if (dim == static_cast<int64_t>(d)) return pad;
    return 0;
  }

  /// Every op that reads or makes a padded value must keep zeros zero, so the padding never
  /// enters the math (see the top of this file).
  mlir::LogicalResult checkPaddingStaysZero(mlir::Block& body) {
    for (mlir::Operation& op : body) {
      Value padded;
      for (Value v : op.getOperands())
        if (padded_.count(v)) padded = v;
      for (Value v : op.getResults())
        if (padded_.count(v)) padded = v;
      if (!padded) continue;
      // The vocabulary's own ops: the embedding reads only the rows ids select, and the
      // cross-entropy masks its padded logits (vocabParallel).
      auto onlyDim = [&](Value v, int64_t dim) {
        return v == padded && padded_.lookup(v).size() == 1 && padded_.lookup(v)[0].first == dim;
      };
      bool vocabulary =
          (mlir::isa<EmbeddingOp>(op) && onlyDim(op.getOperand(0), 0) && !padded_.count(op.getResult(0))) ||
          (mlir::isa<CrossEntropyOp>(op) &&
           onlyDim(op.getOperand(0), mlir::cast<mlir::RankedTensorType>(op.getOperand(0).getType()).getRank() - 1));
      // A sum keeps zeros zero only when every addend is padded too: a broadcast addend
      // (a scalar, a replicated row) would write itself into the padding.
      bool sumOfPadded = mlir::isa<AddOp, SubOp>(op) &&
                         llvm::all_of(op.getOperands(), [&](Value v) { return padded_.count(v) > 0; });
      if (vocabulary || sumOfPadded || isTrimmedGather(op) ||
          mlir::isa<ParamOp, MatmulOp, MulOp, ScaleOp, GeluOp, ReluOp, CastOp, ReduceSumOp,
                    ReplicateOp, AllReduceOp>(op) ||
          mlir::isa<SiluOp>(op))  // silu(0) = 0
        continue;
      auto [dim, pad] = padded_.lookup(padded).front();
      auto type = mlir::cast<mlir::RankedTensorType>(padded.getType());
      int64_t local = type.getShape()[dim];
      int64_t n = grid_.groupSize(shardingOf(padded).dims[dim].axes);
      auto diag = op.emitError()
                  << op.getName() << " reads or makes dimension " << dim << " of "
                  << (local * n - pad) << " elements split over " << n
                  << " ranks, which do not divide it; padding it to " << local * n
                  << " would put the padding into this op's result";
      if (mlir::isa<mlir::func::ReturnOp>(op))
        return diag << " (a padded tensor cannot be a result of the step)";
      if (mlir::isa<ReshardOp>(op))
        return diag << " (gathering a padded dimension would mix the padding into the "
                       "middle of the tensor)";
      if (mlir::isa<AddOp, SubOp>(op))
        return diag << " (an addend that is not padded alike, e.g. broadcast, would fill the "
                       "padding); choose a degree that divides "
                    << (local * n - pad);
      return diag << " (only ops that keep zeros zero accept padding: matmul, add, sub, mul, "
                     "scale, gelu, relu, cast, reduce_sum); choose a degree that divides "
                  << (local * n - pad);
    }
    return mlir::success();
  }

  /// Gather-then-trim (fully sharded data parallelism of an uneven first dimension): a
  /// reshard of a padded value that gathers every padded dimension whole, or leaves it as it
  /// is, keeps the padding out of its result: tessel-reshard-to-collectives's all-gather
  /// drops the trailing padding, and its transpose, the reduce-scatter, pads the gradient
  /// with zeros. (Gathering only some axes of a padded dimension would put the padding in
  /// the middle of the result: refused.)
  bool isTrimmedGather(mlir::Operation& op) const {
    auto r = mlir::dyn_cast<ReshardOp>(op);
    if (!r || !padded_.count(r.getInput())) return false;
    int64_t rank = mlir::cast<mlir::RankedTensorType>(r.getType()).getRank();
    TensorSharding from = TensorSharding::fromAttr(r.getFrom(), rank);
    TensorSharding to = TensorSharding::fromAttr(r.getSharding(), rank);
    return llvm::all_of(padded_.lookup(r.getInput()), [&](std::pair<int64_t, int64_t> dimPad) {
      return !to.dims[dimPad.first].split() || from.dims[dimPad.first] == to.dims[dimPad.first];
    });
  }

  template <typename Of>
  mlir::LogicalResult replicateInputs(mlir::Block& body, Of of) {
    std::map<std::pair<const void*, std::vector<int16_t>>, Value> made;
    for (mlir::Operation& op : llvm::make_early_inc_range(body.without_terminator())) {
      if (mlir::isa<ParamOp, ReplicateOp, AllReduceOp, ReshardOp>(op)) continue;
      llvm::SmallVector<int16_t> computation;
      for (Value v : op.getOperands()) {
        auto axes = of(v).axes();
        computation.append(axes.begin(), axes.end());
      }
      for (Value v : op.getResults()) {
        auto axes = of(v).axes();
        computation.append(axes.begin(), axes.end());
      }
      llvm::sort(computation);
      computation.erase(std::unique(computation.begin(), computation.end()), computation.end());
      for (auto [i, v] : llvm::enumerate(op.getOperands())) {
        auto type = mlir::dyn_cast<mlir::RankedTensorType>(v.getType());
        if (!type || !mlir::isa<mlir::FloatType>(type.getElementType())) continue;
        TensorSharding s = of(v);
        if (mlir::isa<GroupedAttentionOp>(op) && i > 0 && selectedAfterReplicate(v)) continue;
        // A tensor gathered from splits already sums its users' per-rank gradients (the
        // all-gather's transpose is a reduce-scatter), so it needs no f over those axes.
        llvm::SmallVector<int16_t> gathered = gatheredAxes(v);
        std::vector<int16_t> missing;
        for (int16_t a : computation)
          if (!s.usesAxis(a) && !llvm::is_contained(gathered, a)) missing.push_back(a);
        if (missing.empty()) continue;
        Value& r = made[{v.getAsOpaquePointer(), missing}];
        if (!r) {
          mlir::OpBuilder b(&getContext());
          if (mlir::Operation* def = v.getDefiningOp()) b.setInsertionPointAfter(def);
          else b.setInsertionPointToStart(&body);
          r = ReplicateOp::create(b, v.getLoc(), v, grid_.ref, b.getDenseI16ArrayAttr(missing));
        }
        op.setOperand(i, r);
      }
    }
    return mlir::success();
  }

  /// Embeddings and cross-entropies whose vocabulary is split become their vocab-parallel
  /// forms (compiler/VocabParallel.h): each rank looks up the rows it holds, and the loss
  /// comes from row statistics all-reduced over the vocabulary's axes. `of` still holds the
  /// global layouts; types are local already.
  template <typename Of>
  void vocabParallel(mlir::Block& body, Of of) {
    for (mlir::Operation& op : llvm::make_early_inc_range(body.without_terminator())) {
      auto embedding = mlir::dyn_cast<EmbeddingOp>(op);
      auto ce = mlir::dyn_cast<CrossEntropyOp>(op);
      Value table = embedding ? embedding.getTable() : ce ? ce.getLogits() : Value();
      if (!table) continue;
      TensorSharding s = of(table);
      const DimSharding& v = embedding ? s.dims[0] : s.dims.back();
      if (!v.split()) continue;
      auto type = mlir::cast<mlir::RankedTensorType>(table.getType());
      const size_t dim = embedding ? 0 : static_cast<size_t>(type.getRank() - 1);
      int64_t local = type.getShape()[dim];
      int64_t vocab = local * grid_.groupSize(v.axes) - paddingOf(table, dim);  // the true V
      mlir::OpBuilder b(&op);
      auto offset = MeshCoordinateOp::create(b, op.getLoc(), grid_.ref.getValue(), v.axes, local);
      if (ce && paddingOf(table, dim) > 0)  // padded logits take no part
        table = MaskVocabPaddingOp::create(
            b, op.getLoc(), table.getType(), table, offset, b.getI64IntegerAttr(vocab),
            b.getF64FloatAttr(-std::numeric_limits<double>::infinity()));
      if (embedding) {
        auto shard = EmbeddingShardOp::create(b, op.getLoc(), embedding.getType(), table,
                                              embedding.getIndices(), offset, vocab);
        embedding.replaceAllUsesWith(shard.getResult());
      } else {
        Value loss = buildVocabParallelCrossEntropy(b, op.getLoc(), table, ce.getTargets(), offset,
                                                    vocab, VocabGroup{grid_.ref, v.axes});
        ce.replaceAllUsesWith(loss);
      }
      op.erase();
    }
  }

  /// Whether `v` is a key/value head that tessel-tensor-parallel selected per rank (tp > NKV):
  /// a chain of reshape, transpose, broadcast and the selecting embedding from a
  /// tessel.replicate, which already sums the per-rank gradients; a second f would add them
  /// up twice.
  static bool selectedAfterReplicate(Value v) {
    for (mlir::Operation* def = v.getDefiningOp(); def; def = def->getOperand(0).getDefiningOp()) {
      if (mlir::isa<ReplicateOp>(def)) return true;
      if (!mlir::isa<ReshapeOp, TransposeOp, BroadcastOp, EmbeddingOp>(def)) return false;
    }
    return false;
  }

  /// The axes `v` was gathered over: a reshard whose input is split on a dimension over
  /// axes its result is not split over.
  static llvm::SmallVector<int16_t> gatheredAxes(Value v) {
    llvm::SmallVector<int16_t> axes;
    auto r = v.getDefiningOp<ReshardOp>();
    if (!r) return axes;
    int64_t rank = mlir::cast<mlir::RankedTensorType>(v.getType()).getRank();
    TensorSharding from = TensorSharding::fromAttr(r.getFrom(), rank);
    TensorSharding to = TensorSharding::fromAttr(r.getSharding(), rank);
    for (const DimSharding& d : from.dims)
      for (int16_t a : d.axes)
        if (!to.usesAxis(a)) axes.push_back(a);
    return axes;
  }

  /// A gathered tensor (gatheredAxes) read by a computation that is not split over those
  /// axes would have its replicated gradient summed once per rank: refused until the
  /// all-gather can take a replicated gradient. Batch axes (the batch-axes option) are
  /// exempt: the computation is split over them, only not in its shardings.
  mlir::LogicalResult checkGatheredUses(mlir::Block& body) {
    for (auto r : body.getOps<ReshardOp>()) {
      llvm::SmallVector<int16_t> gathered = gatheredAxes(r.getResult());
      // Over a batch axis every op runs on the rank's part of the batch, and the gradient
      // reduction over that axis averages the per-rank terms (fully sharded data
      // parallelism: the all-gather's reduce-scatter is that reduction).
      llvm::erase_if(gathered, [&](int16_t a) { return llvm::is_contained(batchAxes, grid_.names[a]); });
      if (gathered.empty()) continue;
      for (mlir::Operation* user : r->getUsers()) {
        if (mlir::isa<mlir::func::ReturnOp>(user)) continue;  // an output: no gradient flows in
        bool split = llvm::all_of(gathered, [&](int16_t a) {
          return llvm::any_of(user->getOperands(), [&](Value o) {
                   return o != r.getResult() && shardingOf(o).usesAxis(a);
                 }) ||
                 llvm::any_of(user->getResults(), [&](Value o) { return shardingOf(o).usesAxis(a); });
        });
        if (!split)
          return user->emitError()
                 << "this op reads a tensor gathered over " << grid_.names[gathered[0]]
                 << " but does not itself run split over it; its gradient would be counted "
                    "once per rank (not supported yet)";
      }
    }
    return mlir::success();
  }

  GridInfo grid_;
  /// The padded values: per value, its padded dimensions and their padding.
  llvm::DenseMap<Value, llvm::SmallVector<std::pair<int64_t, int64_t>>> padded_;
};

}  // namespace
}  // namespace tessel
