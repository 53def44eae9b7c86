// The executor's instrumented allocator: every block the CPU executor holds (parameters,
// gradients, optimizer state, inputs, GEMM scratch, the arena) is allocated here, and the
// counter keeps the live bytes and their high-water mark, in total and per role, from the
// allocations really made (aligned_alloc and free), not from the plan.
//
// Promise: allocate() returns a zero-filled block aligned to kAllocationAlignment whose
// requested size (rounded up to the alignment) is added to the live bytes until the block is
// freed; peak() is the most bytes live at once since construction. Outside it: memory that
// the executor's libraries allocate for themselves (MPI's and OpenBLAS's internal buffers,
// the loaded kernel library, the host-side bookkeeping of the executor and the loop).
#pragma once

#include "runtime/exec/MemoryBreakdown.h"  // MemoryRole, kAllocationAlignment

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace tessel::rt {

/// Counts the live bytes of the blocks it allocates. Not thread-safe (the executor allocates
/// at construction, on one thread).
class AllocationCounter {
 public:
  /// A block; freeing it (reset or destruction) subtracts its bytes from the counter, which
  /// must outlive it.
  using Block = std::unique_ptr<std::byte, std::function<void(std::byte*)>>;

  /// A zero-filled block of `bytes` (> 0) rounded up to kAllocationAlignment, counted under
  /// `role`. Throws std::runtime_error naming `role` and the size when the system refuses.
  Block allocate(int64_t bytes, MemoryRole role);

  /// Bytes live now, and the most live at once so far (all roles).
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  /// Bytes live now under `role`, and the most live at once under it.
  int64_t live(MemoryRole role) const { return roleLive_[static_cast<size_t>(role)]; }
  int64_t peak(MemoryRole role) const { return rolePeak_[static_cast<size_t>(role)]; }
  /// Blocks allocated so far (freed ones included).
  int64_t allocations() const { return allocations_; }

 private:
  int64_t live_ = 0, peak_ = 0, allocations_ = 0;
  std::array<int64_t, kMemoryRoles> roleLive_{}, rolePeak_{};
};

/// Sets `bytes` bytes at `p`, a range inside one block from AllocationCounter::allocate (or
/// any private anonymous memory), to zero without writing its whole pages: they are handed
/// back to the kernel (madvise MADV_DONTNEED) and read back as zero pages, faulted in on first
/// touch, so zeroing untouched memory costs nothing. Partial pages at the ends are written
/// (memset); if the kernel refuses the advice, the whole range is. Only pages lying wholly
/// inside the range are handed back, so memory outside it is untouched.
void zeroBlockRange(void* p, int64_t bytes);

}  // namespace tessel::rt
