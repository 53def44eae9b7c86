// Reference kernels of the Llama-style attention ops (compiler/TesselAttentionOps.td): rotary
// position embeddings and grouped-query causal attention, in f64 with plain loops, as
// Reference.h promises for every op. They throw ShapeError naming the offending shapes.
#pragma once

#include "runtime/reference/Reference.h"

namespace tessel::ref {

/// Rotary position embedding (RoFormer; "rotate half" pairing). x: [B, T, N * D] with
/// N = numHeads heads of D channels, D even. For head h, i < D/2 and position t (dimension 1),
/// a = t * theta^(-2i/D) (the negated angle with `inverse`), x1 = x[h*D + i],
/// x2 = x[h*D + i + D/2]: y1 = x1 cos a - x2 sin a, y2 = x2 cos a + x1 sin a.
/// Result: x's shape. Throws ShapeError on a bad shape or theta <= 0.
Tensor rope(const Tensor& x, int64_t numHeads, double theta, bool inverse);

/// Grouped-query causal self-attention (GQA). q: [B, T, NH * D], k and v: [B, T, NKV * D]
/// with NKV = numKvHeads dividing NH = numHeads. Query head h uses key/value head
/// h / (NH / NKV): y_h = softmax_causal(q_h k^T / sqrt(D)) v, max-subtracted.
/// Result: [B, T, NH * D], heads in order.
Tensor groupedAttention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t numHeads,
                        int64_t numKvHeads);

/// The gradients of groupedAttention's q, k and v (in that order, shapes of q, k, v) given
/// dy [B, T, NH * D], the gradient of its result: per query head h with kv head g = h / G,
/// P = softmax_causal(q_h k_g^T / sqrt(D)) recomputed, dP = dy_h v_g^T,
/// dS = P * (dP - rowsum(P * dP)), dq_h = dS k_g / sqrt(D), and dk_g, dv_g the sums over
/// the G heads of g of dS^T q_h / sqrt(D) and P^T dy_h. Throws ShapeError as
/// groupedAttention does, or when dy is not the result's shape.
std::vector<Tensor> groupedAttentionGrad(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& dy, int64_t numHeads, int64_t numKvHeads);

/// The gradient of causalAttention's qkv [B, T, 3C] (q | k | v packed, numHeads heads each)
/// given dy [B, T, C]: groupedAttentionGrad with NKV = NH, packed as qkv. Throws ShapeError
/// on a bad shape.
Tensor causalAttentionGrad(const Tensor& qkv, const Tensor& dy, int64_t numHeads);

}  // namespace tessel::ref
