// Elementwise arithmetic shared by the communicators (see Reduce.h).
#include "runtime/comm/Reduce.h"

#include <fmt/format.h>

namespace tessel::rt::comm {

void widen(DType dtype, const void* src, void* acc, int64_t n) {
  switch (dtype) {
    case DType::F32:
      std::memcpy(acc, src, static_cast<size_t>(n) * 4);
      return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      auto* a = static_cast<float*>(acc);
      for (int64_t i = 0; i < n; ++i) a[i] = floatFromBF16(s[i]);
      return;
    }
    case DType::I32: {
      const auto* s = static_cast<const int32_t*>(src);
      auto* a = static_cast<int64_t*>(acc);
      for (int64_t i = 0; i < n; ++i) a[i] = s[i];
      return;
    }
  }
}

template <typename T>
void maxInto(void* acc, const void* other, int64_t n) {
  auto* a = static_cast<T*>(acc);
  const auto* o = static_cast<const T*>(other);
  // `o != o` is true only for a NaN: it replaces a; a NaN already in a is never replaced
  // (no comparison with it is true), so NaN propagates whatever the order.
  for (int64_t i = 0; i < n; ++i)
    if (o[i] > a[i] || o[i] != o[i]) a[i] = o[i];
}

void accumulate(DType dtype, ReduceOp op, void* acc, const void* other, int64_t n) {
  if (op == ReduceOp::Max) {
    if (dtype == DType::I32) maxInto<int64_t>(acc, other, n);
    else maxInto<float>(acc, other, n);
    return;
  }
  if (dtype == DType::I32) {
    // |each term| < 2^31 and at most 2^31 ranks contribute, so the int64 sum cannot overflow.
    auto* a = static_cast<int64_t*>(acc);
    const auto* o = static_cast<const int64_t*>(other);
    for (int64_t i = 0; i < n; ++i) a[i] += o[i];
  } else {
    auto* a = static_cast<float*>(acc);
    const auto* o = static_cast<const float*>(other);
    for (int64_t i = 0; i < n; ++i) a[i] += o[i];
  }
}

void narrow(DType dtype, ReduceOp op, int world, const void* acc, void* dst, int64_t n) {
  const bool avg = op == ReduceOp::Avg;
  switch (dtype) {
    case DType::F32: {
      const auto* a = static_cast<const float*>(acc);
      auto* d = static_cast<float*>(dst);
      const float w = static_cast<float>(world);
      for (int64_t i = 0; i < n; ++i) d[i] = avg ? a[i] / w : a[i];
      return;
    }
    case DType::BF16: {
      const auto* a = static_cast<const float*>(acc);
      auto* d = static_cast<uint16_t*>(dst);
      const float w = static_cast<float>(world);
      for (int64_t i = 0; i < n; ++i) d[i] = bf16FromFloat(avg ? a[i] / w : a[i]);
      return;
    }
    case DType::I32: {
      const auto* a = static_cast<const int64_t*>(acc);
      auto* d = static_cast<int32_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = avg ? a[i] / world : a[i];
        // Two's complement wrap-around of the low 32 bits (well defined through uint32_t).
        d[i] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
      }
      return;
    }
  }
}

void checkCount(const char* kind, const std::string& name, int64_t count, const void* a,
                const void* b) {
  if (count < 0)
    throw CommError(fmt::format("{} '{}': element count must be >= 0, got {}", kind, name, count));
  if (count > 0 && (a == nullptr || b == nullptr))
    throw CommError(fmt::format("{} '{}': null buffer for {} elements", kind, name, count));
}

void checkRoot(const char* kind, const std::string& name, int root, int world) {
  if (root < 0 || root >= world)
    throw CommError(
        fmt::format("{} '{}': root rank {} is outside [0, {})", kind, name, root, world));
}

void checkPeer(const char* kind, const std::string& name, int peer, int self, int world) {
  if (peer < 0 || peer >= world)
    throw CommError(
        fmt::format("{} '{}': peer rank {} is outside [0, {})", kind, name, peer, world));
  if (peer == self)
    throw CommError(fmt::format("{} '{}': rank {} cannot {} itself", kind, name, self,
                                std::string(kind) == "send" ? "send to" : "receive from"));
}

void checkSubgroup(const std::vector<int>& ranks, int self, int world, const std::string& label) {
  bool hasSelf = false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world)
      throw CommError(fmt::format("group {}: rank {} is outside [0, {})", label, ranks[i], world));
    if (i > 0 && ranks[i] <= ranks[i - 1])
      throw CommError(fmt::format("group {}: ranks must be ascending without repeats", label));
    hasSelf |= ranks[i] == self;
  }
  if (!hasSelf)
    throw CommError(fmt::format("group {}: rank {} is not one of its ranks", label, self));
}

}  // namespace tessel::rt::comm
