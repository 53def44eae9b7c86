//===- DecomposeAttention.cpp - causal and grouped attention into primitives ---===//
//
// Optional since the fused attention kernels (codegen/CppEmitterAttentionFused.cpp): the
// pipeline runs this pass only with PipelineOptions::decomposeAttention.
//
// Algorithm (see passes/Passes.td): for each tessel.causal_attention on qkv [B, T, 3C]
// with NH heads (HS = C / NH):
//   1. q, k, v = split(qkv, axis 2, 3 parts)                       [B, T, C] each
//   2. each -> reshape [B, T, NH, HS] -> transpose [0, 2, 1, 3]     [B, NH, T, HS]
//   3. s = scale(matmul(q, k, transpose_rhs), 1/sqrt(HS))           [B, NH, T, T]
//   4. y = matmul(softmax(s, causal), v)                            [B, NH, T, HS]
//   5. y -> transpose [0, 2, 1, 3] -> reshape [B, T, C]
// For each tessel.grouped_attention of q [B, T, NH * D] and k, v [B, T, NKV * D], with
// G = NH / NKV (query head h = g * G + j uses kv head g; k and v are never repeated):
//   1. q -> reshape [B, T, NH, D] -> transpose [B, NH, T, D] -> reshape [B, NKV, G*T, D];
//      k, v -> reshape [B, T, NKV, D] -> transpose [B, NKV, T, D]
//   2. s = scale(matmul(q, k, transpose_rhs), 1/sqrt(D))            [B, NKV, G*T, T]
//   3. p = reshape [B, NKV, G, T, T] -> softmax causal -> reshape   [B, NKV, G*T, T]
//   4. y = matmul(p, v) [B, NKV, G*T, D] -> reshape [B, NH, T, D] -> transpose [B, T, NH, D]
//      -> reshape [B, T, NH * D]
// The G*T reshapes are left out when G = 1 (multi-head attention, the steps of the first
// case after its split). All new ops take the attention op's location.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "passes/PipelineStage.h"

#include "mlir/IR/Builders.h"

#include <cmath>

#define DEBUG_TYPE "tessel-decompose-attention"

namespace tessel {
#define GEN_PASS_DEF_DECOMPOSEATTENTION
#include "passes/Passes.h.inc"

namespace {

using mlir::RankedTensorType;
using mlir::Value;

/// Causal attention of q [B, T, NH * D] against k, v [B, T, NKV * D] (NKV divides NH, every
/// query head h = g * G + j uses kv head g), built at `b`'s insertion point as the algorithm
/// above says. Returns y [B, T, NH * D] of type `resultType`.
Value attend(mlir::OpBuilder& b, mlir::Location loc, Value q, Value k, Value v, int64_t heads,
             int64_t kvHeads, RankedTensorType resultType) {
  auto qType = mlir::cast<RankedTensorType>(q.getType());
  mlir::Type elem = qType.getElementType();
  int64_t batch = qType.getDimSize(0), seq = qType.getDimSize(1);
  int64_t headSize = qType.getDimSize(2) / heads, group = heads / kvHeads;
  auto type = [&](llvm::ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, elem); };
  llvm::SmallVector<int64_t> swap12{0, 2, 1, 3};
  // A reshape only where G > 1 changes the shape (G = 1 is plain multi-head attention).
  auto regroup = [&](Value x, llvm::ArrayRef<int64_t> shape) -> Value {
    if (group == 1) return x;
    return ReshapeOp::create(b, loc, type(shape), x);
  };
  auto toHeads = [&](Value x, int64_t n) -> Value {
    Value r = ReshapeOp::create(b, loc, type({batch, seq, n, headSize}), x);
    return TransposeOp::create(b, loc, type({batch, n, seq, headSize}), r,
                               b.getDenseI64ArrayAttr(swap12));
  };
  Value qh = regroup(toHeads(q, heads), {batch, kvHeads, group * seq, headSize});
  Value kh = toHeads(k, kvHeads);
  Value vh = toHeads(v, kvHeads);
  auto scoresType = type({batch, kvHeads, group * seq, seq});
  Value scores = MatmulOp::create(b, loc, scoresType, qh, kh, /*transpose_lhs=*/false,
                                  /*transpose_rhs=*/true);
  scores = ScaleOp::create(b, loc, scoresType, scores,
                           b.getF64FloatAttr(1.0 / std::sqrt(static_cast<double>(headSize))));
  // The causal mask needs square [T, T] blocks: query row j * T + t of a group is position t.
  scores = regroup(scores, {batch, kvHeads, group, seq, seq});
  Value probs = SoftmaxOp::create(b, loc, scores.getType(), scores, /*causal=*/true);
  probs = regroup(probs, {batch, kvHeads, group * seq, seq});
  Value y = MatmulOp::create(b, loc, type({batch, kvHeads, group * seq, headSize}), probs, vh,
                             /*transpose_lhs=*/false, /*transpose_rhs=*/false);
  y = regroup(y, {batch, heads, seq, headSize});
  y = TransposeOp::create(b, loc, type({batch, seq, heads, headSize}), y,
                          b.getDenseI64ArrayAttr(swap12));
  return ReshapeOp::create(b, loc, resultType, y);
}

void decompose(CausalAttentionOp op) {
  mlir::OpBuilder b(op);
  mlir::Location loc = op.getLoc();
  auto qkvType = op.getQkv().getType();
  int64_t channels = qkvType.getDimSize(2) / 3;
  auto part = RankedTensorType::get({qkvType.getDimSize(0), qkvType.getDimSize(1), channels},
                                    qkvType.getElementType());
  auto parts = SplitOp::create(b, loc, mlir::TypeRange{part, part, part}, op.getQkv(),
                               b.getI64IntegerAttr(2));
  int64_t heads = static_cast<int64_t>(op.getNumHeads());
  Value y = attend(b, loc, parts.getResult(0), parts.getResult(1), parts.getResult(2), heads,
                   heads, op.getType());
  op.getResult().replaceAllUsesWith(y);
  op.erase();
}

void decompose(GroupedAttentionOp op) {
  mlir::OpBuilder b(op);
  Value y = attend(b, op.getLoc(), op.getQ(), op.getK(), op.getV(),
                   static_cast<int64_t>(op.getNumHeads()),
                   static_cast<int64_t>(op.getNumKvHeads()), op.getType());
  op.getResult().replaceAllUsesWith(y);
  op.erase();
}

struct DecomposeAttentionPass : impl::DecomposeAttentionBase<DecomposeAttentionPass> {
  void runOnOperation() override {
    // Stage: before fusion, so that the scale and softmax it produces are fused too.
    if (mlir::failed(PipelineStage(getOperation())
                         .require(DEBUG_TYPE, getOperation(), {}, {StageFact::Fused},
                                  "before tessel-autodiff and tessel-fuse")))
      return signalPassFailure();
    llvm::SmallVector<mlir::Operation*> ops;
    getOperation().walk([&](mlir::Operation* op) {
      if (mlir::isa<CausalAttentionOp, GroupedAttentionOp>(op)) ops.push_back(op);
    });
    for (mlir::Operation* op : ops) {
      if (auto attn = mlir::dyn_cast<CausalAttentionOp>(op)) decompose(attn);
      else decompose(mlir::cast<GroupedAttentionOp>(op));
    }
  }
};

}  // namespace
}  // namespace tessel
