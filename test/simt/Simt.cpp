// SIMT harness; see Simt.h.
//
// One scheduler context per launch runs a block's fibers round-robin. A fiber runs until it
// reaches a barrier (block or warp) or returns; the scheduler then moves on. A barrier opens
// when every live fiber of its scope has arrived; if every live fiber waits and no barrier
// can open, the block is deadlocked and the launch throws.
#include "test/simt/Simt.h"

#include <ucontext.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace simt {
namespace {

constexpr size_t kStackBytes = 256 * 1024;

enum class Wait { None, Block, Warp };

struct Fiber {
  ThreadState state;
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  Wait waiting = Wait::None;
  uint64_t generation = 0;  // which barrier instance it waits for
  bool done = false;
  float fvalue = 0;
  int ivalue = 0;
  double dvalue = 0;
};

struct Block {
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  size_t running = 0;
  const std::function<void()>* body = nullptr;
  uint64_t switches = 0;
};

Block* gBlock = nullptr;
uint64_t gLastSwitches = 0;

void yieldToScheduler() {
  Block& b = *gBlock;
  ++b.switches;
  swapcontext(&b.fibers[b.running].context, &b.scheduler);
}

void fiberEntry() {
  Block& b = *gBlock;
  (*b.body)();
  b.fibers[b.running].done = true;
  // returning resumes uc_link, the scheduler
}

/// Waits until every live fiber of the scope (the whole block, or this fiber's warp) has
/// reached this barrier.
void barrier(Wait scope) {
  Block& b = *gBlock;
  Fiber& me = b.fibers[b.running];
  me.waiting = scope;
  yieldToScheduler();
}

}  // namespace

ThreadState& current() {
  if (!gBlock) throw std::logic_error("simt: CUDA builtins used outside simt::launch");
  return gBlock->fibers[gBlock->running].state;
}

void syncthreads() { barrier(Wait::Block); }

namespace {
template <typename T>
T shuffleImpl(T value, const std::function<int(int)>& source, T Fiber::*slot) {
  Block& b = *gBlock;
  size_t me = b.running;
  unsigned lane = b.fibers[me].state.linear % 32;
  size_t warpBase = me - lane;
  b.fibers[me].*slot = value;
  barrier(Wait::Warp);  // everyone published
  size_t src = warpBase + static_cast<size_t>(source(static_cast<int>(lane)));
  T result = src < b.fibers.size() ? b.fibers[src].*slot : value;
  barrier(Wait::Warp);  // everyone read before the slots are reused
  return result;
}
}  // namespace

float shuffle(float value, const std::function<int(int)>& source) {
  return shuffleImpl(value, source, &Fiber::fvalue);
}
int shuffle(int value, const std::function<int(int)>& source) {
  return shuffleImpl(value, source, &Fiber::ivalue);
}
double shuffle(double value, const std::function<int(int)>& source) {
  return shuffleImpl(value, source, &Fiber::dvalue);
}

void launch(dim3 grid, dim3 block, const std::function<void()>& body) {
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads > 1024)
    throw std::invalid_argument("simt: a block needs 1..1024 threads, got " + std::to_string(threads));
  gLastSwitches = 0;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block b;
        b.body = &body;
        b.fibers.resize(threads);
        for (unsigned t = 0; t < threads; ++t) {
          Fiber& f = b.fibers[t];
          f.state.thread = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
          f.state.block = dim3(bx, by, bz);
          f.state.blockSize = block;
          f.state.gridSize = grid;
          f.state.linear = t;
          f.stack.reset(new char[kStackBytes]);
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = f.stack.get();
          f.context.uc_stack.ss_size = kStackBytes;
          f.context.uc_link = &b.scheduler;
          makecontext(&f.context, fiberEntry, 0);
        }
        gBlock = &b;
        for (;;) {
          bool progressed = false;
          for (size_t i = 0; i < threads; ++i) {
            Fiber& f = b.fibers[i];
            if (f.done || f.waiting != Wait::None) continue;
            b.running = i;
            swapcontext(&b.scheduler, &f.context);
            progressed = true;
          }
          // Open barriers whose scope has fully arrived.
          bool allDone = true, opened = false;
          for (size_t i = 0; i < threads; ++i) allDone &= b.fibers[i].done;
          if (allDone) break;
          auto arrived = [&](size_t from, size_t to, Wait kind) {
            bool any = false;
            for (size_t i = from; i < to; ++i) {
              if (b.fibers[i].done) continue;
              if (b.fibers[i].waiting != kind) return false;
              any = true;
            }
            return any;
          };
          if (arrived(0, threads, Wait::Block)) {
            for (Fiber& f : b.fibers) f.waiting = Wait::None;
            opened = true;
          }
          for (size_t w = 0; w < threads; w += 32)
            if (arrived(w, std::min<size_t>(w + 32, threads), Wait::Warp)) {
              for (size_t i = w; i < std::min<size_t>(w + 32, threads); ++i)
                b.fibers[i].waiting = Wait::None;
              opened = true;
            }
          if (!progressed && !opened) {
            gBlock = nullptr;
            throw std::runtime_error(
                "simt: deadlock in block (" + std::to_string(bx) + ", " + std::to_string(by) +
                ", " + std::to_string(bz) +
                "): threads wait at a barrier that others never reach (a __syncthreads or "
                "shuffle under divergent control flow, or a thread that exited early)");
          }
        }
        gLastSwitches += b.switches;
        gBlock = nullptr;
      }
}

uint64_t lastLaunchSwitches() { return gLastSwitches; }

}  // namespace simt
