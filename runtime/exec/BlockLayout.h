// The repacking around the one-step collectives that move shards (CollectiveStep::AllGather,
// ReduceScatter, AllToAll; runtime/exec/Program.h): the communicators concatenate the ranks'
// blocks contiguously, while a sharded tensor's parts lie along one dimension.
//
// Promise: the layouts are plain index arithmetic (copyStrided runs them on host memory), so
// the CPU executor (memcpy) and the CUDA executor (cuMemcpyDtoDAsync around NCCL) run the
// same copies and the layouts are unit-tested without a GPU. A row-major tensor of shape S is viewed along dimension d as
// [outer, S[d], inner] (outer = product of S[0:d), inner = product of S[d+1:]); its P equal
// slices along d are [outer, S[d] / P, inner] each. "Blocks" is the contiguous layout
// [P][outer][S[d] / P][inner], block r = slice r.
#pragma once

#include "runtime/exec/Program.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::rt {

/// `rows` copies of `width` contiguous elements: row i from element src + i * srcPitch to
/// dst + i * dstPitch (the arguments of a 2-D memcpy, in elements).
struct StridedCopy {
  int64_t src = 0, srcPitch = 0, dst = 0, dstPitch = 0, rows = 0, width = 0;
  bool operator==(const StridedCopy&) const = default;
};

/// A tensor of `shape` seen along `dim`, split into `parts` slices: outer rows of `width` =
/// shape[dim] / parts * inner contiguous elements per slice.
struct SliceLayout {
  int64_t outer = 1;  // product of shape[0:dim)
  int64_t width = 0;  // elements of one slice per outer row: shape[dim] / parts * inner
  int64_t parts = 1;
};

/// The layout of `shape` along `dim` in `parts` slices; throws std::invalid_argument if dim
/// is out of range, parts < 1 or parts does not divide shape[dim].
inline SliceLayout sliceLayout(const std::vector<int64_t>& shape, int64_t dim, int64_t parts) {
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size()) || parts < 1 || shape[static_cast<size_t>(dim)] % parts != 0)
    throw std::invalid_argument("sliceLayout: dimension " + std::to_string(dim) + " of a rank-" +
                                std::to_string(shape.size()) + " tensor cannot be split into " +
                                std::to_string(parts) + " equal slices");
  SliceLayout l;
  l.parts = parts;
  int64_t inner = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (static_cast<int64_t>(i) < dim) l.outer *= shape[i];
    if (static_cast<int64_t>(i) > dim) inner *= shape[i];
  }
  l.width = shape[static_cast<size_t>(dim)] / parts * inner;
  return l;
}

/// Tensor -> blocks: slice r of the tensor to block r (one strided copy per slice; none
/// when the tensor is empty).
inline std::vector<StridedCopy> packSlices(const SliceLayout& l) {
  std::vector<StridedCopy> out;
  if (l.outer * l.width == 0) return out;
  for (int64_t r = 0; r < l.parts; ++r)
    out.push_back({r * l.width, l.parts * l.width, r * l.outer * l.width, l.width, l.outer, l.width});
  return out;
}

/// Blocks -> tensor: block r to slice r (the inverse of packSlices).
inline std::vector<StridedCopy> unpackSlices(const SliceLayout& l) {
  std::vector<StridedCopy> out = packSlices(l);
  for (StridedCopy& c : out) {
    std::swap(c.src, c.dst);
    std::swap(c.srcPitch, c.dstPitch);
  }
  return out;
}

/// Runs `copies` (elements of `elementBytes` bytes) from host memory `src` to `dst`.
inline void copyStrided(const std::vector<StridedCopy>& copies, const void* src, void* dst, size_t elementBytes) {
  const auto* from = static_cast<const std::byte*>(src);
  auto* to = static_cast<std::byte*>(dst);
  for (const StridedCopy& c : copies)
    for (int64_t r = 0; r < c.rows; ++r)
      std::memcpy(to + static_cast<size_t>(c.dst + r * c.dstPitch) * elementBytes,
                  from + static_cast<size_t>(c.src + r * c.srcPitch) * elementBytes,
                  static_cast<size_t>(c.width) * elementBytes);
}

/// How an executor runs a validated AllGather, ReduceScatter or AllToAll step of group > 1
/// (Program.h): `pack` copies the input into the staging buffer, the communicator call (by
/// kind: allGather(input, staging, count), reduceScatter(staging, output, count),
/// allToAll(staging, staging + recvOffset, count)) moves the blocks, and `unpack` copies
/// staging (from element recvOffset on) into the output. All offsets are in elements.
struct ShardMovePlan {
  std::vector<StridedCopy> pack, unpack;
  int64_t count = 0;       // allGather / reduceScatter: n; allToAll: countPerRank
  int64_t recvOffset = 0;  // allToAll: where in staging the received blocks land
  int64_t payloadBytes = 0;  // Communicator.h's payload of the call
};

/// The plan of step `c` of `program` (validated: shapes agree, dims in range).
inline ShardMovePlan shardMovePlan(const Program& program, const CollectiveStep& c) {
  const Buffer& in = program.buffers.at(static_cast<size_t>(c.tensors.at(0)));
  const Buffer& out = program.buffers.at(static_cast<size_t>(c.tensors.at(1)));
  ShardMovePlan plan;
  switch (c.kind) {
    case CollectiveStep::Kind::AllGather:
      plan.count = out.numel();
      plan.unpack = unpackSlices(sliceLayout(out.shape, c.dim, c.group));
      plan.payloadBytes = out.bytes();
      break;
    case CollectiveStep::Kind::ReduceScatter:
      plan.count = in.numel();
      plan.pack = packSlices(sliceLayout(in.shape, c.dim, c.group));
      plan.payloadBytes = in.bytes();
      break;
    case CollectiveStep::Kind::AllToAll:
      plan.count = in.numel() / c.group;
      plan.recvOffset = in.numel();
      plan.pack = packSlices(sliceLayout(in.shape, c.dim, c.group));
      plan.unpack = unpackSlices(sliceLayout(out.shape, c.concatDim, c.group));
      for (StridedCopy& u : plan.unpack) u.src += plan.recvOffset;
      plan.payloadBytes = in.bytes();
      break;
    default:
      throw std::invalid_argument("shardMovePlan: an all-reduce step moves no shards");
  }
  return plan;
}

}  // namespace tessel::rt
