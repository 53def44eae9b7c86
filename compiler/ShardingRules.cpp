// The sharding rules of the tessel ops; see ShardingRules.h.
#include "compiler/ShardingRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <algorithm>

namespace tessel {

using mlir::Operation;

TensorSharding TensorSharding::replicated(int64_t rank) {
  TensorSharding s;
  s.dims.resize(rank);
  return s;
}

TensorSharding TensorSharding::fromAttr(ShardingAttr attr, int64_t rank) {
  if (!attr) return replicated(rank);
  TensorSharding s;
  for (int64_t d = 0; d < static_cast<int64_t>(attr.getSplitAxes().size()); ++d) {
    DimSharding dim;
    dim.axes.assign(attr.axesOf(d).begin(), attr.axesOf(d).end());
    dim.blocks = attr.blocksOf(d);
    dim.padding = attr.paddingOf(d);
    s.dims.push_back(dim);
  }
  s.partial.assign(attr.getPartialAxes().begin(), attr.getPartialAxes().end());
  llvm::sort(s.partial);
  return s;
}

ShardingAttr TensorSharding::toAttr(mlir::MLIRContext* ctx, mlir::FlatSymbolRefAttr grid) const {
  llvm::SmallVector<mlir::shard::GridAxesAttr> split;
  llvm::SmallVector<int64_t> blocks, padding;
  bool anyBlocks = false, anyPadding = false;
  for (const DimSharding& d : dims) {
    split.push_back(mlir::DenseI16ArrayAttr::get(ctx, d.axes));
    blocks.push_back(d.split() ? d.blocks : 1);
    padding.push_back(d.split() ? d.padding : 0);
    anyBlocks |= blocks.back() != 1;
    anyPadding |= padding.back() != 0;
  }
  if (!anyBlocks) blocks.clear();
  if (!anyPadding) padding.clear();
  return ShardingAttr::get(ctx, grid, mlir::shard::GridAxesArrayAttr::get(ctx, split), blocks,
                           partial, padding);
}

bool TensorSharding::isReplicated() const {
  return partial.empty() && llvm::none_of(dims, [](const DimSharding& d) { return d.split(); });
}

bool TensorSharding::usesAxis(int16_t axis) const {
  if (llvm::is_contained(partial, axis)) return true;
  return llvm::any_of(dims, [&](const DimSharding& d) { return llvm::is_contained(d.axes, axis); });
}

llvm::SmallVector<int16_t> TensorSharding::axes() const {
  llvm::SmallVector<int16_t> all(partial);
  for (const DimSharding& d : dims) all.append(d.axes.begin(), d.axes.end());
  return all;
}

TensorSharding TensorSharding::withoutPartial() const {
  TensorSharding s = *this;
  s.partial.clear();
  return s;
}

namespace {

int64_t rankOf(mlir::Value v) {
  auto t = mlir::dyn_cast<mlir::RankedTensorType>(v.getType());
  return t ? t.getRank() : 0;
}

/// Everything replicated: the safe rule of any op.
OpSharding allReplicated(Operation* op) {
  OpSharding r;
  for (mlir::Value v : op->getOperands()) r.operands.push_back(TensorSharding::replicated(rankOf(v)));
  for (mlir::Value v : op->getResults()) r.results.push_back(TensorSharding::replicated(rankOf(v)));
  return r;
}

/// Elementwise ops with suffix broadcasting. `keepPartial`: the op is linear in its operands
/// jointly (add, sub, scale), so operands partial over the same axes stay partial.
OpSharding elementwise(Operation* op, llvm::ArrayRef<TensorSharding> in, bool keepPartial,
                       const TensorSharding* hint) {
  int64_t rank = rankOf(op->getResult(0));
  TensorSharding out = TensorSharding::replicated(rank);
  for (int64_t d = 0; d < rank; ++d)
    for (const TensorSharding& s : in) {
      int64_t od = d - (rank - static_cast<int64_t>(s.dims.size()));
      if (od >= 0 && s.dims[od].split()) {
        out.dims[d] = s.dims[od];
        break;
      }
    }
  // What the users would like: splits on dimensions no operand splits.
  if (hint && static_cast<int64_t>(hint->dims.size()) == rank)
    for (int64_t d = 0; d < rank; ++d)
      if (!out.dims[d].split() && hint->dims[d].split()) out.dims[d] = hint->dims[d];
  // Partial only when every operand is partial over the same axes.
  bool samePartial = keepPartial && !in.empty() && !in[0].partial.empty() &&
                     llvm::all_of(in, [&](const TensorSharding& s) { return s.partial == in[0].partial; });
  if (samePartial) out.partial = in[0].partial;
  // An axis may split only one dimension: a later dimension that reuses one is replicated.
  llvm::SmallVector<int16_t> used(out.partial);
  for (DimSharding& d : out.dims) {
    if (llvm::any_of(d.axes, [&](int16_t a) { return llvm::is_contained(used, a); })) d = {};
    used.append(d.axes.begin(), d.axes.end());
  }
  OpSharding r;
  for (const TensorSharding& s : in) {
    TensorSharding want = TensorSharding::replicated(s.dims.size());
    int64_t offset = rank - static_cast<int64_t>(s.dims.size());
    for (int64_t d = 0; d < static_cast<int64_t>(s.dims.size()); ++d) want.dims[d] = out.dims[d + offset];
    want.partial = out.partial;
    r.operands.push_back(want);
  }
  r.results.push_back(out);
  return r;
}

OpSharding matmul(MatmulOp op, llvm::ArrayRef<TensorSharding> in) {
  TensorSharding lhs = in[0].withoutPartial(), rhs = in[1].withoutPartial();
  int64_t r = lhs.dims.size(), s = rhs.dims.size();
  int64_t mL = op.getTransposeLhs() ? r - 1 : r - 2, kL = op.getTransposeLhs() ? r - 2 : r - 1;
  int64_t kR = op.getTransposeRhs() ? s - 1 : s - 2, nR = op.getTransposeRhs() ? s - 2 : s - 1;
  // K: the split of either side (lhs first), asked of both.
  DimSharding k = lhs.dims[kL].split() ? lhs.dims[kL] : rhs.dims[kR];
  lhs.dims[kL] = k;
  rhs.dims[kR] = k;
  TensorSharding out = TensorSharding::replicated(r);
  for (int64_t d = 0; d < r - 2; ++d) out.dims[d] = lhs.dims[d];
  out.dims[r - 2] = lhs.dims[mL];
  out.dims[r - 1] = rhs.dims[nR];
  out.partial.assign(k.axes.begin(), k.axes.end());
  llvm::sort(out.partial);
  // An axis used twice cannot be. Claim order: the pending sum (K), then N (the weight's
  // split, which is free to keep), then the batch dimensions, then M: under sequence
  // parallelism the activation's split rows give way, so they are gathered before a
  // column-parallel product, as in Megatron-LM.
  llvm::SmallVector<int16_t> used(out.partial);
  auto claim = [&](int64_t d) {
    DimSharding& dim = out.dims[d];
    if (llvm::any_of(dim.axes, [&](int16_t a) { return llvm::is_contained(used, a); })) {
      if (d == r - 1) rhs.dims[nR] = {};
      else if (d == r - 2) lhs.dims[mL] = {};
      else lhs.dims[d] = {};
      dim = {};
    }
    used.append(dim.axes.begin(), dim.axes.end());
  };
  claim(r - 1);
  for (int64_t d = 0; d < r - 2; ++d) claim(d);
  claim(r - 2);
  if (s > 2)
    for (int64_t d = 0; d < s - 2; ++d) rhs.dims[d] = out.dims[d];
  OpSharding res;
  res.operands = {lhs, rhs};
  res.results = {out};
  return res;
}

/// layer_norm (gamma, beta) and rms_norm (weight): the input's rows keep their split, its
/// normalised last dimension and the `params` per-channel vectors are replicated.
OpSharding rowNorm(llvm::ArrayRef<TensorSharding> in, size_t params) {
  TensorSharding x = in[0].withoutPartial();
  x.dims.back() = {};
  OpSharding r;
  r.operands = {x};
  r.operands.append(params, TensorSharding::replicated(1));
  r.results = {x};
  return r;
}

OpSharding attention(CausalAttentionOp op, llvm::ArrayRef<TensorSharding> in) {
  TensorSharding qkv = in[0].withoutPartial();
  qkv.dims[1] = {};  // T: every query sees every key
  DimSharding& c = qkv.dims[2];
  // Split by heads only: blocks 3 (q | k | v), each split alike.
  if (c.split() && c.blocks != 3) c = {};
  TensorSharding out = qkv;
  out.dims[2] = c.split() ? DimSharding{c.axes, 1} : DimSharding{};
  OpSharding r;
  r.operands = {qkv};
  r.results = {out};
  return r;
}

/// rope [B, T, N * D]: T replicated (the angle depends on the global position), the channel
/// dimension split only in whole heads (blocks 1: a contiguous run of heads per rank; that
/// the axes divide N is tessel-partition's check). It is linear but keeps no pending sum:
/// the projections feeding it are column-parallel, never partial.
OpSharding rope(RopeOp op, llvm::ArrayRef<TensorSharding> in) {
  TensorSharding x = in[0].withoutPartial();
  x.dims[1] = {};
  if (x.dims[2].split() && x.dims[2].blocks != 1) x.dims[2] = {};
  OpSharding r;
  r.operands = {x};
  r.results = {x};
  return r;
}

/// grouped_attention q [B, T, NH * D], k, v [B, T, NKV * D]: T replicated; the channel
/// dimensions split by heads over the same axes on all three (q's split first, else k's,
/// else v's; blocks 1), so each rank holds a contiguous run of query heads and the kv heads
/// they use (tessel-partition checks that the axes divide NH and NKV). A single kv head
/// (multi-query attention, or the head tessel-tensor-parallel selected per rank when tp > NKV)
/// cannot be split: k and v stay replicated and every rank's query heads read it. The batch
/// split of q is asked of k and v.
OpSharding groupedAttention(GroupedAttentionOp op, llvm::ArrayRef<TensorSharding> in) {
  llvm::SmallVector<TensorSharding> x;
  for (const TensorSharding& s : in) x.push_back(s.withoutPartial());
  const bool oneKvHead = op.getNumKvHeads() == 1;
  DimSharding heads;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].dims[2].split() && x[i].dims[2].blocks == 1 && (i == 0 || !oneKvHead)) {
      heads = x[i].dims[2];
      break;
    }
  DimSharding batch = x[0].dims[0];
  if (llvm::any_of(batch.axes, [&](int16_t a) { return llvm::is_contained(heads.axes, a); }))
    batch = {};
  for (size_t i = 0; i < x.size(); ++i) {
    x[i].dims[0] = batch;
    x[i].dims[1] = {};
    x[i].dims[2] = i > 0 && oneKvHead ? DimSharding{} : heads;
  }
  OpSharding r;
  r.operands.assign(x.begin(), x.end());
  r.results = {x[0]};
  return r;
}

