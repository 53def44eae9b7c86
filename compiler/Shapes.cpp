// Shape rules of the tessel ops; see Shapes.h.
#include "compiler/Shapes.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessel::shapes {

std::string str(ShapeRef shape) {
  if (shape.empty()) return "scalar";
  return fmt::format("{}", fmt::join(shape, "x"));
}

std::optional<int64_t> numElements(ShapeRef shape) {
  constexpr int64_t kLimit = int64_t{1} << 48;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > kLimit / d) return std::nullopt;
    n *= d;
  }
  if (n >= kLimit) return std::nullopt;
  return n;
}

namespace {
bool equal(ShapeRef a, ShapeRef b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
/// "batch 4x2", or "no batch dimensions" (str() would say "scalar", which misleads here).
std::string batchStr(ShapeRef batch) {
  return batch.empty() ? "no batch dimensions" : "batch " + str(batch);
}
}  // namespace

Result matmul(ShapeRef lhs, ShapeRef rhs, bool transposeLhs, bool transposeRhs) {
  if (lhs.size() < 2 || rhs.size() < 2)
    return Result::fail(fmt::format("operands must have rank >= 2, got lhs {} and rhs {}",
                                    str(lhs), str(rhs)));
  size_t lr = lhs.size(), rr = rhs.size();
  int64_t m = transposeLhs ? lhs[lr - 1] : lhs[lr - 2];
  int64_t kl = transposeLhs ? lhs[lr - 2] : lhs[lr - 1];
  int64_t kr = transposeRhs ? rhs[rr - 1] : rhs[rr - 2];
  int64_t n = transposeRhs ? rhs[rr - 2] : rhs[rr - 1];
  if (kl != kr)
    return Result::fail(fmt::format(
        "contracting dimensions differ: lhs {}{} has K={}, rhs {}{} has K={}", str(lhs),
        transposeLhs ? " (transposed)" : "", kl, str(rhs), transposeRhs ? " (transposed)" : "",
        kr));
  ShapeRef lhsBatch = lhs.first(lr - 2);
  if (rr > 2 && !equal(lhsBatch, rhs.first(rr - 2)))
    return Result::fail(fmt::format("batch dimensions differ: lhs {} has {}, rhs {} has {} (a "
                                    "shared rhs must have rank 2)",
                                    str(lhs), batchStr(lhsBatch), str(rhs),
                                    batchStr(rhs.first(rr - 2))));
  Shape out(lhsBatch.begin(), lhsBatch.end());
  out.push_back(m);
  out.push_back(n);
  return {out, ""};
}

Result broadcast(ShapeRef lhs, ShapeRef rhs) {
  ShapeRef longer = lhs.size() >= rhs.size() ? lhs : rhs;
  ShapeRef shorter = lhs.size() >= rhs.size() ? rhs : lhs;
  if (!equal(longer.last(shorter.size()), shorter))
    return Result::fail(fmt::format(
        "shapes {} and {} do not broadcast: the shorter shape must equal the trailing "
        "dimensions of the longer one",
        str(lhs), str(rhs)));
  return {Shape(longer.begin(), longer.end()), ""};
}

Result layerNorm(ShapeRef input, ShapeRef gamma, ShapeRef beta) {
  if (input.empty()) return Result::fail("input must have rank >= 1, got a scalar");
  int64_t c = input.back();
  if (gamma.size() != 1 || gamma[0] != c)
    return Result::fail(fmt::format("gamma must be [C] = {} for input {}, got {}", c,
                                    str(input), str(gamma)));
  if (beta.size() != 1 || beta[0] != c)
    return Result::fail(fmt::format("beta must be [C] = {} for input {}, got {}", c,
                                    str(input), str(beta)));
  return {Shape(input.begin(), input.end()), ""};
}

std::string normEpsilonError(double epsilon) {
  if (epsilon >= kMinNormEpsilon && epsilon <= kMaxNormEpsilon) return "";
  return fmt::format("epsilon must be in [{}, {}] (from f32's smallest normal number, so that the "
                     "f32 kernels keep it, to 1), got {}",
                     kMinNormEpsilon, kMaxNormEpsilon, epsilon);
}

Result rmsNorm(ShapeRef input, ShapeRef weight) {
  if (input.empty()) return Result::fail("input must have rank >= 1, got a scalar");
  int64_t c = input.back();
  if (weight.size() != 1 || weight[0] != c)
    return Result::fail(fmt::format("weight must be [C] = {} for input {}, got {}", c,
                                    str(input), str(weight)));
  return {Shape(input.begin(), input.end()), ""};
}

Result swiglu(ShapeRef gate, ShapeRef up) {
  if (!equal(gate, up))
    return Result::fail(fmt::format("gate {} and up {} must have one shape", str(gate), str(up)));
  return {Shape(gate.begin(), gate.end()), ""};
}

Result softmax(ShapeRef input, bool causal) {
  if (input.empty()) return Result::fail("input must have rank >= 1, got a scalar");
  if (causal && (input.size() < 2 || input[input.size() - 1] != input[input.size() - 2]))
    return Result::fail(fmt::format(
        "a causal softmax needs input [..., T, T] with the last two dimensions equal, got {}",
        str(input)));
  return {Shape(input.begin(), input.end()), ""};
}

Result embedding(ShapeRef table, ShapeRef indices) {
  if (table.size() != 2)
    return Result::fail(fmt::format("table must be [V, C], got {}", str(table)));
  Shape out(indices.begin(), indices.end());
  out.push_back(table[1]);
  return {out, ""};
}

Result crossEntropy(ShapeRef logits, ShapeRef targets) {
  if (logits.empty()) return Result::fail("logits must be [..., V], got a scalar");
  if (!equal(logits.first(logits.size() - 1), targets))
    return Result::fail(fmt::format(
        "targets {} must match logits {} without the class dimension V={}, i.e. {}",
        str(targets), str(logits), logits.back(), str(logits.first(logits.size() - 1))));
  return {{}, ""};
}

Result embeddingShard(ShapeRef table, ShapeRef indices, int64_t vocab) {
  Result r = embedding(table, indices);
  if (!r.ok()) return r;
  if (table[0] < 1 || table[0] > vocab)
    return Result::fail(fmt::format("table shard {} must hold between 1 and vocab={} rows",
                                    str(table), vocab));
  return r;
}

Result rowStatistic(ShapeRef input) {
  if (input.empty() || input.back() < 1)
    return Result::fail(fmt::format("input must be [..., Vl] with Vl >= 1, got {}", str(input)));
  return {Shape(input.begin(), input.end() - 1), ""};
}

Result crossEntropyFromStats(ShapeRef max, ShapeRef sum, ShapeRef target) {
  if (!equal(max, sum) || !equal(max, target))
    return Result::fail(fmt::format("max {}, sum {} and target {} must have one shape", str(max),
                                    str(sum), str(target)));
  std::optional<int64_t> n = numElements(max);
  if (!n || *n < 1)
    return Result::fail(fmt::format("no rows to average over: the statistics are {}", str(max)));
  return {{}, ""};
}

Result causalAttention(ShapeRef qkv, int64_t numHeads) {
  if (qkv.size() != 3)
    return Result::fail(fmt::format("qkv must be [B, T, 3C], got {}", str(qkv)));
  if (qkv[2] % 3 != 0)
    return Result::fail(fmt::format(
        "qkv {} has last dimension {}, which is not 3C (not divisible by 3)", str(qkv), qkv[2]));
  int64_t c = qkv[2] / 3;
  if (c <= 0)
    return Result::fail(fmt::format("qkv {} has no channels (C must be positive)", str(qkv)));
  if (numHeads <= 0 || c % numHeads != 0)
    return Result::fail(fmt::format("channels C={} (from qkv {}) are not divisible by {} heads",
                                    c, str(qkv), numHeads));
  return {{qkv[0], qkv[1], c}, ""};
}

Result rope(ShapeRef input, int64_t numHeads, double theta) {
  if (input.size() != 3)
    return Result::fail(fmt::format("input must be [B, T, heads * D], got {}", str(input)));
  if (numHeads <= 0 || input[2] <= 0 || input[2] % numHeads != 0)
    return Result::fail(fmt::format(
        "last dimension {} of input {} is not {} heads of D > 0 channels", input[2], str(input),
        numHeads));
  int64_t d = input[2] / numHeads;
  if (d % 2 != 0)
    return Result::fail(fmt::format(
        "head size D={} (input {}, {} heads) is odd; rotary pairs need an even D", d, str(input),
        numHeads));
  if (std::string error = ropeThetaError(theta, d, input[1]); !error.empty())
    return Result::fail(std::move(error));
  return {Shape(input.begin(), input.end()), ""};
}

std::string ropeThetaError(double theta, int64_t headSize, int64_t positions) {
  if (!(theta > 0.0) || !std::isfinite(theta))
    return fmt::format("theta must be finite and > 0, got {}", theta);
  // The kernels' expression (codegen/KernelCommonAttention.h) at i = D/2 - 1.
  const int64_t i = headSize / 2 - 1;
  const double frequency =
      std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(headSize));
  if (!(frequency > 0.0) || !std::isfinite(frequency))
    return fmt::format("theta {} makes the inverse frequency theta^(-{}/{}) of head size D={} {}; "
                       "every theta^(-2i/D) must be finite and > 0 (take a larger theta)",
                       theta, 2 * i, headSize, headSize, frequency);
  const double angle = static_cast<double>(std::max<int64_t>(positions - 1, 0)) * frequency;
  if (!std::isfinite(angle))
    return fmt::format("theta {} makes the angle (T-1) * theta^(-{}/{}) at T={} positions {}; every "
                       "angle t * theta^(-2i/D) must be finite (take a larger theta)",
                       theta, 2 * i, headSize, positions, angle);
  return "";
}

