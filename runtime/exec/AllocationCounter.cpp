// The instrumented allocator; see AllocationCounter.h.
#include "runtime/exec/AllocationCounter.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace tessel::rt {
namespace {
/// Blocks from this size on are mapped pages (page-aligned, so also kAllocationAlignment-aligned).
constexpr int64_t kMappedBytes = int64_t{1} << 20;
}  // namespace

AllocationCounter::Block AllocationCounter::allocate(int64_t bytes, MemoryRole role) {
  if (bytes <= 0)
    throw std::logic_error(fmt::format("AllocationCounter: {} bytes for the {}", bytes, memoryRoleName(role)));
  const int64_t size = alignedBytes(bytes);
  // A large block comes straight from the kernel (mmap): its pages are zero and cost nothing
  // until first touched, so constructing an executor of gigabytes does not write them all
  // (the first write faults each page in). A small one is aligned_alloc + memset.
  const bool mapped = size >= kMappedBytes;
  void* p = nullptr;
  if (mapped) {
    p = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
  } else {
    p = std::aligned_alloc(static_cast<size_t>(kAllocationAlignment), static_cast<size_t>(size));
  }
  if (!p)
    throw std::runtime_error(fmt::format("cannot allocate {} bytes ({}) for the {}", size,
                                         formatBytes(static_cast<double>(size)), memoryRoleName(role)));
  if (!mapped) std::memset(p, 0, static_cast<size_t>(size));
  const auto r = static_cast<size_t>(role);
  live_ += size;
  roleLive_[r] += size;
  peak_ = std::max(peak_, live_);
  rolePeak_[r] = std::max(rolePeak_[r], roleLive_[r]);
  ++allocations_;
  return Block(static_cast<std::byte*>(p), [this, size, r, mapped](std::byte* block) {
    if (mapped) munmap(block, static_cast<size_t>(size));
    else std::free(block);
    live_ -= size;
    roleLive_[r] -= size;
  });
}

}  // namespace tessel::rt