OpSharding embedding(EmbeddingOp op, llvm::ArrayRef<TensorSharding> in) {
  TensorSharding table = in[0].withoutPartial(), idx = in[1].withoutPartial();
  // A table split on its rows (the vocabulary, blocks 1) gives each rank the rows it holds
  // and zeros elsewhere: a pending sum over those axes (Megatron's VocabParallelEmbedding).
  if (table.dims[0].split() && table.dims[0].blocks != 1) table.dims[0] = {};
  TensorSharding out = TensorSharding::replicated(idx.dims.size() + 1);
  out.partial.assign(table.dims[0].axes.begin(), table.dims[0].axes.end());
  llvm::sort(out.partial);
  for (size_t d = 0; d < idx.dims.size(); ++d) out.dims[d] = idx.dims[d];
  out.dims.back() = table.dims[1];
  llvm::SmallVector<int16_t> used(out.partial);
  for (DimSharding& d : out.dims) {
    if (llvm::any_of(d.axes, [&](int16_t a) { return llvm::is_contained(used, a); })) {
      if (&d == &out.dims.back()) table.dims[1] = {};
      d = {};
    }
    used.append(d.axes.begin(), d.axes.end());
  }
  for (size_t d = 0; d < idx.dims.size(); ++d) idx.dims[d] = out.dims[d];
  OpSharding r;
  r.operands = {table, idx};
  r.results = {out};
  return r;
}

