// The instrumented allocator; see AllocationCounter.h.
#include "runtime/exec/AllocationCounter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace tessel::rt {

AllocationCounter::Block AllocationCounter::allocate(int64_t bytes, MemoryRole role) {
  if (bytes <= 0)
    throw std::logic_error(fmt::format("AllocationCounter: {} bytes for the {}", bytes, memoryRoleName(role)));
  const int64_t size = alignedBytes(bytes);
  void* p = std::aligned_alloc(static_cast<size_t>(kAllocationAlignment), static_cast<size_t>(size));
  if (!p)
    throw std::runtime_error(fmt::format("cannot allocate {} bytes ({}) for the {}", size,
                                         formatBytes(static_cast<double>(size)), memoryRoleName(role)));
  std::memset(p, 0, static_cast<size_t>(size));
  const auto r = static_cast<size_t>(role);
  live_ += size;
  roleLive_[r] += size;
  peak_ = std::max(peak_, live_);
  rolePeak_[r] = std::max(rolePeak_[r], roleLive_[r]);
  ++allocations_;
  return Block(static_cast<std::byte*>(p), [this, size, r](std::byte* block) {
    std::free(block);
    live_ -= size;
    roleLive_[r] -= size;
  });
}

}  // namespace tessel::rt
