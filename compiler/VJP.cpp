// Vector-Jacobian products of the tessel ops (VJPOpInterface, TesselInterfaces.td).
//
// Each rule builds forward or backward ops at the builder's insertion point, with the
// location of the op being differentiated, so that errors in the backward pass still
// point at the user's line. Notation: dy is the gradient of the result, dX that of operand X.
#include "compiler/TesselDialect.h"

#include "compiler/Shapes.h"

#include "mlir/IR/Builders.h"

#include <algorithm>
#include <numeric>

using namespace mlir;

namespace tessel {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

RankedTensorType withShape(Value like, llvm::ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, typeOf(like).getElementType());
}

Value matmul(OpBuilder& b, Location loc, Value lhs, Value rhs, bool ta, bool tb) {
  auto l = typeOf(lhs).getShape(), r = typeOf(rhs).getShape();
  shapes::Result s = shapes::matmul({l.data(), l.size()}, {r.data(), r.size()}, ta, tb);
  assert(s.ok() && "VJP built an ill-shaped matmul");
  return MatmulOp::create(b, loc, withShape(lhs, s.shape), lhs, rhs, ta, tb);
}

/// Swaps the last two dimensions.
Value transposeLast2(OpBuilder& b, Location loc, Value x) {
  auto shape = typeOf(x).getShape();
  int64_t r = static_cast<int64_t>(shape.size());
  llvm::SmallVector<int64_t> perm(r), out(shape.begin(), shape.end());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[r - 1], perm[r - 2]);
  std::swap(out[r - 1], out[r - 2]);
  return TransposeOp::create(b, loc, withShape(x, out), x, b.getDenseI64ArrayAttr(perm));
}

Value reshape(OpBuilder& b, Location loc, Value x, llvm::ArrayRef<int64_t> shape) {
  return ReshapeOp::create(b, loc, withShape(x, shape), x);
}

/// Sums a broadcast gradient back to `target`'s shape (a suffix of dy's shape): the
/// transpose of suffix broadcasting is a reduce_sum over the leading dimensions.
Value sumToShape(OpBuilder& b, Location loc, Value dy, RankedTensorType target) {
  auto from = typeOf(dy).getShape();
  int64_t extra = static_cast<int64_t>(from.size()) - target.getRank();
  if (extra == 0) return dy;
  llvm::SmallVector<int64_t> dims(extra);
  std::iota(dims.begin(), dims.end(), 0);
  return ReduceSumOp::create(b, loc, target, dy, b.getDenseI64ArrayAttr(dims));
}

Value scale(OpBuilder& b, Location loc, Value x, double factor) {
  return ScaleOp::create(b, loc, x.getType(), x, b.getF64FloatAttr(factor));
}

}  // namespace

LogicalResult MatmulOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                 llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);
  Value dc = dy[0];
  if (!dc) return success();
  Location loc = getLoc();
  Value a = getLhs(), w = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  // With A' = op(A), B' = op(B): dA' = dC B'^T and dB' = A'^T dC.
  Value da = matmul(b, loc, dc, w, false, !tb);
  d[0] = ta ? transposeLast2(b, loc, da) : da;
  int64_t aRank = typeOf(a).getRank(), bRank = typeOf(w).getRank();
  if (bRank > 2 || aRank == 2) {
    d[1] = tb ? matmul(b, loc, dc, a, true, ta) : matmul(b, loc, a, dc, !ta, false);
    return success();
  }
  // A rank-2 B shared by every batch: fold the batch into the rows and contract over them.
  Value a2 = ta ? transposeLast2(b, loc, a) : a;  // [batch..., M, K]
  auto as = typeOf(a2).getShape(), cs = typeOf(dc).getShape();
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < static_cast<int64_t>(as.size()); ++i) rows *= as[i];
  a2 = reshape(b, loc, a2, {rows, as.back()});
  Value dc2 = reshape(b, loc, dc, {rows, cs.back()});
  d[1] = tb ? matmul(b, loc, dc2, a2, true, false) : matmul(b, loc, a2, dc2, true, false);
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                              llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);
  if (!dy[0]) return success();
  d[0] = sumToShape(b, getLoc(), dy[0], typeOf(getLhs()));
  d[1] = sumToShape(b, getLoc(), dy[0], typeOf(getRhs()));
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                              llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);
  if (!dy[0]) return success();
  d[0] = sumToShape(b, getLoc(), dy[0], typeOf(getLhs()));
  d[1] = sumToShape(b, getLoc(), scale(b, getLoc(), dy[0], -1.0), typeOf(getRhs()));
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                              llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);
  if (!dy[0]) return success();
  Location loc = getLoc();
  // dy has the result's (longer) shape; each operand broadcasts against it.
  Value dl = MulOp::create(b, loc, dy[0].getType(), dy[0], getRhs());
  Value dr = MulOp::create(b, loc, dy[0].getType(), dy[0], getLhs());
  d[0] = sumToShape(b, loc, dl, typeOf(getLhs()));
  d[1] = sumToShape(b, loc, dr, typeOf(getRhs()));
  return success();
}