OpSharding crossEntropy(CrossEntropyOp op, llvm::ArrayRef<TensorSharding> in) {
  // Logits split on the vocabulary only (blocks 1) stay split: tessel-partition computes the
  // loss from row statistics all-reduced over those axes (vocab-parallel cross-entropy).
  TensorSharding logits = TensorSharding::replicated(in[0].dims.size());
  const DimSharding& v = in[0].dims.back();
  if (v.split() && v.blocks == 1) logits.dims.back() = v;
  OpSharding r;
  r.operands = {logits, TensorSharding::replicated(in[1].dims.size())};
  r.results = {TensorSharding::replicated(0)};
  return r;
}

}  // namespace

OpSharding shardOp(Operation* op, llvm::ArrayRef<TensorSharding> in, const TensorSharding* hint) {
  if (auto m = mlir::dyn_cast<MatmulOp>(op)) return matmul(m, in);
  if (mlir::isa<AddOp, SubOp, ScaleOp>(op)) return elementwise(op, in, /*keepPartial=*/true, hint);
  if (mlir::isa<MulOp, GeluOp, ReluOp, CastOp>(op))
    return elementwise(op, in, /*keepPartial=*/false, hint);
  if (mlir::isa<SiluOp, SiluGradOp>(op)) return elementwise(op, in, /*keepPartial=*/false, hint);
  if (mlir::isa<LayerNormOp>(op)) return rowNorm(in, 2);
  if (mlir::isa<RmsNormOp>(op)) return rowNorm(in, 1);
  if (auto a = mlir::dyn_cast<CausalAttentionOp>(op)) return attention(a, in);
  if (auto ro = mlir::dyn_cast<RopeOp>(op)) return rope(ro, in);
  if (auto ga = mlir::dyn_cast<GroupedAttentionOp>(op)) return groupedAttention(ga, in);
  if (auto e = mlir::dyn_cast<EmbeddingOp>(op)) return embedding(e, in);
  if (auto ce = mlir::dyn_cast<CrossEntropyOp>(op)) return crossEntropy(ce, in);
  return allReplicated(op);
}

