// Shards as boxes of the global tensor; see Boxes.h.
#include "runtime/ckpt/Boxes.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tessel::ckpt {

namespace {

/// One dimension's contiguous global ranges on a rank: per block, where it starts globally,
/// where it starts locally and how many of its elements are real (the rest is padding).
struct Range {
  int64_t global = 0, local = 0, length = 0;
};

/// The ranges of dimension d of `b` on the rank at `coordinates` (Program.h ShardDim's rule,
/// as Sharding.cpp's DimLayout: local block j of l elements is global [j * g + p * l, ...) with
/// g = global / blocks; only an unblocked dimension is padded, so the range is cut at the end).
std::vector<Range> dimRanges(const rt::Buffer& b, const rt::MeshLayout* mesh, const std::vector<int>& coordinates,
                             size_t d) {
  const int64_t local = b.shape[d];
  const int64_t global = b.globalShape.empty() ? local : b.globalShape[d];
  if (!mesh || b.sharding.empty()) return {Range{0, 0, global}};
  const rt::ShardDim& s = b.sharding[d];
  int64_t part = 0;
  for (const std::string& axis : s.axes) {
    const int a = mesh->axisIndex(axis);
    part = part * mesh->axes()[static_cast<size_t>(a)].size + coordinates.at(static_cast<size_t>(a));
  }
  const int64_t l = local / s.blocks, g = global / s.blocks;
  std::vector<Range> out;
  for (int64_t j = 0; j < s.blocks; ++j) {
    const int64_t start = j * g + part * l;
    out.push_back(Range{start, j * l, std::clamp<int64_t>(global - start, 0, l)});
  }
  return out;
}

/// Copies the box `lengths` from `src` (row-major over srcShape, starting at srcStart) to `dst`
/// (row-major over dstShape, starting at dstStart), one contiguous last-dimension run at a time.
void copyRegion(const void* src, std::vector<int64_t> srcShape, std::vector<int64_t> srcStart, void* dst,
                std::vector<int64_t> dstShape, std::vector<int64_t> dstStart, std::vector<int64_t> lengths,
                size_t elementBytes) {
  // A last dimension both sides hold whole joins the one before it (a whole tensor is then one
  // run, one memcpy).
  while (lengths.size() >= 2) {
    const size_t last = lengths.size() - 1;
    const int64_t n = lengths[last];  // then both starts are 0 in that dimension
    if (n != srcShape[last] || n != dstShape[last]) break;
    for (std::vector<int64_t>* v : {&srcShape, &dstShape, &lengths, &srcStart, &dstStart}) {
      (*v)[last - 1] *= n;
      v->pop_back();
    }
  }
  const size_t rank = lengths.size();
  const auto* s = static_cast<const unsigned char*>(src);
  auto* t = static_cast<unsigned char*>(dst);
  if (rank == 0) {  // a scalar: one element
    std::memcpy(t, s, elementBytes);
    return;
  }
  for (int64_t n : lengths)
    if (n <= 0) return;
  const size_t run = static_cast<size_t>(lengths[rank - 1]) * elementBytes;
  std::vector<int64_t> at(rank - 1, 0);  // the row's index within the box, leading dimensions
  while (true) {
    int64_t so = 0, to = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t i = d + 1 < rank ? at[d] : 0;
      so = so * srcShape[d] + srcStart[d] + i;
      to = to * dstShape[d] + dstStart[d] + i;
    }
    std::memcpy(t + static_cast<size_t>(to) * elementBytes, s + static_cast<size_t>(so) * elementBytes, run);
    // Next row: increment the leading index like an odometer, last leading dimension fastest.
    size_t d = rank - 1;
    while (d > 0) {
      if (++at[d - 1] < lengths[d - 1]) break;
      at[d - 1] = 0;
      --d;
    }
    if (d == 0) return;
  }
}

}  // namespace

std::vector<LocalBox> localBoxes(const rt::Buffer& b, const rt::MeshLayout* mesh, const std::vector<int>& coordinates) {
  const size_t rank = b.shape.size();
  std::vector<std::vector<Range>> dims;
  for (size_t d = 0; d < rank; ++d) dims.push_back(dimRanges(b, b.sharded() ? mesh : nullptr, coordinates, d));
  std::vector<LocalBox> out;
  std::vector<size_t> pick(rank, 0);  // the block index per dimension, row-major
  while (true) {
    LocalBox box;
    bool empty = false;
    for (size_t d = 0; d < rank; ++d) {
      const Range& r = dims[d][pick[d]];
      box.offsets.push_back(r.global);
      box.lengths.push_back(r.length);
      box.localOffsets.push_back(r.local);
      empty = empty || r.length == 0;
    }
    if (!empty) out.push_back(std::move(box));
    size_t d = rank;
    while (d > 0) {
      if (++pick[d - 1] < dims[d - 1].size()) break;
      pick[d - 1] = 0;
      --d;
    }
    if (d == 0) return out;
  }
}

void extractBox(const void* local, const std::vector<int64_t>& localShape, const LocalBox& box, size_t elementBytes,
                void* out) {
  copyRegion(local, localShape, box.localOffsets, out, box.lengths, std::vector<int64_t>(box.lengths.size(), 0),
             box.lengths, elementBytes);
}

void insertBox(void* local, const std::vector<int64_t>& localShape, const LocalBox& box, size_t elementBytes,
               const void* in) {
  copyRegion(in, box.lengths, std::vector<int64_t>(box.lengths.size(), 0), local, localShape, box.localOffsets,
             box.lengths, elementBytes);
}

int64_t copyIntersection(const void* src, const std::vector<int64_t>& srcOffsets,
                         const std::vector<int64_t>& srcLengths, void* dst, const std::vector<int64_t>& dstOffsets,
                         const std::vector<int64_t>& dstLengths, size_t elementBytes) {
  const size_t rank = srcOffsets.size();
  if (srcLengths.size() != rank || dstOffsets.size() != rank || dstLengths.size() != rank)
    throw std::invalid_argument("copyIntersection: boxes of different ranks");
  std::vector<int64_t> lengths(rank), srcStart(rank), dstStart(rank);
  int64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t lo = std::max(srcOffsets[d], dstOffsets[d]);
    const int64_t hi = std::min(srcOffsets[d] + srcLengths[d], dstOffsets[d] + dstLengths[d]);
    if (hi <= lo) return 0;
    lengths[d] = hi - lo;
    srcStart[d] = lo - srcOffsets[d];
    dstStart[d] = lo - dstOffsets[d];
    count *= lengths[d];
  }
  copyRegion(src, srcLengths, srcStart, dst, dstLengths, dstStart, lengths, elementBytes);
  return count;
}

}  // namespace tessel::ckpt
