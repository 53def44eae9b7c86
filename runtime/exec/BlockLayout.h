// The repacking around the one-step collectives that move shards (CollectiveStep::AllGather,
// ReduceScatter, AllToAll; runtime/exec/Program.h): the communicators concatenate the ranks'
// blocks contiguously, while a sharded tensor's parts lie along one dimension.
//
// Promise: the layouts are plain index arithmetic (copyStrided runs them on host memory), so
// the CPU executor (memcpy) and the CUDA executor (cuMemcpyDtoDAsync around NCCL) run the
// same copies and the layouts are unit-tested without a GPU. A row-major tensor of shape S is viewed along dimension d as
// [outer, S[d], inner] (outer = product of S[0:d), inner = product of S[d+1:]); its P
// slices along d are [outer, m, inner] each, m = ceil(S[d] / P) (the last ones short when P
// does not divide S[d]: an uneven dimension, padded at its end). "Blocks" is the contiguous
// layout [P][outer][m][inner], block r = slice r.
#pragma once

#include "runtime/exec/Program.h"

#include <algorithm>
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

/// A tensor of `shape` seen along `dim`, split into `parts` slices of `chunk` =
/// ceil(shape[dim] / parts) elements along dim (outer rows of `width` = chunk * inner
/// contiguous elements each). When parts does not divide shape[dim], the dimension is seen
/// padded at its end to parts x chunk: the last slices are short (or empty) in the tensor,
/// while their blocks keep the full chunk, so block r of the blocks layout always starts at
/// r * outer * width. The padding is not part of the tensor (gather-then-trim drops it,
/// the reduce-scatter's zeroed staging supplies it).
struct SliceLayout {
  int64_t outer = 1;  // product of shape[0:dim)
  int64_t width = 0;  // elements of one full slice per outer row: chunk * inner
  int64_t parts = 1;
  int64_t inner = 1;  // product of shape[dim+1:]
  int64_t size = 0;   // shape[dim]: the tensor's (unpadded) length along dim
  int64_t chunk = 0;  // ceil(size / parts)
  /// Whether the dimension is padded (parts does not divide size).
  bool padded() const { return chunk * parts != size; }
  /// The elements of slice r that lie in the tensor, per outer row.
  int64_t validWidth(int64_t r) const { return std::clamp<int64_t>(size - r * chunk, 0, chunk) * inner; }
};

/// The layout of `shape` along `dim` in `parts` slices; throws std::invalid_argument if dim
/// is out of range or parts < 1.
inline SliceLayout sliceLayout(const std::vector<int64_t>& shape, int64_t dim, int64_t parts) {
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size()) || parts < 1)
    throw std::invalid_argument("sliceLayout: dimension " + std::to_string(dim) + " of a rank-" +
                                std::to_string(shape.size()) + " tensor cannot be split into " +
                                std::to_string(parts) + " slices");
  SliceLayout l;
  l.parts = parts;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (static_cast<int64_t>(i) < dim) l.outer *= shape[i];
    if (static_cast<int64_t>(i) > dim) l.inner *= shape[i];
  }
  l.size = shape[static_cast<size_t>(dim)];
  l.chunk = (l.size + parts - 1) / parts;
  l.width = l.chunk * l.inner;
  return l;
}

/// Tensor -> blocks: the part of slice r in the tensor to block r (one strided copy per
/// slice with elements; none when the tensor is empty). Padding positions of the blocks
/// are not written.
inline std::vector<StridedCopy> packSlices(const SliceLayout& l) {
  std::vector<StridedCopy> out;
  for (int64_t r = 0; r < l.parts; ++r) {
    const int64_t valid = l.validWidth(r);
    if (l.outer * valid == 0) continue;
    out.push_back({r * l.width, l.size * l.inner, r * l.outer * l.width, l.width, l.outer, valid});
  }
  return out;
}

/// Blocks -> tensor: block r to slice r (the inverse of packSlices; a padded dimension's
/// padding is dropped: gather-then-trim).
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
///
/// A padded dimension (ReduceScatter's input or AllGather's output shorter than group x
/// the shard, TesselGatherScatterOps.td): `zeroStaging` asks the executor to zero the
/// staging buffer before `pack`, so the reduce-scatter sums zeros into the padding, and the
/// all-gather's `unpack` copies only the rows in the output (gather-then-trim).
struct ShardMovePlan {
  std::vector<StridedCopy> pack, unpack;
  int64_t count = 0;       // allGather / reduceScatter: n; allToAll: countPerRank
  int64_t recvOffset = 0;  // allToAll: where in staging the received blocks land
  int64_t payloadBytes = 0;  // Communicator.h's payload of the call (padding included)
  bool zeroStaging = false;  // ReduceScatter of a padded dimension: zero staging first
};

/// The plan of step `c` of `program` (validated: shapes agree, dims in range).
inline ShardMovePlan shardMovePlan(const Program& program, const CollectiveStep& c) {
  const Buffer& in = program.buffers.at(static_cast<size_t>(c.tensors.at(0)));
  const Buffer& out = program.buffers.at(static_cast<size_t>(c.tensors.at(1)));
  ShardMovePlan plan;
  switch (c.kind) {
    case CollectiveStep::Kind::AllGather:  // staging holds every rank's whole shard
      plan.count = in.numel() * c.group;
      plan.unpack = unpackSlices(sliceLayout(out.shape, c.dim, c.group));
      plan.payloadBytes = static_cast<int64_t>(in.bytes()) * c.group;
      break;
    case CollectiveStep::Kind::ReduceScatter: {  // staging holds the padded input
      const SliceLayout l = sliceLayout(in.shape, c.dim, c.group);
      plan.count = out.numel() * c.group;
      plan.pack = packSlices(l);
      plan.payloadBytes = static_cast<int64_t>(out.bytes()) * c.group;
      plan.zeroStaging = l.padded();
      break;
    }
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
