// Where a rank's shard of a sharded buffer lies in its global tensor, as boxes: the unit in
// which checkpoints store and reshard tensors (runtime/ckpt/Index.h ShardEntry).
//
// A buffer's local shard under Program.h's layout rule (ShardDim: axes, blocks, padding) is, per
// dimension, `blocks` contiguous global ranges (one per block; for a padded dimension the
// range is cut at the global size, and may be empty), so the shard is the cartesian product of
// those ranges: product over dimensions of blocks boxes. Each box is contiguous in neither the
// local nor the global tensor in general; it is copied row by row.
//
// Promise: pure arithmetic on a Program's data, agreeing with runtime/exec/Sharding.h's
// globalIndices (a unit test checks every element of every box against it); boxes with an
// empty extent are dropped, so a rank whose shard is all padding holds no box.
#pragma once

#include "runtime/comm/DeviceMesh.h"  // MeshLayout
#include "runtime/exec/Program.h"

#include <cstdint>
#include <vector>

namespace tessel::ckpt {

/// One box of a rank's shard: global [offsets, offsets + lengths) per dimension, stored in the
/// local shard at [localOffsets, localOffsets + lengths).
struct LocalBox {
  std::vector<int64_t> offsets, lengths, localOffsets;
  bool operator==(const LocalBox&) const = default;
};

/// The boxes of buffer `b` held by the rank at `coordinates` of `mesh` (null, or an unsharded
/// buffer: one box, the whole tensor), in row-major order of their block indices. A scalar
/// (shape []) is one box with empty vectors. Requires a buffer that passed checkProgramMesh.
std::vector<LocalBox> localBoxes(const rt::Buffer& b, const rt::MeshLayout* mesh, const std::vector<int>& coordinates);

/// Copies box `box` out of a local shard (`local`: row-major over `localShape`, elements of
/// `elementBytes` bytes) into `out`, row-major over box.lengths.
void extractBox(const void* local, const std::vector<int64_t>& localShape, const LocalBox& box, size_t elementBytes,
                void* out);

/// The inverse: copies `in` (row-major over box.lengths) into box `box` of the local shard.
void insertBox(void* local, const std::vector<int64_t>& localShape, const LocalBox& box, size_t elementBytes,
               const void* in);

/// Copies the intersection of two boxes of one global tensor: `src` holds box (srcOffsets,
/// srcLengths) row-major, `dst` box (dstOffsets, dstLengths); the elements in both are copied
/// from src to dst, the rest of dst is untouched. Returns the elements copied (0: disjoint).
int64_t copyIntersection(const void* src, const std::vector<int64_t>& srcOffsets,
                         const std::vector<int64_t>& srcLengths, void* dst, const std::vector<int64_t>& dstOffsets,
                         const std::vector<int64_t>& dstLengths, size_t elementBytes);

}  // namespace tessel::ckpt