std::string describeSharding(const TensorSharding& s, llvm::ArrayRef<llvm::StringRef> names) {
  auto axisName = [&](int16_t a) {
    return a >= 0 && a < static_cast<int16_t>(names.size()) ? names[a].str() : std::to_string(a);
  };
  std::string out = "{";
  for (size_t d = 0; d < s.dims.size(); ++d) {
    if (d) out += ", ";
    if (!s.dims[d].split()) {
      out += "-";
      continue;
    }
    for (size_t i = 0; i < s.dims[d].axes.size(); ++i)
      out += (i ? "," : "") + axisName(s.dims[d].axes[i]);
    if (s.dims[d].blocks != 1) out += " x" + std::to_string(s.dims[d].blocks) + " blocks";
  }
  out += "}";
  if (!s.partial.empty()) {
    out += " partial(";
    for (size_t i = 0; i < s.partial.size(); ++i) out += (i ? "," : "") + axisName(s.partial[i]);
    out += ")";
  }
  return out;
}

TensorSharding shardingOf(mlir::Value v) {
  int64_t rank = rankOf(v);
  auto result = mlir::dyn_cast<mlir::OpResult>(v);
  if (!result) return TensorSharding::replicated(rank);
  auto list = TesselDialect::ShardingsAttrHelper(v.getContext()).getAttr(result.getOwner());
  if (!list) return TensorSharding::replicated(rank);
  return TensorSharding::fromAttr(mlir::dyn_cast<ShardingAttr>(list[result.getResultNumber()]), rank);
}

int16_t GridInfo::axis(llvm::StringRef name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int16_t>(i);
  return -1;
}

int64_t GridInfo::groupSize(llvm::ArrayRef<int16_t> axes) const {
  int64_t n = 1;
  for (int16_t a : axes) n *= sizes[a];
  return n;
}

mlir::FailureOr<GridInfo> findGrid(mlir::ModuleOp module, llvm::StringRef pass) {
  auto grid = module.lookupSymbol<mlir::shard::GridOp>("mesh");
  auto names = grid ? TesselDialect::AxisNamesAttrHelper(module.getContext()).getAttr(grid)
                    : mlir::ArrayAttr();
  if (!grid || !names) {
    module.emitError() << pass
                       << ": the module has no shard.grid @mesh with tessel.axis_names (the "
                          "plan's mesh)";
    return mlir::failure();
  }
  GridInfo info;
  info.ref = mlir::FlatSymbolRefAttr::get(grid.getSymNameAttr());
  info.sizes.assign(grid.getShape().begin(), grid.getShape().end());
  for (mlir::Attribute n : names) info.names.push_back(mlir::cast<mlir::StringAttr>(n).getValue());
  return info;
}

void setShardings(Operation* op, llvm::ArrayRef<TensorSharding> results,
                  mlir::FlatSymbolRefAttr grid) {
  llvm::SmallVector<mlir::Attribute> attrs;
  for (const TensorSharding& s : results) attrs.push_back(s.toAttr(op->getContext(), grid));
  TesselDialect::ShardingsAttrHelper(op->getContext())
      .setAttr(op, mlir::ArrayAttr::get(op->getContext(), attrs));
}

}  // namespace tessel
