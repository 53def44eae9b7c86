// The stand-in's device memory: allocations in a reserved address range the host cannot read,
// backed by host memory only the stand-in touches; synchronous and queued copies, memset,
// and the host view other stand-ins use (StandinDevice.h).
//
// - Addresses: a 1 TiB range reserved PROT_NONE (no memory behind it), so a host dereference
//   of a device pointer faults (SIGSEGV) instead of reading something plausible.
// - Allocations: 256-byte aligned, never reused, with a gap of 64 KiB after each, so an access
//   past the end of one never lands in the next and a freed address stays freed.
// - New memory is filled with 0xFF bytes (NaN in f32 and bf16): a read of never-written memory
//   shows as NaN. Freed memory is poisoned the same way and kept, so any later use is named
//   ("freed") rather than crashing.
#include "test/standin/Standin.h"
#include "test/standin/StandinDevice.h"

#include <sys/mman.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>

namespace tessel::standin {
namespace {

constexpr size_t kRangeBytes = size_t{1} << 40;  // the reserved device address range
constexpr size_t kGapBytes = 64 << 10;           // unused addresses after every allocation
constexpr size_t kAlign = 256;                   // cuMemAlloc's alignment
constexpr size_t kCapacity = size_t{16} << 30;   // the device's memory (16 GiB)
constexpr unsigned char kPoison = 0xFF;          // NaN in f32 and bf16

struct Allocation {
  size_t bytes = 0;
  std::unique_ptr<std::byte[]> host;
  bool freed = false;
};

struct Heap {
  std::mutex mutex;
  uintptr_t base = 0, next = 0;
  size_t used = 0;
  std::map<CUdeviceptr, Allocation> allocations;  // by start address

  Heap() {
    void* range = mmap(nullptr, kRangeBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (range == MAP_FAILED) {
      std::fprintf(stderr, "tessel stand-in: cannot reserve the device address range\n");
      std::abort();
    }
    base = next = reinterpret_cast<uintptr_t>(range);
  }
};

Heap& heap() {
  static Heap* h = new Heap;  // never destroyed: worker threads may outlive static destruction
  return *h;
}

/// hostView under the heap's lock.
std::byte* viewLocked(Heap& h, CUdeviceptr p, size_t bytes, std::string* why) {
  auto it = h.allocations.upper_bound(p);
  if (it == h.allocations.begin() || p < h.base || p >= h.base + kRangeBytes) {
    *why = fmt::format("0x{:x} is not a device address", p);
    return nullptr;
  }
  --it;
  const CUdeviceptr start = it->first;
  const Allocation& a = it->second;
  if (p >= start + a.bytes + kGapBytes) {
    *why = fmt::format("0x{:x} is not in any allocation", p);
    return nullptr;
  }
  if (a.freed) {
    *why = fmt::format("0x{:x} is in the allocation [0x{:x}, +{}) that was freed", p, start, a.bytes);
    return nullptr;
  }
  if (p - start + bytes > a.bytes) {
    *why = fmt::format("{} bytes at 0x{:x} (offset {}) exceed the allocation [0x{:x}, +{}) by {} bytes", bytes, p,
                       p - start, start, a.bytes, p - start + bytes - a.bytes);
    return nullptr;
  }
  return a.host.get() + (p - start);
}

/// The queued form of a copy or memset: checks the range when it runs (the allocation may be
/// freed meanwhile) and faults naming `call` otherwise.
std::byte* viewOrThrow(CUdeviceptr p, size_t bytes, const char* call, const char* role) {
  std::string why;
  std::byte* v = hostView(p, bytes, &why);
  if (!v) throw std::runtime_error(fmt::format("{} {}: {}", call, role, why));
  return v;
}

}  // namespace

std::byte* hostView(CUdeviceptr p, size_t bytes, std::string* why) {
  Heap& h = heap();
  std::lock_guard<std::mutex> lock(h.mutex);
  return viewLocked(h, p, bytes, why);
}

size_t usedBytes() {
  Heap& h = heap();
  std::lock_guard<std::mutex> lock(h.mutex);
  return h.used;
}

size_t totalBytes() { return kCapacity; }

}  // namespace tessel::standin

using namespace tessel::standin;

extern "C" void* tesselStandinHostAddress(CUdeviceptr p, size_t bytes, const char* what) {
  std::string why;
  if (std::byte* v = hostView(p, bytes, &why)) return v;
  std::fprintf(stderr, "tessel stand-in: %s: %s\n", what ? what : "device access", why.c_str());
  std::abort();
}

extern "C" void* tesselStandinTryHostAddress(CUdeviceptr p, size_t bytes, const char** why) {
  thread_local std::string reason;
  if (std::byte* v = hostView(p, bytes, &reason)) return v;
  if (why) *why = reason.c_str();
  return nullptr;
}

CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytes) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!dptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc", "null result pointer");
  if (bytes == 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc", "0 bytes");
  Heap& h = heap();
  std::lock_guard<std::mutex> lock(h.mutex);
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (h.used + rounded > kCapacity || h.next + rounded + kGapBytes > h.base + kRangeBytes)
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc",
                fmt::format("{} bytes requested, {} of {} in use", bytes, h.used, kCapacity));
  Allocation a;
  a.bytes = bytes;
  a.host.reset(new (std::nothrow) std::byte[bytes]);
  if (!a.host) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "the host has no memory to back it");
  std::memset(a.host.get(), kPoison, bytes);
  *dptr = h.next;
  h.allocations.emplace(h.next, std::move(a));
  h.next += rounded + kGapBytes;
  h.used += rounded;
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr p) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  Heap& h = heap();
  std::lock_guard<std::mutex> lock(h.mutex);
  auto it = h.allocations.find(p);
  if (it == h.allocations.end())
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemFree", fmt::format("0x{:x} is not the start of an allocation", p));
  if (it->second.freed)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemFree", fmt::format("0x{:x} was already freed", p));
  it->second.freed = true;
  std::memset(it->second.host.get(), kPoison, it->second.bytes);
  h.used -= (it->second.bytes + kAlign - 1) / kAlign * kAlign;
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(size_t* free, size_t* total) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!free || !total) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemGetInfo", "null result pointer");
  *total = kCapacity;
  *free = kCapacity - usedBytes();
  return CUDA_SUCCESS;
}

