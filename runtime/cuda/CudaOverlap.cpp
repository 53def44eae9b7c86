// Where the compute stream waits for direct shard moves; see CudaOverlap.h.
#include "runtime/cuda/CudaOverlap.h"

#include <algorithm>

namespace tessel::rt {
namespace {

/// The memory of one buffer: a Temp's arena bytes, or another buffer's own allocation.
struct Span {
  bool temp = false;
  int buffer = -1;
  int64_t begin = 0, end = 0;  // Temp: arena bytes [begin, end)
};

Span spanOf(const Program& program, int id) {
  const Buffer& b = program.buffers.at(static_cast<size_t>(id));
  if (b.kind == BufferKind::Temp) return {true, id, b.offset, b.offset + b.bytes()};
  return {false, id, 0, b.bytes()};
}

bool overlaps(const Span& a, const Span& b) {
  if (a.begin == a.end || b.begin == b.end) return false;  // no bytes: nothing to race on
  if (a.temp != b.temp) return false;
  if (!a.temp) return a.buffer == b.buffer;
  return a.begin < b.end && b.begin < a.end;
}

}  // namespace

bool directShardMove(const Program& program, const CollectiveStep& c) {
  using Kind = CollectiveStep::Kind;
  if ((c.kind != Kind::AllGather && c.kind != Kind::ReduceScatter) || c.group <= 1 || c.tensors.size() != 2)
    return false;
  // The communicator's blocks are rank-major ([P][outer][slice][inner]); they are the
  // tensor's own layout exactly when `outer` (the dimensions before the moved one) is 1.
  const Buffer& whole = program.buffers.at(static_cast<size_t>(c.tensors[c.kind == Kind::AllGather ? 1 : 0]));
  for (int64_t d = 0; d < c.dim && d < static_cast<int64_t>(whole.shape.size()); ++d)
    if (whole.shape[static_cast<size_t>(d)] != 1) return false;
  if (c.tensors[0] == c.tensors[1]) return false;
  return !overlaps(spanOf(program, c.tensors[0]), spanOf(program, c.tensors[1]));
}

std::vector<std::vector<size_t>> shardMoveWaits(const Program& program, const Function& f) {
  std::vector<std::vector<size_t>> waits(f.steps.size() + 1);
  struct Pending {
    size_t step;
    std::vector<Span> spans;  // what the collective reads and writes
  };
  std::vector<Pending> pending;  // issued, not yet waited for, in issue order
  for (size_t i = 0; i < f.steps.size(); ++i) {
    std::vector<Span> touched;
    for (int id : stepBuffers(f.steps[i])) touched.push_back(spanOf(program, id));
    // Wait, before step i, for every pending move whose memory step i touches.
    std::erase_if(pending, [&](const Pending& p) {
      const bool hazard = std::any_of(p.spans.begin(), p.spans.end(), [&](const Span& a) {
        return std::any_of(touched.begin(), touched.end(), [&](const Span& b) { return overlaps(a, b); });
      });
      if (hazard) waits[i].push_back(p.step);
      return hazard;
    });
    const auto* c = std::get_if<CollectiveStep>(&f.steps[i]);
    if (c && directShardMove(program, *c))
      pending.push_back({i, {spanOf(program, c->tensors[0]), spanOf(program, c->tensors[1])}});
  }
  for (const Pending& p : pending) waits.back().push_back(p.step);
  return waits;
}

}  // namespace tessel::rt