Result groupedAttention(ShapeRef q, ShapeRef k, ShapeRef v, int64_t numHeads, int64_t numKvHeads) {
  if (q.size() != 3 || k.size() != 3 || v.size() != 3)
    return Result::fail(fmt::format("q, k and v must be [B, T, heads * D], got q {}, k {}, v {}",
                                    str(q), str(k), str(v)));
  if (numHeads <= 0 || numKvHeads <= 0 || numHeads % numKvHeads != 0)
    return Result::fail(fmt::format("kv_heads={} must be positive and divide heads={}",
                                    numKvHeads, numHeads));
  if (!equal(k, v))
    return Result::fail(fmt::format("k {} and v {} must have one shape", str(k), str(v)));
  if (q[0] != k[0] || q[1] != k[1])
    return Result::fail(fmt::format("q {} and k {} must agree in batch and sequence [B, T]",
                                    str(q), str(k)));
  if (q[2] <= 0 || q[2] % numHeads != 0)
    return Result::fail(fmt::format("last dimension {} of q {} is not {} heads of D > 0 channels",
                                    q[2], str(q), numHeads));
  int64_t d = q[2] / numHeads;
  if (k[2] != numKvHeads * d)
    return Result::fail(fmt::format(
        "k {} must have {} kv heads of D={} channels (q {} has {} heads), i.e. last dimension {}",
        str(k), numKvHeads, d, str(q), numHeads, numKvHeads * d));
  return {Shape(q.begin(), q.end()), ""};
}

