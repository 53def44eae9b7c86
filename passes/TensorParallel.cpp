//===- TensorParallel.cpp - the Megatron layout as parameter shardings ---------===//
//
// Algorithm (see passes/Passes.td): find the pairs of linear layers Megatron-LM splits,
// and seed their weights' shardings; tessel-propagate-sharding derives everything else
// (biases, activations, where the pending sums are).
//   1. Attention: the projection feeding a tessel.causal_attention is column-parallel by
//      heads (its weight split on the output dimension over the axis, blocks = 3: each
//      rank's heads' q, k and v); the projection consuming the attention's output is
//      row-parallel (weight split on the input dimension).
//   1b. Grouped-query attention (tessel.grouped_attention, NH query and NKV key/value heads):
//      the projections producing q, k and v (looking through a tessel.rope) are column-
//      parallel (rank r holds query heads [r NH/tp, (r+1) NH/tp) and kv heads
//      [r NKV/tp, (r+1) NKV/tp): the same groups, since G = NH / NKV is unchanged), the one
//      consuming its output row-parallel. When tp > NKV (tp a multiple of NKV, NH divisible
//      by tp), wk and wv stay replicated and each rank's attention uses only kv head
//      r / (tp / NKV), the one its query heads belong to: k (all NKV heads, computed on every
//      rank) is read through a tessel.replicate (identity forward; its backward all-reduces
//      dk over tp, so the gradients of wk, wv and of the input are the sums of every rank's
//      part), then its heads are repeated tp / NKV times into tp rows and row r is picked by
//      an embedding at tessel.mesh_coordinate (differentiable, as vocab parallelism reads its
//      shard); the attention then has kv_heads 1. Other head counts are an error at the
//      attention naming them.
//   2. MLP: a linear layer whose output (plus its bias) goes through one activation (gelu,
//      relu) into another linear layer: the first is column-parallel, the second
//      row-parallel.
//   2b. SwiGLU MLP (Llama): a linear layer whose input is mul(silu(linA(x)), linB(x)), in either
//      operand order, is row-parallel and linA (gate), linB (up) are column-parallel: every
//      rank computes silu(gate) * up for its slice of the hidden units, with no communication
//      until the down projection's pending sum.
//   3. Embedding tables whose rows the axis divides are split on them (vocab-parallel); a
//      tied LM head follows by propagation.
// Parameters the plan already shards are left as the plan says. A weight shared with an
// embedding (a tied LM head) is never split here.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "compiler/PlanSite.h"
#include "compiler/ShardingRules.h"
#include "passes/PipelineStage.h"

#include "mlir/IR/BuiltinOps.h"

#include <array>

#define DEBUG_TYPE "tessel-tensor-parallel"