namespace {

/// A synchronous copy between host and device: waits for the blocking streams first (the
/// legacy default stream's semantics), then checks the device range.
CUresult syncCopy(const char* call, CUdeviceptr device, size_t bytes, const std::function<void(std::byte*)>& copy) {
  if (CUresult rc = contextStatus(call)) return rc;
  if (CUresult rc = synchronizeAll(call)) return rc;
  std::string why;
  std::byte* view = bytes ? hostView(device, bytes, &why) : nullptr;
  if (bytes && !view) return fail(CUDA_ERROR_INVALID_VALUE, call, why);
  if (bytes) copy(view);
  return CUDA_SUCCESS;
}

}  // namespace

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  return syncCopy("cuMemcpyHtoD", dst, bytes, [&](std::byte* d) { std::memcpy(d, src, bytes); });
}

CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  return syncCopy("cuMemcpyDtoH", src, bytes, [&](std::byte* s) { std::memcpy(dst, s, bytes); });
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (bytes && !src) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoDAsync", "null host pointer");
  std::string why;
  if (bytes && !hostView(dst, bytes, &why)) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoDAsync", why);
  // Pageable host memory is staged now, as the driver does: the caller may reuse it at once.
  auto staged = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(src),
                                                         static_cast<const std::byte*>(src) + bytes);
  return enqueue(stream, {"cuMemcpyHtoDAsync", [=] {
                            if (bytes) std::memcpy(viewOrThrow(dst, bytes, "cuMemcpyHtoDAsync", "destination"),
                                                   staged->data(), bytes);
                          }});
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  std::string why;
  if (bytes && !hostView(src, bytes, &why)) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoDAsync source", why);
  if (bytes && !hostView(dst, bytes, &why))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoDAsync destination", why);
  return enqueue(stream, {"cuMemcpyDtoDAsync", [=] {
                            if (!bytes) return;
                            std::byte* s = viewOrThrow(src, bytes, "cuMemcpyDtoDAsync", "source");
                            std::byte* d = viewOrThrow(dst, bytes, "cuMemcpyDtoDAsync", "destination");
                            std::memmove(d, s, bytes);
                          }});
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  std::string why;
  if (bytes && !hostView(dst, bytes, &why)) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemsetD8Async", why);
  return enqueue(stream, {"cuMemsetD8Async", [=] {
                            if (bytes) std::memset(viewOrThrow(dst, bytes, "cuMemsetD8Async", "destination"), value,
                                                   bytes);
                          }});
}