Result reshape(ShapeRef input, ShapeRef target) {
  for (int64_t d : target)
    if (d <= 0)
      return Result::fail(fmt::format("target shape {} has a non-positive dimension", str(target)));
  std::optional<int64_t> na = numElements(input), nb = numElements(target);
  if (!na || !nb)
    return Result::fail(fmt::format("{} or {} has too many elements (2^48 or more)", str(input),
                                    str(target)));
  int64_t a = *na, b = *nb;
  if (a != b)
    return Result::fail(fmt::format("cannot reshape {} ({} elements) to {} ({} elements)",
                                    str(input), a, str(target), b));
  return {Shape(target.begin(), target.end()), ""};
}

Result transpose(ShapeRef input, ShapeRef perm) {
  std::vector<bool> seen(input.size(), false);
  bool valid = perm.size() == input.size();
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= static_cast<int64_t>(input.size()) || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid)
    return Result::fail(fmt::format("[{}] is not a permutation of the {} dimensions of {}",
                                    fmt::join(perm, ", "), input.size(), str(input)));
  Shape out;
  for (int64_t p : perm) out.push_back(input[p]);
  return {out, ""};
}

Result split(ShapeRef input, int64_t axis, int64_t parts) {
  if (axis < 0 || axis >= static_cast<int64_t>(input.size()))
    return Result::fail(fmt::format("axis {} is out of range for {}", axis, str(input)));
  if (parts <= 0 || input[axis] % parts != 0)
    return Result::fail(fmt::format("dimension {} of {} (size {}) does not split into {} equal parts",
                                    axis, str(input), input[axis], parts));
  Shape out(input.begin(), input.end());
  out[axis] /= parts;
  return {out, ""};
}