namespace tessel {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "passes/Passes.h.inc"

namespace {

using mlir::Value;

/// A linear layer: y = x W^T (+ b), as tessel::Linear builds it.
struct Linear {
  MatmulOp matmul;
  ParamOp weight;
  Value output;  // the bias add's result when there is one, else the matmul's
  bool transposedWeight = false;  // a PyTorch-layout weight [out, in]: matmul transpose_rhs
  /// The weight dimension of the layer's outputs and of its inputs.
  int64_t outDim() const { return transposedWeight ? 0 : 1; }
  int64_t inDim() const { return 1 - outDim(); }
};

/// The linear layer whose matmul is `m`, if its rhs is a rank-2 parameter that no embedding
/// reads (a tied LM head is left to the embedding's sharding).
std::optional<Linear> linearOf(MatmulOp m) {
  auto w = m.getRhs().getDefiningOp<ParamOp>();
  if (!w || mlir::cast<mlir::RankedTensorType>(w.getType()).getRank() != 2) return std::nullopt;
  if (llvm::any_of(w->getUsers(), [](mlir::Operation* u) { return mlir::isa<EmbeddingOp>(u); }))
    return std::nullopt;
  Linear l{m, w, m.getResult(), m.getTransposeRhs()};
  if (m->hasOneUse())
    if (auto add = mlir::dyn_cast<AddOp>(*m->getUsers().begin());
        add && add.getLhs() == m.getResult() && add.getRhs().getDefiningOp<ParamOp>())
      l.output = add.getResult();
  return l;
}

/// The linear layer producing `v` (through its bias add).
std::optional<Linear> linearProducing(Value v) {
  mlir::Operation* def = v.getDefiningOp();
  if (auto add = mlir::dyn_cast_or_null<AddOp>(def)) def = add.getLhs().getDefiningOp();
  auto m = mlir::dyn_cast_or_null<MatmulOp>(def);
  if (!m) return std::nullopt;
  auto l = linearOf(m);
  if (!l || l->output != v) return std::nullopt;
  return l;
}

/// The value a tessel.rope turns (or `v` itself): the linear layer of a rotated q or k.
Value throughRope(Value v) {
  if (auto rope = v.getDefiningOp<RopeOp>()) return rope.getInput();
  return v;
}

/// The one linear layer reading `v` as its input.
std::optional<Linear> linearConsuming(Value v) {
  if (!v.hasOneUse()) return std::nullopt;
  auto m = mlir::dyn_cast<MatmulOp>(*v.getUsers().begin());
  if (!m || m.getLhs() != v || m.getTransposeLhs()) return std::nullopt;
  return linearOf(m);
}

/// The three linear layers of a SwiGLU MLP down(silu(gate(x)) * up(x)) around `mul` (either
/// operand order), each output read only by the next op of the pattern.
std::optional<std::array<Linear, 3>> swigluOf(MulOp mul) {
  for (auto [a, b] : {std::pair{mul.getLhs(), mul.getRhs()}, {mul.getRhs(), mul.getLhs()}}) {
    auto silu = a.getDefiningOp<SiluOp>();
    if (!silu || !a.hasOneUse() || !b.hasOneUse() || !silu.getInput().hasOneUse()) continue;
    auto gate = linearProducing(silu.getInput());
    auto up = linearProducing(b);
    auto down = linearConsuming(mul.getResult());
    if (gate && up && down) return std::array<Linear, 3>{*gate, *up, *down};
  }
  return std::nullopt;
}

struct TensorParallelPass : impl::TensorParallelBase<TensorParallelPass> {
  using TensorParallelBase::TensorParallelBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto target = shardingTarget(module, forwardName, DEBUG_TYPE, {},
                                 {StageFact::TrainStep, StageFact::ShardingsPropagated,
                                   StageFact::Partitioned, StageFact::Fused},
                                 "once, on the forward function before "
                                  "tessel-propagate-sharding");
    if (mlir::failed(target)) return signalPassFailure();
    mlir::func::FuncOp f = target->function;
    const GridInfo* grid = &target->grid;
    site_ = planSiteLocation(&getContext(), tensorParallelSite, mlir::UnknownLoc::get(&getContext()));
    axis_ = grid->axis(axisName);
    if (axis_ < 0) {
      mlir::emitError(mlir::Location(site_)) << "tensor_parallel(\"" << axisName << "\"): the mesh has no axis '"
                             << axisName << "'";
      return signalPassFailure();
    }
    size_ = grid->sizes[axis_];
    grid_ = *grid;
    if (mlir::failed(seed(f))) return signalPassFailure();
  }