LogicalResult ScaleOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, dy[0] ? scale(b, getLoc(), dy[0], getFactor().convertToDouble()) : Value());
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                               llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, dy[0] ? GeluGradOp::create(b, getLoc(), getType(), getInput(), dy[0]).getResult()
                    : Value());
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                               llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, dy[0] ? ReluGradOp::create(b, getLoc(), getType(), getInput(), dy[0]).getResult()
                    : Value());
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                               llvm::SmallVectorImpl<Value>& d) {
  // The gradient takes the input's element type: a bf16 activation's gradient reaches an f32
  // master weight as f32 (exact: every bf16 value is an f32 value).
  d.assign(1, dy[0] ? CastOp::create(b, getLoc(), getInput().getType(), dy[0]).getResult()
                    : Value());
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                    llvm::SmallVectorImpl<Value>& d) {
  d.assign(3, nullptr);
  if (!dy[0]) return success();
  auto g = LayerNormGradOp::create(b, getLoc(), getInput().getType(), getGamma().getType(),
                                   getBeta().getType(), getInput(), getGamma(), dy[0],
                                   getEpsilonAttr());
  d[0] = g.getDinput();
  d[1] = g.getDgamma();
  d[2] = g.getDbeta();
  return success();
}

LogicalResult SoftmaxOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                  llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, dy[0] ? SoftmaxGradOp::create(b, getLoc(), getType(), getResult(), dy[0])
                          .getResult()
                    : Value());
  return success();
}

LogicalResult EmbeddingOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                    llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);  // indices are integers: no gradient
  if (dy[0])
    d[0] = EmbeddingGradOp::create(b, getLoc(), getTable().getType(), getIndices(), dy[0]);
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                       llvm::SmallVectorImpl<Value>& d) {
  d.assign(2, nullptr);  // targets are integers: no gradient
  if (dy[0])
    d[0] = CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(), getLogits(),
                                      getTargets(), dy[0]);
  return success();
}

LogicalResult ReshapeOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                  llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, dy[0] ? ReshapeOp::create(b, getLoc(), getInput().getType(), dy[0]).getResult()
                    : Value());
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                    llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  auto perm = getPermutation();
  llvm::SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  d[0] = TransposeOp::create(b, getLoc(), getInput().getType(), dy[0],
                             b.getDenseI64ArrayAttr(inverse));
  return success();
}

LogicalResult SplitOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (llvm::all_of(dy, [](Value v) { return !v; })) return success();
  llvm::SmallVector<Value> parts;
  for (auto [grad, result] : llvm::zip(dy, getResults()))
    parts.push_back(grad ? grad
                         : ConstantOp::create(b, getLoc(), result.getType(), b.getF64FloatAttr(0.0))
                               .getResult());
  d[0] = ConcatOp::create(b, getLoc(), getInput().getType(), parts, getAxisAttr());
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                 llvm::SmallVectorImpl<Value>& d) {
  d.assign(getNumOperands(), nullptr);
  if (!dy[0]) return success();
  llvm::SmallVector<Type> types;
  for (Value v : getInputs()) types.push_back(v.getType());
  if (!llvm::all_equal(types))
    return emitOpError() << "has no VJP rule for inputs of unequal sizes along axis "
                         << getAxis() << " (split produces equal parts only)";
  auto split = SplitOp::create(b, getLoc(), types, dy[0], getAxisAttr());
  for (unsigned i = 0; i < getNumOperands(); ++i) d[i] = split.getResult(i);
  return success();
}

namespace {
llvm::SmallVector<int64_t> sorted(llvm::ArrayRef<int64_t> dims) {
  llvm::SmallVector<int64_t> s(dims.begin(), dims.end());
  std::sort(s.begin(), s.end());
  return s;
}
}  // namespace

LogicalResult ReduceSumOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                    llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (dy[0])
    d[0] = BroadcastOp::create(b, getLoc(), getInput().getType(), dy[0],
                               b.getDenseI64ArrayAttr(sorted(getDims())));
  return success();
}