Result concat(const std::vector<Shape>& inputs, int64_t axis) {
  if (inputs.empty()) return Result::fail("needs at least one input");
  const Shape& first = inputs.front();
  if (axis < 0 || axis >= static_cast<int64_t>(first.size()))
    return Result::fail(fmt::format("axis {} is out of range for {}", axis, str(first)));
  Shape out = first;
  out[axis] = 0;
  for (const Shape& s : inputs) {
    bool same = s.size() == first.size();
    for (size_t d = 0; same && d < s.size(); ++d)
      if (static_cast<int64_t>(d) != axis && s[d] != first[d]) same = false;
    if (!same)
      return Result::fail(fmt::format("inputs {} and {} differ outside axis {}", str(first),
                                      str(s), axis));
    out[axis] += s[axis];
  }
  return {out, ""};
}

Result reduce(ShapeRef input, ShapeRef dims) {
  std::vector<bool> reduced(input.size(), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(input.size()) || reduced[d])
      return Result::fail(fmt::format("dims [{}] must be distinct and in [0, {}) for {}",
                                      fmt::join(dims, ", "), input.size(), str(input)));
    reduced[d] = true;
  }
  Shape out;
  for (size_t d = 0; d < input.size(); ++d)
    if (!reduced[d]) out.push_back(input[d]);
  return {out, ""};
}

Result broadcast(ShapeRef input, ShapeRef result, ShapeRef dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(result.size()) ||
        (i > 0 && dims[i] <= dims[i - 1]))
      return Result::fail(fmt::format("dims [{}] must be sorted, distinct and in [0, {}) for result {}",
                                      fmt::join(dims, ", "), result.size(), str(result)));
  Result kept = reduce(result, dims);
  if (!equal(kept.shape, input))
    return Result::fail(fmt::format("result {} without dims [{}] is {}, not the input {}",
                                    str(result), fmt::join(dims, ", "), str(kept.shape),
                                    str(input)));
  return {Shape(result.begin(), result.end()), ""};
}

namespace {

/// The error for a group size below 1 or `axis` (named `what`) outside [0, rank of `input`),
/// or "".
std::string axisError(const char* what, int64_t axis, ShapeRef input, int64_t group) {
  if (group < 1) return fmt::format("the group size must be >= 1, got {}", group);
  if (axis >= 0 && axis < static_cast<int64_t>(input.size())) return "";
  return fmt::format("{} {} is out of range for {}", what, axis, str(input));
}

/// `input` with dimension `axis` (named `what`) multiplied by `group`, or divided by it,
/// which must then be exact (uneven shards are refused).
Result resizeDim(ShapeRef input, const char* what, int64_t axis, int64_t group, bool divide) {
  if (std::string e = axisError(what, axis, input, group); !e.empty()) return Result::fail(e);
  if (divide && input[axis] % group != 0)
    return Result::fail(fmt::format("{} {} of {} (size {}) is not divisible by the group size {} "
                                    "(uneven shards are not supported yet)",
                                    what, axis, str(input), input[axis], group));
  Shape out(input.begin(), input.end());
  out[axis] = divide ? out[axis] / group : out[axis] * group;
  return {out, ""};
}

}  // namespace

Result allGather(ShapeRef input, int64_t axis, int64_t group) {
  return resizeDim(input, "gather_axis", axis, group, false);
}

bool isTrimmedGather(ShapeRef gathered, ShapeRef result, int64_t axis, int64_t group) {
  if (gathered.size() != result.size() || axis < 0 || axis >= static_cast<int64_t>(result.size())) return false;
  for (size_t d = 0; d < result.size(); ++d)
    if (static_cast<int64_t>(d) != axis && gathered[d] != result[d]) return false;
  return result[axis] <= gathered[axis] && result[axis] > gathered[axis] - group;
}

Result reduceScatter(ShapeRef input, int64_t axis, int64_t group) {
  if (std::string e = axisError("scatter_axis", axis, input, group); !e.empty()) return Result::fail(e);
  Shape out(input.begin(), input.end());
  out[axis] = (out[axis] + group - 1) / group;  // the shard of the zero-padded input
  return {out, ""};
}

Result allToAll(ShapeRef input, int64_t splitAxis, int64_t concatAxis, int64_t group) {
  if (std::string e = axisError("concat_axis", concatAxis, input, group); !e.empty())
    return Result::fail(e);
  Result split = resizeDim(input, "split_axis", splitAxis, group, true);
  if (split.ok()) split.shape[concatAxis] *= group;
  return split;
}

}  // namespace tessel::shapes
