// The memory plan: offsets for a program's temporaries in one arena, from their lifetimes.
//
// Promise: two buffers whose lifetimes overlap never overlap in memory (for a block of parts,
// LiveBuffer::parts, each part with its own lifetime); every offset is a
// multiple of `alignment`; the arena size is reported exactly before anything runs, so
// per-rank memory is known ahead of launch. Plain C++ (no MLIR).
//
// Algorithm (greedy by size, as TFLite's and XLA's simple heap simulators): sort the
// buffers by size (largest first, ties by first use), and place each at the lowest aligned
// offset where it does not collide with an already-placed buffer whose lifetime overlaps.
// The result is not always optimal (that problem is NP-hard) but never exceeds the sum of
// sizes, and is at least the largest total live at any step (a lower bound, also reported).
// The placed buffers are indexed by lifetime (a segment tree over the steps whose nodes hold
// merged offset intervals), so planning n buffers over S steps takes O(n log^2 S) map
// operations however many lifetimes overlap (a GPT's saved activations overlap O(L) others).
#pragma once

#include <cstdint>
#include <vector>

namespace tessel {

/// One part of a block (LiveBuffer::parts): `bytes` at `at` bytes past the block's offset (a
/// multiple of the alignment), needed during the steps [firstUse, lastUse].
struct LivePart {
  int64_t at = 0;
  int64_t bytes = 0;
  int64_t firstUse = 0;
  int64_t lastUse = 0;
};

/// One temporary: its size and the steps [firstUse, lastUse] (inclusive) it must survive.
/// With `parts` it is a block of contiguous parts placed together (the views of an in-place
/// all-reduce bucket, codegen/BucketViews.h): each part's bytes are busy only during its own
/// steps; `bytes` (the block's extent), firstUse and lastUse (the union) order the placement.
struct LiveBuffer {
  int64_t bytes = 0;
  int64_t firstUse = 0;
  int64_t lastUse = 0;
  std::vector<LivePart> parts;
};

/// Where each buffer goes and how big the arena is.
struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per input buffer, in input order
  int64_t arenaBytes = 0;        // max over buffers of offset + aligned size
  int64_t liveLowerBound = 0;    // max over steps of the bytes live at that step
  /// Interval-set lookups the placement made: a machine-independent measure of its work,
  /// for tests that it grows linearly (times log factors) with the number of buffers.
  int64_t searchWork = 0;
};

/// Plans `buffers`. Throws std::invalid_argument for a negative size, a negative firstUse or
/// lastUse < firstUse (of a buffer or a part), or a part at an unaligned offset or past the
/// block's bytes.
MemoryPlan planMemory(const std::vector<LiveBuffer>& buffers, int64_t alignment = 64);

}  // namespace tessel