  mlir::LogicalResult seed(mlir::func::FuncOp f) {
    int pairs = 0;
    // 1. Attention blocks.
    for (auto attn : f.getBody().getOps<CausalAttentionOp>()) {
      auto col = linearProducing(attn.getQkv());
      auto row = linearConsuming(attn.getResult());
      if (!col || !row) continue;
      int64_t heads = attn.getNumHeads();
      if (heads % size_ != 0) {
        auto d = mlir::emitError(mlir::Location(site_))
                 << "tensor_parallel(\"" << axisName << "\") splits attention heads over "
                 << axisName << "=" << size_ << ", but this attention has " << heads
                 << " heads (" << axisName << " must divide the number of heads)";
        d.attachNote(attn.getLoc()) << "the attention";
        return d;
      }
      if (mlir::failed(split(*col, col->outDim(), 3)) || mlir::failed(split(*row, row->inDim(), 1)))
        return mlir::failure();
      ++pairs;
    }
    // 1b. Grouped-query attention.
    for (auto attn : llvm::make_early_inc_range(f.getBody().getOps<GroupedAttentionOp>())) {
      auto q = linearProducing(throughRope(attn.getQ()));
      auto k = linearProducing(throughRope(attn.getK()));
      auto v = linearProducing(attn.getV());
      auto row = linearConsuming(attn.getResult());
      if (!q || !k || !v || !row) continue;
      auto kvSplit = groupedAttentionPlan(attn);
      if (mlir::failed(kvSplit)) return mlir::failure();
      if (mlir::failed(split(*q, q->outDim(), 1)) || mlir::failed(split(*row, row->inDim(), 1)))
        return mlir::failure();
      if (*kvSplit) {
        if (mlir::failed(split(*k, k->outDim(), 1)) || mlir::failed(split(*v, v->outDim(), 1)))
          return mlir::failure();
      } else {
        selectKvHeadPerRank(attn);
      }
      ++pairs;
    }
    // 2. MLPs: linear -> activation -> linear.
    for (auto m : f.getBody().getOps<MatmulOp>()) {
      auto col = linearOf(m);
      if (!col || !col->output.hasOneUse()) continue;
      mlir::Operation* act = *col->output.getUsers().begin();
      if (!mlir::isa<GeluOp, ReluOp>(act)) continue;
      auto row = linearConsuming(act->getResult(0));
      if (!row) continue;
      // A layer already in a pair (the row half of the previous one, in a deeper MLP) or
      // sharded by the plan starts no pair: the next pair begins after it, as Megatron-LM
      // pairs a stack of linear layers two by two.
      if (seeded(*col) || seeded(*row)) continue;
      if (mlir::failed(split(*col, col->outDim(), 1)) || mlir::failed(split(*row, row->inDim(), 1)))
        return mlir::failure();
      ++pairs;
    }
    // 2b. SwiGLU MLPs: down(silu(gate(x)) * up(x)).
    for (auto mul : f.getBody().getOps<MulOp>()) {
      auto mlp = swigluOf(mul);
      if (!mlp) continue;
      auto [gate, up, down] = *mlp;
      if (seeded(gate) || seeded(up) || seeded(down)) continue;
      if (mlir::failed(split(gate, gate.outDim(), 1)) || mlir::failed(split(up, up.outDim(), 1)) ||
          mlir::failed(split(down, down.inDim(), 1)))
        return mlir::failure();
      ++pairs;
    }
    // 3. Vocab-parallel embeddings: the table is split on its rows (each rank looks up the
    //    ids it holds; a tied LM head then produces logits split on the vocabulary, and the
    //    loss is the vocab-parallel cross-entropy). A vocabulary the axis does not divide is
    //    padded by tessel-partition (its padded logits masked to -inf), as Megatron-LM pads
    //    its vocabulary to a multiple of tp.
    for (auto e : f.getBody().getOps<EmbeddingOp>()) {
      auto table = e.getTable().getDefiningOp<ParamOp>();
      auto helper = TesselDialect::ShardingsAttrHelper(&getContext());
      if (!table || helper.isAttrPresent(table)) continue;
      TensorSharding s = TensorSharding::replicated(2);
      s.dims[0].axes = {axis_};
      setShardings(table, {s}, grid_.ref);
    }
    if (pairs == 0)
      return mlir::emitError(mlir::Location(site_))
             << "tensor_parallel(\"" << axisName << "\") found no pair of linear layers to split "
             << "in @" << f.getSymName()
             << " (a projection into attention and the one after it, linear -> gelu/relu -> "
                "linear, or a SwiGLU MLP: down(silu(gate(x)) * up(x)))";
    return mlir::success();
  }

  /// Whether `l`'s weight already has a sharding (the plan's, or from an earlier pair).
  bool seeded(const Linear& l) {
    return TesselDialect::ShardingsAttrHelper(&getContext()).isAttrPresent(l.weight);
  }

  /// Whether `attn`'s kv heads are split over the axis (NKV divisible by tp) or replicated and
  /// selected per rank (tp a multiple of NKV); an error at the attention naming the numbers
  /// when NH is not divisible by tp or neither holds.
  mlir::FailureOr<bool> groupedAttentionPlan(GroupedAttentionOp attn) {
    int64_t heads = static_cast<int64_t>(attn.getNumHeads());
    int64_t kvHeads = static_cast<int64_t>(attn.getNumKvHeads());
    if (heads % size_ == 0 && kvHeads % size_ == 0) return true;
    if (heads % size_ == 0 && size_ % kvHeads == 0) return false;
    auto d = attn.emitError() << "tensor_parallel(\"" << axisName << "\") over " << axisName
                              << "=" << size_
                              << " cannot split this grouped-query attention with " << heads
                              << " query heads and " << kvHeads << " key/value heads: ";
    if (heads % size_ != 0)
      d << axisName << "=" << size_ << " must divide the " << heads << " query heads";
    else
      d << axisName << "=" << size_ << " must divide the " << kvHeads
        << " key/value heads or be a multiple of them (then each rank uses one kv head)";
    d.attachNote(mlir::Location(site_)) << "the plan's tensor_parallel";
    return mlir::failure();
  }

