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

}  // namespace tessel::ref
