// Shape rules of the tessel ops, in plain C++ (no MLIR).
//
// Promise: one definition of every op's result shape, shared by the op verifiers
// (TesselOps.cpp), the DSL (which computes result types before creating ops, so a bad
// shape in a model source becomes a diagnostic at the user's line rather than a crash),
// and the unit tests. Each rule returns the result shape or an error message that names
// the offending shapes in MLIR's notation ("4x32x64").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tessel::shapes {

using Shape = std::vector<int64_t>;
using ShapeRef = std::span<const int64_t>;

/// A result shape, or a non-empty error message.
struct Result {
  Shape shape;
  std::string error;
  bool ok() const { return error.empty(); }
  static Result fail(std::string message) { return {{}, std::move(message)}; }
};

/// "4x32x64"; "scalar" for rank 0.
std::string str(ShapeRef shape);

/// The element count, or nullopt if a dimension is negative or the count reaches 2^48
/// (256 Ti elements: beyond any tensor Tessel can hold, and far from int64 overflow).
std::optional<int64_t> numElements(ShapeRef shape);

/// matmul: lhs [b..., M, K] (or [b..., K, M] transposed), rhs [b..., K, N] (or [b..., N, K]
/// transposed) or rank-2 rhs shared across batches. Result [b..., M, N].
Result matmul(ShapeRef lhs, ShapeRef rhs, bool transposeLhs, bool transposeRhs);

/// add/sub/mul: equal shapes, or the shorter is a suffix of the longer. Result: the longer.
Result broadcast(ShapeRef lhs, ShapeRef rhs);

/// layer_norm: input [..., C] (rank >= 1), gamma [C], beta [C]. Result: input's shape.
Result layerNorm(ShapeRef input, ShapeRef gamma, ShapeRef beta);

/// rms_norm: input [..., C] (rank >= 1), weight [C]. Result: input's shape.
Result rmsNorm(ShapeRef input, ShapeRef weight);

/// The range of the epsilon of layer_norm, rms_norm, layer_norm_grad and rms_norm_grad:
/// [2^-126, 1]. The kernels add epsilon in f32 to a row's variance (mean square), the f64
/// reference in double. From 2^-126 (FLT_MIN, f32's smallest normal number) epsilon keeps its
/// value in f32 (a smaller one rounds to a subnormal or to 0, and an all-zero row becomes
/// 0 * inf = NaN where the reference gives 0), and the inverse deviation of an all-zero row,
/// at most 2^63, and its square, at most 2^126, stay finite in f32. Above 1 epsilon outweighs
/// the unit-scale variance the norm is meant to divide by (at 1e30 the output is ~0 and the
/// model never trains; past FLT_MAX it is inf in f32).
inline constexpr double kMinNormEpsilon = 0x1p-126;
inline constexpr double kMaxNormEpsilon = 1.0;

/// Empty if `epsilon` lies in [kMinNormEpsilon, kMaxNormEpsilon] (NaN does not), else the
/// message "epsilon must be in [1.1754943508222875e-38, 1] ..., got <epsilon>".
std::string normEpsilonError(double epsilon);

/// swiglu: gate and up of one shape (the gating is elementwise). Result: that shape.
Result swiglu(ShapeRef gate, ShapeRef up);

/// softmax: rank >= 1; with causal, rank >= 2 and the last two dimensions equal.
Result softmax(ShapeRef input, bool causal);

/// embedding: table [V, C], indices [...]. Result [..., C].
Result embedding(ShapeRef table, ShapeRef indices);

/// cross_entropy: logits [..., V] (rank >= 1), targets equal to logits without its last dim.
/// Result: scalar {}.
Result crossEntropy(ShapeRef logits, ShapeRef targets);

/// embedding_shard: table [Vl, C] holding rows [offset, offset + Vl) of a [vocab, C] table
/// (1 <= Vl <= vocab), indices [...]. Result [..., C].
Result embeddingShard(ShapeRef table, ShapeRef indices, int64_t vocab);

/// row_max (and the shape of every vocab-parallel row statistic): input [..., Vl] with
/// Vl >= 1. Result: [...], the input without its last dimension.
Result rowStatistic(ShapeRef input);

/// cross_entropy_from_stats: max, sum and target of one shape with at least one element.
/// Result: scalar {}.
Result crossEntropyFromStats(ShapeRef max, ShapeRef sum, ShapeRef target);

