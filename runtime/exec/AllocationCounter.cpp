// The instrumented allocator; see AllocationCounter.h.
#include "runtime/exec/AllocationCounter.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace tessel::rt {
namespace {
/// Blocks from this size on are mapped pages (page-aligned, so also kAllocationAlignment-aligned).
constexpr int64_t kMappedBytes = int64_t{1} << 20;
/// x86-64's transparent huge page: blocks from this size on ask for them.
constexpr int64_t kHugePageBytes = int64_t{2} << 20;
}  // namespace

void zeroBlockRange(void* p, int64_t bytes) {
  if (bytes <= 0) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + static_cast<uintptr_t>(bytes);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  // Whole pages are handed back (private anonymous memory reads back as zero pages, faulted
  // in on first touch, so untouched memory costs nothing); the partial pages at the ends are
  // written. If the kernel refuses, everything is written.
  if (last > first + page && madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) == 0) {
    std::memset(p, 0, first - begin);
    std::memset(reinterpret_cast<void*>(last), 0, end - last);
    return;
  }
  std::memset(p, 0, static_cast<size_t>(bytes));
}

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
    // Transparent huge pages where the kernel offers them on request (best effort): 512 times
    // fewer page faults when the block is first written, and fewer TLB misses in GEMMs.
    if (p && size >= kHugePageBytes) madvise(p, static_cast<size_t>(size), MADV_HUGEPAGE);
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
