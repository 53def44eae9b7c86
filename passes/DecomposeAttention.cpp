//===- DecomposeAttention.cpp - causal_attention into primitives ---------------===//
//
// Algorithm (see passes/Passes.td): for each tessel.causal_attention on qkv [B, T, 3C]
// with NH heads (HS = C / NH):
//   1. q, k, v = split(qkv, axis 2, 3 parts)                       [B, T, C] each
//   2. each -> reshape [B, T, NH, HS] -> transpose [0, 2, 1, 3]     [B, NH, T, HS]
//   3. s = scale(matmul(q, k, transpose_rhs), 1/sqrt(HS))           [B, NH, T, T]
//   4. y = matmul(softmax(s, causal), v)                            [B, NH, T, HS]
//   5. y -> transpose [0, 2, 1, 3] -> reshape [B, T, C]
// All new ops take the attention op's location.
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

void decompose(CausalAttentionOp op) {
  mlir::OpBuilder b(op);
  mlir::Location loc = op.getLoc();
  auto qkvType = op.getQkv().getType();
  mlir::Type elem = qkvType.getElementType();
  int64_t batch = qkvType.getDimSize(0), seq = qkvType.getDimSize(1);
  int64_t channels = qkvType.getDimSize(2) / 3;
  int64_t heads = static_cast<int64_t>(op.getNumHeads());
  int64_t headSize = channels / heads;
  auto type = [&](llvm::ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, elem); };
  llvm::SmallVector<int64_t> swap12{0, 2, 1, 3};

  auto parts = SplitOp::create(b, loc,
                               mlir::TypeRange{type({batch, seq, channels}),
                                               type({batch, seq, channels}),
                                               type({batch, seq, channels})},
                               op.getQkv(), b.getI64IntegerAttr(2));
  auto toHeads = [&](Value x) -> Value {
    Value r = ReshapeOp::create(b, loc, type({batch, seq, heads, headSize}), x);
    return TransposeOp::create(b, loc, type({batch, heads, seq, headSize}), r,
                               b.getDenseI64ArrayAttr(swap12));
  };
  Value q = toHeads(parts.getResult(0));
  Value k = toHeads(parts.getResult(1));
  Value v = toHeads(parts.getResult(2));
  auto scoresType = type({batch, heads, seq, seq});
  Value scores = MatmulOp::create(b, loc, scoresType, q, k, /*transpose_lhs=*/false,
                                  /*transpose_rhs=*/true);
  scores = ScaleOp::create(b, loc, scoresType, scores,
                           b.getF64FloatAttr(1.0 / std::sqrt(static_cast<double>(headSize))));
  Value probs = SoftmaxOp::create(b, loc, scoresType, scores, /*causal=*/true);
  Value y = MatmulOp::create(b, loc, type({batch, heads, seq, headSize}), probs, v,
                             /*transpose_lhs=*/false, /*transpose_rhs=*/false);
  y = TransposeOp::create(b, loc, type({batch, seq, heads, headSize}), y,
                          b.getDenseI64ArrayAttr(swap12));
  y = ReshapeOp::create(b, loc, op.getType(), y);
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
    llvm::SmallVector<CausalAttentionOp> ops;
    getOperation().walk([&](CausalAttentionOp op) { ops.push_back(op); });
    for (CausalAttentionOp op : ops) decompose(op);
  }
};

}  // namespace
}  // namespace tessel
