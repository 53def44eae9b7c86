// The sharding rules of the tessel ops: given the shardings of an op's operands, the
// sharding each operand must have for the op to run on its local parts, and the sharding of
// its results. The core of tessel-propagate-sharding and tessel-insert-reshards (the passes
// are thin shells around it, as in Shardy).
//
// A sharding (TensorSharding) is per dimension the mesh axes it is split over plus its block
// count, and the axes over which the tensor is a pending sum (partial); see
// #tessel.sharding in compiler/TesselDialect.td. The rules, per op:
//
//   matmul   lhs [b..., M, K] x rhs [K, N]: M from lhs, N from rhs, batch from lhs. K split
//            the same way on both operands makes the result partial over K's axes (a
//            row-parallel projection); K split on one side only asks the other to be split
//            alike. Operands must not be partial. An axis wanted twice goes to K, then N,
//            then the batch, then M (split rows are gathered before a column-parallel
//            product, as sequence parallelism does).
//   add, sub elementwise with suffix broadcasting: each result dimension takes the first
//            split among the operands' aligned dimensions (lhs first), else the users' hint,
//            and every operand is asked to match it. Both operands partial over the same axes stay partial (a sum
//            of pending sums); otherwise partial operands must be resolved first.
//   scale    keeps its operand's sharding, partial included (it is linear).
//   mul, gelu, relu, cast  like add without partial results (they are not linear).
//   silu, silu_grad  likewise (elementwise, not linear).
//   layer_norm, rms_norm  the normalised (last) dimension replicated, the rows (batch,
//            sequence) keep their split; gamma and beta (rms_norm's weight) replicated.
//   causal_attention  [B, T, 3C] -> [B, T, C]: T replicated; the channel dimension split by
//            heads (blocks = 3: each rank holds its heads' q, k and v) gives a result split
//            over the same axes.
//   rope     [B, T, N * D]: T replicated; the channel dimension split only in whole heads
//            (blocks 1), the result alike.
//   grouped_attention  q [B, T, NH * D], k, v [B, T, NKV * D]: T replicated; the channel
//            dimensions split by heads over the same axes on all three (q's split first),
//            except a single kv head, which stays replicated; the batch as q's; the result
//            split like q.
//   embedding  table [V, C], indices [B, T] -> [B, T, C]: C from the table, B and T from
//            the indices; V split (blocks 1) makes the result a pending sum over its axes
//            (each rank looks up the rows it holds: a vocab-parallel embedding).
//   cross_entropy  logits [..., V] split on V only (blocks 1) stay split (the loss is
//            computed from row statistics all-reduced over V's axes: vocab-parallel); any
//            other split is gathered first. The loss is replicated.
//   anything else (softmax, reshape, ..., and func.return): every operand
//            replicated, results replicated. Always correct, never silently wrong.
//
// Priority on conflicts (documented for the passes): a split beats replicated (slicing a
// replicated tensor needs no communication), and between two different splits the first
// operand's wins. Parameters the plan left free adopt what their first use asks for
// (tessel-propagate-sharding), so `shard()` on a weight is enough: its bias follows.
#pragma once

#include "compiler/TesselDialect.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>

namespace tessel {

/// One tensor dimension's split: the mesh axes (grid axis indices, first outermost), the
/// number of blocks the dimension is made of, and the padding appended to its global size
/// so that the axes divide it (see #tessel.sharding; set by tessel-partition). Padding is not
/// part of the layout's identity (equality ignores it): it follows from the global size.
struct DimSharding {
  llvm::SmallVector<int16_t> axes;
  int64_t blocks = 1;
  int64_t padding = 0;
  bool split() const { return !axes.empty(); }
  bool operator==(const DimSharding& o) const {
    return axes == o.axes && (axes.empty() || blocks == o.blocks);
  }
};

/// Where a tensor lives: one DimSharding per dimension and the partial (pending sum) axes,
/// sorted ascending.
struct TensorSharding {
  llvm::SmallVector<DimSharding> dims;
  llvm::SmallVector<int16_t> partial;

  static TensorSharding replicated(int64_t rank);
  /// The sharding `attr` describes (a null attribute: replicated of `rank`).
  static TensorSharding fromAttr(ShardingAttr attr, int64_t rank);
  ShardingAttr toAttr(mlir::MLIRContext* ctx, mlir::FlatSymbolRefAttr grid) const;
  bool isReplicated() const;
  bool usesAxis(int16_t axis) const;
  /// Every axis the tensor is split or partial over (partial first, then by dimension).
  llvm::SmallVector<int16_t> axes() const;
  /// The same splits with no partial axes.
  TensorSharding withoutPartial() const;
  bool operator==(const TensorSharding& o) const { return dims == o.dims && partial == o.partial; }
  bool operator!=(const TensorSharding& o) const { return !(*this == o); }
};

/// What an op needs and produces: the sharding each operand must have (`operands`), and the
/// shardings of its results when the operands have them (`results`).
struct OpSharding {
  llvm::SmallVector<TensorSharding> operands;
  llvm::SmallVector<TensorSharding> results;
};

/// The rule of `op` (any op, func.return included) given its operands' current shardings
/// (one per operand; non-tensor operands replicated of rank 0). Never fails: an op without
/// a rule asks for everything replicated. `hint` (optional) is the sharding the result's
/// users would like: an elementwise op then also splits the result dimensions that no
/// operand splits as the hint does (asking its operands for the same), which is how a
/// split flows backwards through the graph (tessel-propagate-sharding's second walk).
OpSharding shardOp(mlir::Operation* op, llvm::ArrayRef<TensorSharding> operands,
                   const TensorSharding* hint = nullptr);

/// "[[1], []] blocks=[3, 1] partial=[1]" with axis names from `axisNames` (for diagnostics):
/// "{tp x3, -} partial(tp)".
std::string describeSharding(const TensorSharding& s, llvm::ArrayRef<llvm::StringRef> axisNames);

/// The sharding of `v`: its defining op's `tessel.shardings` entry, or replicated (block
/// arguments, unannotated ops).
TensorSharding shardingOf(mlir::Value v);

/// The plan's mesh as the sharding passes use it: the `shard.grid` named `@mesh` with its
/// sizes and `tessel.axis_names`.
struct GridInfo {
  mlir::FlatSymbolRefAttr ref;
  llvm::SmallVector<int64_t> sizes;
  llvm::SmallVector<llvm::StringRef> names;
  /// The index of axis `name`, or -1.
  int16_t axis(llvm::StringRef name) const;
  /// The product of the sizes of `axes`.
  int64_t groupSize(llvm::ArrayRef<int16_t> axes) const;
};

/// The module's `shard.grid @mesh` (the plan's mesh). Emits "<pass>: the module has no
/// shard.grid @mesh (the plan's mesh)" at the module and fails when it is missing.
mlir::FailureOr<GridInfo> findGrid(mlir::ModuleOp module, llvm::StringRef pass);

/// Sets `tessel.shardings` on `op` from `results` (one per result) on `grid`.
void setShardings(mlir::Operation* op, llvm::ArrayRef<TensorSharding> results,
                  mlir::FlatSymbolRefAttr grid);

}  // namespace tessel
