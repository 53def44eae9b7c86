// Internal to the kernel emitters (CppEmitterAttention*.cpp, CudaEmitterAttention*.cpp): the
// description, arguments and constants of tessel.rope's kernel (compiler/TesselAttentionOps.td)
// and of the fused attention kernels (causal_attention, grouped_attention and their
// gradients) for either emitter's writer, so that the C++ and CUDA twins take the same
// arguments in the same order and compute the angle the same way. Not part of the public API.
#pragma once

#include "codegen/CppEmitterInternal.h"

#include <fmt/format.h>

#include <cmath>

namespace tessel::kernelcommon {

/// Declares `out` and `inp` [B, T, N * D] and the constants T, NH (heads), D (head size),
/// HALF (D / 2) and ROWS (B * T). The angle of pair i at position t is
/// `ropeAngleExpr("t", "i")`, in double as the reference computes it.
template <class Writer>
void declareRope(Writer& w) {
  auto op = mlir::cast<RopeOp>(w.op());
  std::vector<int64_t> shape = cppgen::shapeOf(op.getInput());
  int64_t heads = static_cast<int64_t>(op.getNumHeads()), d = shape[2] / heads;
  w.describe("out = inp with each pair (x[h*D + i], x[h*D + i + D/2]) of each head");
  w.describe(fmt::format("turned by {}a, a = t * theta^(-2i/D), t the position (rotary embedding)",
                         op.getInverse() ? "-" : ""));
  w.output("out", op.getResult(), {"B", "T", "C"});
  w.input("inp", op.getInput(), {"B", "T", "C"});
  w.constant("T", shape[1], "positions");
  w.constant("NH", heads, "heads");
  w.constant("D", d, "head size");
  w.constant("HALF", d / 2, "rotated pairs per head");
  w.constant("ROWS", shape[0] * shape[1], "rows [b, t]");
}

/// The angle of pair `i` at position `t` (int expressions) of `op`, a double expression:
/// t * theta^(-2i/D), negated for the inverse rotation. theta is written with 17 digits, so
/// it reads back as the op's double.
inline std::string ropeAngleExpr(RopeOp op, std::string_view t, std::string_view i) {
  return fmt::format("{}static_cast<double>({}) * pow({:.17g}, -2.0 * static_cast<double>({}) / D)",
                     op.getInverse() ? "-" : "", t, op.getTheta().convertToDouble(), i);
}

/// Where q, k and v of one attention op live: one packed [B, T, 3C] operand (causal
/// attention: q, k, v at column offsets 0, C, 2C, NKV = NH) or three operands; row strides
/// and column offsets in elements. The gradients are laid out as the operands.
struct AttentionLayout {
  int64_t batch = 0, seq = 0, heads = 0, kvHeads = 0, headSize = 0;
  int64_t qStride = 0, kvStride = 0, qOffset = 0, kOffset = 0, vOffset = 0;
};

/// The layout of a causal_attention, grouped_attention or either's gradient.
inline AttentionLayout attentionLayout(mlir::Operation* op) {
  auto packed = [](mlir::Value qkv, int64_t heads) {
    std::vector<int64_t> s = cppgen::shapeOf(qkv);
    int64_t c = s[2] / 3;
    return AttentionLayout{s[0], s[1], heads, heads, c / heads, 3 * c, 3 * c, 0, c, 2 * c};
  };
  auto separate = [](mlir::Value q, mlir::Value k, int64_t heads, int64_t kvHeads) {
    std::vector<int64_t> s = cppgen::shapeOf(q);
    return AttentionLayout{s[0], s[1], heads, kvHeads, s[2] / heads, s[2], cppgen::shapeOf(k)[2], 0, 0, 0};
  };
  if (auto a = mlir::dyn_cast<CausalAttentionOp>(op)) return packed(a.getQkv(), static_cast<int64_t>(a.getNumHeads()));
  if (auto a = mlir::dyn_cast<CausalAttentionGradOp>(op))
    return packed(a.getQkv(), static_cast<int64_t>(a.getNumHeads()));
  if (auto a = mlir::dyn_cast<GroupedAttentionOp>(op))
    return separate(a.getQ(), a.getK(), static_cast<int64_t>(a.getNumHeads()), static_cast<int64_t>(a.getNumKvHeads()));
  auto g = mlir::cast<GroupedAttentionGradOp>(op);
  return separate(g.getQ(), g.getK(), static_cast<int64_t>(g.getNumHeads()), static_cast<int64_t>(g.getNumKvHeads()));
}

/// Declares the arguments of an attention op's kernel (results, then operands) and the
/// constants B, T, NH, NKV, G (= NH / NKV), D, QS, KS (row strides of q and of k, v), QO, KO,
/// VO (column offsets) and SCALE (1 / sqrt(D)), and returns the code that names the operands
/// qp, kp, vp (and for a gradient the results dqp, dkp, dvp; the incoming gradient is `dy`,
/// the forward result `out`), which the bodies use with the offsets.
template <class Writer>
std::string declareAttention(Writer& w) {
  mlir::Operation* op = w.op();
  AttentionLayout l = attentionLayout(op);
  std::string names;
  if (auto a = mlir::dyn_cast<CausalAttentionOp>(op)) {
    w.describe("out = causal attention of each head of the packed qkv [q | k | v]:");
    w.output("out", a.getResult(), {"B", "T", "C"});
    w.input("qkv", a.getQkv(), {"B", "T", "3C"});
    names = "const auto* qp = qkv;\nconst auto* kp = qkv;\nconst auto* vp = qkv;\n";
  } else if (auto g = mlir::dyn_cast<GroupedAttentionOp>(op)) {
    w.describe("out = grouped-query causal attention (query head h uses kv head h / G):");
    w.output("out", g.getResult(), {"B", "T", "C"});
    w.input("q", g.getQ(), {"B", "T", "C"});
    w.input("k", g.getK(), {"B", "T", "CKV"});
    w.input("v", g.getV(), {"B", "T", "CKV"});
    names = "const auto* qp = q;\nconst auto* kp = k;\nconst auto* vp = v;\n";
  } else if (auto a = mlir::dyn_cast<CausalAttentionGradOp>(op)) {
    w.describe("dqkv = the gradient of causal_attention's packed qkv given dy:");
    w.output("dqkv", a.getResult(), {"B", "T", "3C"});
    w.input("qkv", a.getQkv(), {"B", "T", "3C"});
    w.input("dy", a.getGrad(), {"B", "T", "C"});
    names = "const auto* qp = qkv;\nconst auto* kp = qkv;\nconst auto* vp = qkv;\n"
            "auto* dqp = dqkv;\nauto* dkp = dqkv;\nauto* dvp = dqkv;\n";
  } else {
    auto gg = mlir::cast<GroupedAttentionGradOp>(op);
    w.describe("dq, dk, dv = the gradients of grouped_attention's q, k, v given dy:");
    w.output("dq", gg.getDq(), {"B", "T", "C"});
    w.output("dk", gg.getDk(), {"B", "T", "CKV"});
    w.output("dv", gg.getDv(), {"B", "T", "CKV"});
    w.input("q", gg.getQ(), {"B", "T", "C"});
    w.input("k", gg.getK(), {"B", "T", "CKV"});
    w.input("v", gg.getV(), {"B", "T", "CKV"});
    w.input("dy", gg.getGrad(), {"B", "T", "C"});
    names = "const auto* qp = q;\nconst auto* kp = k;\nconst auto* vp = v;\n"
            "auto* dqp = dq;\nauto* dkp = dk;\nauto* dvp = dv;\n";
  }
  if (mlir::isa<CausalAttentionOp, GroupedAttentionOp>(op)) {
    w.describe("y_h = softmax_causal(q_h k^T / sqrt(D)) v per (b, h), max-subtracted, f32 inside;");
    w.describe("read and written in place in the [B, T, heads * D] layouts (no transposes).");
  } else {
    w.describe("P recomputed from q and k; ds = P * (dy v^T - rowsum(P * dy v^T)) / sqrt(D),");
    w.describe("dq = ds k, dk = sum over the G heads of ds^T q, dv = sum of P^T dy, each sum");
    w.describe("in a fixed order (no atomics).");
  }
  w.constant("B", l.batch, "batch");
  w.constant("T", l.seq, "positions");
  w.constant("NH", l.heads, "query heads");
  w.constant("NKV", l.kvHeads, "key/value heads");
  w.constant("G", l.heads / l.kvHeads, "query heads per key/value head");
  w.constant("D", l.headSize, "head size");
  w.constant("QS", l.qStride, "elements between rows of q");
  w.constant("KS", l.kvStride, "elements between rows of k and v");
  w.constant("QO", l.qOffset, "column of q's first channel");
  w.constant("KO", l.kOffset, "column of k's first channel");
  w.constant("VO", l.vOffset, "column of v's first channel");
  w.constantF("SCALE", 1.0 / std::sqrt(static_cast<double>(l.headSize)), "1 / sqrt(D)");
  return names;
}

}  // namespace tessel::kernelcommon