  /// tp > NKV: `attn` reads, on rank r, only kv head r / (tp / NKV) of its k and v (see the
  /// top of the file), so its kv_heads becomes 1 and its query heads split over tp.
  void selectKvHeadPerRank(GroupedAttentionOp attn) {
    mlir::OpBuilder b(attn);
    mlir::Location loc = attn.getLoc();
    int64_t kvHeads = static_cast<int64_t>(attn.getNumKvHeads());
    auto type = mlir::cast<mlir::RankedTensorType>(attn.getK().getType());
    int64_t batch = type.getDimSize(0), seq = type.getDimSize(1);
    int64_t headSize = type.getDimSize(2) / kvHeads, row = batch * seq * headSize;
    auto typed = [&](llvm::ArrayRef<int64_t> shape) { return type.clone(shape); };
    Value rank;
    if (kvHeads > 1)
      rank = MeshCoordinateOp::create(b, loc, grid_.ref.getValue(),
                                      llvm::ArrayRef<int16_t>{axis_}, 1);
    auto select = [&](Value x) -> Value {
      Value all = ReplicateOp::create(b, loc, x, grid_.ref, b.getDenseI16ArrayAttr({axis_}));
      if (kvHeads == 1) return all;  // multi-query: every rank reads the one head
      int64_t repeat = size_ / kvHeads;
      Value heads = ReshapeOp::create(b, loc, typed({batch, seq, kvHeads, headSize}), all);
      heads = TransposeOp::create(b, loc, typed({kvHeads, batch, seq, headSize}), heads,
                                  b.getDenseI64ArrayAttr({2, 0, 1, 3}));
      heads = ReshapeOp::create(b, loc, typed({kvHeads, row}), heads);
      heads = BroadcastOp::create(b, loc, typed({kvHeads, repeat, row}), heads,
                                  b.getDenseI64ArrayAttr({1}));
      heads = ReshapeOp::create(b, loc, typed({size_, row}), heads);  // row j: kv head j / repeat
      Value mine = EmbeddingOp::create(b, loc, typed({row}), heads, rank);
      return ReshapeOp::create(b, loc, typed({batch, seq, headSize}), mine);
    };
    Value k = select(attn.getK()), v = select(attn.getV());
    attn.getKMutable().assign(k);
    attn.getVMutable().assign(v);
    attn.setNumKvHeads(1);
  }

  /// Splits `l`'s weight on `dim` over the axis, in `blocks` blocks, unless the plan
  /// already gave it a sharding.
  mlir::LogicalResult split(const Linear& l, int64_t dim, int64_t blocks) {
    ParamOp w = l.weight;
    if (TesselDialect::ShardingsAttrHelper(&getContext()).isAttrPresent(w)) return mlir::success();
    auto type = mlir::cast<mlir::RankedTensorType>(w.getType());
    // An unblocked dimension that the axis does not divide is padded by tessel-partition;
    // blocks (heads) are not.
    if (blocks > 1 && type.getShape()[dim] % (blocks * size_) != 0) {
      auto d = mlir::emitError(mlir::Location(site_))
               << "tensor_parallel(\"" << axisName << "\"): '" << w.getName() << "' has "
               << type.getShape()[dim] << (dim == l.outDim() ? " outputs" : " inputs") << " in "
               << blocks << " blocks, not divisible by " << axisName << "=" << size_
               << " (a block is a head's queries, keys or values, which one rank holds whole)";
      d.attachNote(w.getLoc()) << "the layer's weight";
      return d;
    }
    TensorSharding s = TensorSharding::replicated(2);
    s.dims[dim].axes = {axis_};
    s.dims[dim].blocks = blocks;
    setShardings(w, {s}, grid_.ref);
    return mlir::success();
  }

  mlir::LocationAttr site_;  // the plan's tensor_parallel call
  int16_t axis_ = -1;
  int64_t size_ = 1;
  GridInfo grid_;
};

}  // namespace
}  // namespace tessel