/// causal_attention: qkv [B, T, 3C], C divisible by numHeads > 0. Result [B, T, C].
Result causalAttention(ShapeRef qkv, int64_t numHeads);

/// rope: input [B, T, N * D] (rank 3) with N = numHeads > 0 heads of D > 0 channels, D even,
/// and a base theta that ropeThetaError accepts for D and T. Result: the input's shape.
Result rope(ShapeRef input, int64_t numHeads, double theta);

/// Empty if rope's base `theta` suits head size D = `headSize` (even, >= 2) and T =
/// `positions` (>= 1), else why not. The rule: theta is finite and > 0, and every inverse
/// frequency theta^(-2i/D) (0 <= i < D/2) and every angle t * theta^(-2i/D) (0 <= t < T), as
/// the kernels and the reference compute them in double, is finite and the frequencies > 0.
/// The extreme frequency is theta^(-(D-2)/D) (i = D/2 - 1; i = 0 gives 1), so that one and
/// (T-1) times it are checked. A theta below about 1e-300 breaks it (theta = 5e-324 with
/// D = 64 makes theta^(-62/64) inf, and the angle at t = 0 is 0 * inf = NaN); a large finite
/// theta never does (theta^(-(D-2)/D) >= 1 / DBL_MAX > 0).
std::string ropeThetaError(double theta, int64_t headSize, int64_t positions);

/// grouped_attention: q [B, T, NH * D], k and v [B, T, NKV * D] with NH = numHeads and
/// NKV = numKvHeads positive, NKV dividing NH and D > 0 (one D for q, k and v). Result: q's
/// shape.
Result groupedAttention(ShapeRef q, ShapeRef k, ShapeRef v, int64_t numHeads, int64_t numKvHeads);

/// reshape: same element count; every target dimension positive.
Result reshape(ShapeRef input, ShapeRef target);

/// transpose: perm is a permutation of [0, rank). Result[i] = input[perm[i]].
Result transpose(ShapeRef input, ShapeRef perm);

/// split: 0 <= axis < rank, parts > 0 divides input[axis]. Result: the shape of ONE part.
Result split(ShapeRef input, int64_t axis, int64_t parts);

/// concat: at least one input, all of one rank, equal except at axis. Result: joined shape.
Result concat(const std::vector<Shape>& inputs, int64_t axis);

/// reduce_sum / reduce_mean: dims distinct and in [0, rank). Result: input without dims.
Result reduce(ShapeRef input, ShapeRef dims);

/// broadcast: `dims` sorted, distinct positions in `result`, and `result` without them equals
/// `input`. Result: `result` itself (the rule only checks).
Result broadcast(ShapeRef input, ShapeRef result, ShapeRef dims);

/// all_gather over a group of `group` >= 1 ranks: 0 <= axis < rank. Result: input with
/// dimension `axis` multiplied by `group` (the concatenation of every rank's shard).
Result allGather(ShapeRef input, int64_t axis, int64_t group);

/// Whether `result` is the concatenation `gathered` (allGather's shape) with up to group - 1
/// trailing elements of padding dropped along `axis`: equal elsewhere, and
/// gathered[axis] - group < result[axis] <= gathered[axis]. That is the trimmed all-gather of
/// a dimension G padded to group x ceil(G / group) (fully sharded data parallelism of an
/// uneven first dimension): ceil(result[axis] / group) is the shard's size.
bool isTrimmedGather(ShapeRef gathered, ShapeRef result, int64_t axis, int64_t group);

/// reduce_scatter over `group` >= 1 ranks: 0 <= axis < rank. Result: input with dimension
/// `axis` G replaced by ceil(G / group): an uneven G is padded with zeros at its end to
/// group x ceil(G / group) before it is scattered (the transpose of the trimmed all-gather).
Result reduceScatter(ShapeRef input, int64_t axis, int64_t group);

/// all_to_all over `group` >= 1 ranks: both axes in [0, rank), input[splitAxis] divisible by
/// `group`. Result: input with dimension splitAxis divided by `group`, then dimension
/// concatAxis multiplied by it (equal axes: the input's shape).
Result allToAll(ShapeRef input, int64_t splitAxis, int64_t concatAxis, int64_t group);

}  // namespace tessel::shapes