LogicalResult ReduceMeanOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                     llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  int64_t count = 1;
  for (int64_t dim : getDims()) count *= getInput().getType().getDimSize(dim);
  Value spread = BroadcastOp::create(b, getLoc(), getInput().getType(), dy[0],
                                     b.getDenseI64ArrayAttr(sorted(getDims())));
  d[0] = scale(b, getLoc(), spread, 1.0 / static_cast<double>(count));
  return success();
}

LogicalResult BroadcastOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                    llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, dy[0] ? ReduceSumOp::create(b, getLoc(), getInput().getType(), dy[0], getDimsAttr())
                          .getResult()
                    : Value());
  return success();
}

//===----------------------------------------------------------------------===//
// The collectives' transpose table (DESIGN.md: one table of collectives).
//
// A collective is a linear map over the group's ranks, so its VJP is its transpose. A
// tensor on the group is either one value held by every rank (replicated: counted once) or
// one value per rank (split, or partial: a pending sum). With N the group size:
//
//   forward                                 backward (the op the VJP builds)
//   all_gather gather_axis = a          ->  reduce_scatter sum scatter_axis = a
//     (split in; each rank's copy of the result feeds its own computation, so the
//      gradients arrive one per rank and are summed)
//   reduce_scatter sum scatter_axis = a ->  all_gather gather_axis = a (partial in, split out)
//   reduce_scatter avg scatter_axis = a ->  all_gather gather_axis = a, then scale 1/N
//   all_to_all split = a, concat = c    ->  all_to_all split = c, concat = a
//   all_reduce sum (Megatron g)         ->  identity (partial in, replicated out)
//   all_reduce avg                      ->  scale 1/N
//   all_reduce max                      ->  none (an error: its users are stop-gradient)
//   replicate (Megatron f)              ->  all_reduce sum (replicated in, per-rank out)
//   send <-> recv                       (future: pipeline stages; no ops yet)
//
// The asynchronous start/wait forms have no VJP: passes after autodiff place them.
// test/unit/CollectiveTransposeTest.cpp checks <A x, y> = <x, A^T y> for every row.
//===----------------------------------------------------------------------===//

LogicalResult AllGatherOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                    llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  d[0] = ReduceScatterOp::create(b, getLoc(), getInput().getType(), dy[0],
                                 ReduceKindAttr::get(b.getContext(), ReduceKind::sum),
                                 getGridAttr(), getGridAxesAttr(), getGatherAxisAttr());
  return success();
}

LogicalResult ReduceScatterOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                        llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  Value gathered = AllGatherOp::create(b, getLoc(), getInput().getType(), dy[0], getGridAttr(),
                                       getGridAxesAttr(), getScatterAxisAttr());
  switch (getReduce()) {
    case ReduceKind::sum:
      d[0] = gathered;
      return success();
    case ReduceKind::avg:
      d[0] = scale(b, getLoc(), gathered, 1.0 / static_cast<double>(getGroupSize()));
      return success();
    case ReduceKind::max:
      break;  // refused by the verifier
  }
  return emitOpError() << "a reduce_scatter max has no gradient";
}

LogicalResult AllToAllOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                   llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  d[0] = AllToAllOp::create(b, getLoc(), getInput().getType(), dy[0], getGridAttr(),
                            getGridAxesAttr(), getConcatAxisAttr(), getSplitAxisAttr());
  return success();
}

LogicalResult AllReduceOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                    llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  switch (getReduce()) {
    case ReduceKind::sum:
      // y = sum_r x_r: every addend's gradient is dy itself (identity).
      d[0] = dy[0];
      return success();
    case ReduceKind::avg:
      d[0] = scale(b, getLoc(), dy[0], 1.0 / static_cast<double>(getGroupSize()));
      return success();
    case ReduceKind::max:
      break;
  }
  return emitOpError() << "an all-reduce max has no gradient here (its result must not reach "
                          "the loss through a differentiable path)";
}

LogicalResult ReplicateOp::buildVJP(OpBuilder& b, llvm::ArrayRef<Value> dy,
                                    llvm::SmallVectorImpl<Value>& d) {
  d.assign(1, nullptr);
  if (!dy[0]) return success();
  // A bf16 gradient (mixed precision) is summed in f32, as the forward all-reduces are.
  Value g = dy[0];
  auto type = mlir::cast<RankedTensorType>(g.getType());
  if (type.getElementType().isBF16()) g = CastOp::create(b, getLoc(), type.clone(b.getF32Type()), g);
  Value sum = AllReduceOp::create(b, getLoc(), g, ReduceKindAttr::get(b.getContext(), ReduceKind::sum),
                                  getGridAttr(), getGridAxesAttr());
  d[0] = sum.getType() == type ? sum : CastOp::create(b, getLoc(), type, sum).getResult();
  return success();
}

}  // namespace tessel
