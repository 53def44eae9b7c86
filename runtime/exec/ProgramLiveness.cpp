// checkLiveTemps and checkInPlaceBuckets (ProgramCheckParts.h): the liveness half of
// validateProgram's arena check.
//
// Sweep over the temps by first step, keeping the live ones by offset: they are pairwise
// disjoint (each was checked when it joined), so a new temp overlaps one of them iff it
// overlaps its neighbour below or above in offset order. O(temps log temps), so it stays
// cheap for deep models.
#include "runtime/exec/ProgramCheckParts.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <vector>

namespace tessel::rt {

void checkLiveTemps(const Program& p, const Function& fn, const CheckFailure& fail) {
  auto overlaps = [&](int x, int y) {
    const Buffer& a = p.buffers[static_cast<size_t>(x)];
    const Buffer& b = p.buffers[static_cast<size_t>(y)];
    return x == y || (a.offset < b.offset + b.bytes() && b.offset < a.offset + a.bytes());
  };
  auto span = [&](int b) {
    const Buffer& x = p.buffers[static_cast<size_t>(b)];
    return fmt::format("'{}' [{}, {})", x.name, x.offset, x.offset + x.bytes());
  };
  const std::map<int, std::pair<size_t, size_t>> live = tempLiveness(p, fn, fn.steps.size());
  std::vector<std::pair<std::pair<size_t, size_t>, int>> order;
  for (const auto& [id, range] : live) order.push_back({range, id});
  std::sort(order.begin(), order.end());
  std::map<int64_t, int> byOffset;  // live temps: offset -> temp
  std::priority_queue<std::pair<size_t, int>, std::vector<std::pair<size_t, int>>, std::greater<>> ends;
  for (const auto& [range, id] : order) {
    while (!ends.empty() && ends.top().first < range.first) {
      byOffset.erase(p.buffers[static_cast<size_t>(ends.top().second)].offset);
      ends.pop();
    }
    const int64_t offset = p.buffers[static_cast<size_t>(id)].offset;
    auto above = byOffset.lower_bound(offset);
    for (auto it : {above, above == byOffset.begin() ? byOffset.end() : std::prev(above)})
      if (it != byOffset.end() && overlaps(id, it->second))
        fail(fmt::format("buffers[{}].offset", id),
             fmt::format("temps {} and {} share arena bytes while both are live at step {}", span(id),
                         span(it->second), range.first));
    byOffset.emplace(offset, id);
    ends.emplace(range.second, id);
  }
}

void checkInPlaceBuckets(const Program& p, const Function& fn, const CheckFailure& fail) {
  std::map<int, int> owner;  // view -> its bucket buffer, over the buckets seen so far
  std::map<int, size_t> starts;  // bucket number -> step of its in-place start
  for (size_t s = 0; s < fn.steps.size(); ++s) {
    const auto* c = std::get_if<CollectiveStep>(&fn.steps[s]);
    if (!c || !c->inPlace) continue;
    const std::string field = fmt::format("steps[{}].tensors", s);
    for (int id : c->tensors)
      if (auto [it, fresh] = owner.emplace(id, c->buffer); !fresh && it->second != c->buffer)
        fail(field, fmt::format("'{}' is a view of two in-place buckets", p.buffers[static_cast<size_t>(id)].name));
    if (c->kind == CollectiveStep::Kind::AllReduceStart) {
      starts[c->bucket] = s;
      continue;
    }
    auto started = starts.find(c->bucket);
    if (started == starts.end()) continue;  // checkCollective reports the missing start
    const auto& start = std::get<CollectiveStep>(fn.steps[started->second]);
    const std::set<int> in(start.tensors.begin(), start.tensors.end()), out(c->tensors.begin(), c->tensors.end());
    std::set<int> all(in);
    all.insert(out.begin(), out.end());
    all.insert(c->buffer);
    auto name = [&](int id) { return p.buffers[static_cast<size_t>(id)].name; };
    for (int id : out)
      if (in.count(id))
        fail(fmt::format("steps[{}].tensors", s),
             fmt::format("'{}' is both a start and a wait tensor of in-place bucket {} (the gradient and its reduced "
                         "value are two temps on the same bytes)", name(id), c->bucket));
    for (size_t t = 0; t < fn.steps.size(); ++t) {
      if (t == s || t == started->second) continue;
      for (int id : stepBuffers(fn.steps[t])) {
        const bool between = t > started->second && t < s;
        if (between && all.count(id))
          fail(fmt::format("steps[{}]", t),
               fmt::format("names '{}' of in-place bucket {} between its start (step {}) and wait (step {}), while "
                           "the communicator owns it", name(id), c->bucket, started->second, s));
        if (t > started->second && in.count(id))
          fail(fmt::format("steps[{}]", t),
               fmt::format("reads '{}' after the start of in-place bucket {} (step {}), which overwrites it with the "
                           "reduced values", name(id), c->bucket, started->second));
        if (t < s && out.count(id))
          fail(fmt::format("steps[{}]", t),
               fmt::format("names '{}' before the wait of in-place bucket {} (step {}) fills it", name(id), c->bucket,
                           s));
      }
    }
    for (int id : fn.outputs)
      if (in.count(id))
        fail("outputs", fmt::format("'{}' is an output but in-place bucket {} overwrites it with the reduced values",
                                    name(id), c->bucket));
  }
}

}  // namespace tessel::rt
