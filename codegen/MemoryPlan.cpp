// The memory plan; see MemoryPlan.h.
#include "codegen/MemoryPlan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>

namespace tessel {

MemoryPlan planMemory(const std::vector<LiveBuffer>& buffers, int64_t alignment) {
  auto aligned = [&](int64_t n) { return (n + alignment - 1) / alignment * alignment; };
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].bytes < 0 || buffers[i].lastUse < buffers[i].firstUse)
      throw std::invalid_argument("planMemory: buffer " + std::to_string(i) +
                                  " has a negative size or an empty lifetime");

  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].firstUse < buffers[b].firstUse;
  });

  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> placed;
  for (size_t i : order) {
    const LiveBuffer& b = buffers[i];
    // Intervals [offset, end) of placed buffers alive at the same time, sorted by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      const LiveBuffer& o = buffers[j];
      if (o.firstUse <= b.lastUse && b.firstUse <= o.lastUse)
        busy.emplace_back(plan.offsets[j], plan.offsets[j] + aligned(o.bytes));
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto [start, end] : busy) {
      if (offset + aligned(b.bytes) <= start) break;  // fits in the gap before this one
      offset = std::max(offset, end);
    }
    plan.offsets[i] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + aligned(b.bytes));
    placed.push_back(i);
  }

  // Lower bound: the most bytes live at once (sweep over step boundaries).
  std::map<int64_t, int64_t> delta;
  for (const LiveBuffer& b : buffers) {
    delta[b.firstUse] += aligned(b.bytes);
    delta[b.lastUse + 1] -= aligned(b.bytes);
  }
  int64_t live = 0;
  for (auto [step, d] : delta) {
    live += d;
    plan.liveLowerBound = std::max(plan.liveLowerBound, live);
  }
  return plan;
}

}  // namespace tessel
