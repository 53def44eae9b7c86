// The memory plan with in-place gradient buckets; see BucketViews.h.
//
// Why the hazards the all-reduce brings are excluded: the communicator reads and writes the
// bucket from the start to the wait while later steps compute. A start tensor named by no
// step after the start is neither read nor written again (a lowered temp is written only by
// the step that first names it); a wait tensor first named by the wait is written by nothing
// earlier; and the bucket is one planned block of parts, part i (the bytes of start and wait
// tensor i) busy from the step producing gradient i to the last read of its reduced value,
// so no other temp shares those bytes meanwhile, and none shares the bucket's bytes from its
// start to its wait (every part spans that window).
#include "codegen/BucketViews.h"

#include <set>

namespace tessel {
namespace {

constexpr int64_t kAlignment = 64;  // planMemory's and validateProgram's temp alignment

/// The (start, wait) step indices of each asynchronous all-reduce bucket of `fn`.
std::map<int, std::pair<size_t, size_t>> bucketSteps(const rt::Function& fn) {
  std::map<int, std::pair<size_t, size_t>> steps;
  for (size_t s = 0; s < fn.steps.size(); ++s) {
    const auto* c = std::get_if<rt::CollectiveStep>(&fn.steps[s]);
    if (!c || c->synchronous) continue;
    if (c->kind == rt::CollectiveStep::Kind::AllReduceStart) steps[c->bucket].first = s;
    if (c->kind == rt::CollectiveStep::Kind::AllReduceWait) steps[c->bucket].second = s;
  }
  return steps;
}

}  // namespace

int64_t planTemps(rt::Program& program, rt::Function& fn, const std::vector<int>& temps,
                  const std::map<int, std::pair<int64_t, int64_t>>& live, bool inPlaceBuckets) {
  std::map<int, std::pair<int64_t, int64_t>> span(live);  // a bucket's lifetime grows to its views'
  std::map<int, std::vector<LivePart>> parts;              // an in-place bucket's views, by bucket
  std::map<int, int> viewOf;                               // view -> its bucket buffer
  std::set<int> claimed;                                   // views and buckets already in place
  for (auto [bucket, at] : inPlaceBuckets ? bucketSteps(fn) : std::map<int, std::pair<size_t, size_t>>{}) {
    auto& start = std::get<rt::CollectiveStep>(fn.steps[at.first]);
    auto& wait = std::get<rt::CollectiveStep>(fn.steps[at.second]);
    const auto S = static_cast<int64_t>(at.first), W = static_cast<int64_t>(at.second);
    bool ok = start.tensors.size() == wait.tensors.size() && at.first < at.second && !claimed.count(start.buffer);
    std::set<int> members;
    for (size_t i = 0; ok && i < start.tensors.size(); ++i) {
      const int g = start.tensors[i], r = wait.tensors[i];
      auto lg = live.find(g), lr = live.find(r);
      const rt::Buffer& bg = program.buffers[static_cast<size_t>(g)];
      const rt::Buffer& br = program.buffers[static_cast<size_t>(r)];
      ok = lg != live.end() && lr != live.end() && bg.kind == rt::BufferKind::Temp &&
           br.kind == rt::BufferKind::Temp && bg.dtype == rt::DType::F32 && br.dtype == rt::DType::F32 &&
           bg.numel() == br.numel() && lg->second.first < S && lg->second.second == S && lr->second.first == W &&
           members.insert(g).second && members.insert(r).second && !claimed.count(g) && !claimed.count(r) &&
           (i + 1 == start.tensors.size() || bg.bytes() % kAlignment == 0);
    }
    if (!ok) continue;  // keeps the copies
    start.inPlace = wait.inPlace = true;
    // Part i: the bytes of start and wait tensor i, busy from the step producing the gradient
    // to the last read of its reduced value (which covers the bucket's own start to wait).
    auto& block = span.at(start.buffer);
    int64_t before = 0;  // bytes of the views before view i
    for (size_t i = 0; i < start.tensors.size(); ++i) {
      const int g = start.tensors[i], r = wait.tensors[i];
      const int64_t bytes = program.buffers[static_cast<size_t>(g)].bytes();
      parts[start.buffer].push_back({before, bytes, live.at(g).first, live.at(r).second});
      before += bytes;
      block.first = std::min(block.first, live.at(g).first);
      block.second = std::max(block.second, live.at(r).second);
    }
    for (int id : members) {
      viewOf[id] = start.buffer;
      span.erase(id);
    }
    claimed.insert(members.begin(), members.end());
    claimed.insert(start.buffer);
  }

  std::vector<int> planned;
  std::vector<LiveBuffer> lives;
  for (int id : temps)
    if (!viewOf.count(id)) {
      planned.push_back(id);
      auto block = parts.find(id);
      lives.push_back({program.buffers[static_cast<size_t>(id)].bytes(), span.at(id).first, span.at(id).second,
                       block == parts.end() ? std::vector<LivePart>{} : block->second});
    }
  MemoryPlan plan = planMemory(lives);
  for (size_t t = 0; t < planned.size(); ++t) program.buffers[static_cast<size_t>(planned[t])].offset = plan.offsets[t];
  // Views: tensor i of an in-place start and of its wait at the bucket's offset plus the
  // bytes of tensors 0 .. i-1.
  for (const rt::Step& step : fn.steps) {
    const auto* c = std::get_if<rt::CollectiveStep>(&step);
    if (!c || !c->inPlace) continue;
    int64_t at = program.buffers[static_cast<size_t>(c->buffer)].offset;
    for (int id : c->tensors) {
      program.buffers[static_cast<size_t>(id)].offset = at;
      at += program.buffers[static_cast<size_t>(id)].bytes();
    }
  }
  return plan.arenaBytes;
}

}  // namespace tessel
