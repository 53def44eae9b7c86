// All-gathering byte strings of different lengths over a communicator (every rank's JSON
// text, for example): the lengths first, then the bytes padded to the longest.
#pragma once

#include "runtime/comm/Communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::rt {

/// Every rank's `mine`, in rank order (collective over `comm`: every rank calls it at the same
/// point). `what` names the exchange in collective errors and in the error for a string of
/// 2 GiB or more on some rank (std::runtime_error, thrown on every rank alike).
inline std::vector<std::string> allGatherBytes(Communicator& comm, const std::string& mine, const std::string& what) {
  const int n = comm.worldSize();
  // A string too large for an I32 count is sent as -1, so that every rank refuses it alike.
  const int32_t size = mine.size() > static_cast<size_t>(INT32_MAX - 4) ? -1 : static_cast<int32_t>(mine.size());
  std::vector<int32_t> sizes(static_cast<size_t>(n));
  comm.allGather(&size, sizes.data(), n, DType::I32, "sizes of " + what)->wait();
  for (int r = 0; r < n; ++r)
    if (sizes[static_cast<size_t>(r)] < 0)
      throw std::runtime_error(fmt::format("{} on rank {} is too large to exchange (2 GiB or more)", what, r));
  const int32_t largest = *std::max_element(sizes.begin(), sizes.end());
  const size_t words = (static_cast<size_t>(largest) + 3) / 4;
  std::vector<int32_t> padded(words, 0), all(words * static_cast<size_t>(n));
  if (!mine.empty()) std::memcpy(padded.data(), mine.data(), mine.size());
  comm.allGather(padded.data(), all.data(), static_cast<int64_t>(all.size()), DType::I32, what)->wait();
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.emplace_back(reinterpret_cast<const char*>(all.data() + static_cast<size_t>(r) * words),
                     static_cast<size_t>(sizes[static_cast<size_t>(r)]));
  return out;
}

}  // namespace tessel::rt
