// FNV-1a, 64 bit (Fowler, Noll, Vo; offset basis 14695981039346656037, prime 1099511628211):
// the one non-cryptographic hash of the project: kernel-cache keys and checksums, parameter
// initialisation streams, and the hashes ranks compare (schedules, replicas, command lines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessel::numeric {

inline constexpr uint64_t kFnv1aOffsetBasis = 14695981039346656037ull;

/// Continues hash `h` over `n` bytes at `data`.
inline uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/// Continues hash `h` over the bytes of `s`.
inline uint64_t fnv1a(uint64_t h, std::string_view s) { return fnv1a(h, s.data(), s.size()); }

}  // namespace tessel::numeric
