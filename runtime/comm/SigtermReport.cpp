// The SIGTERM status report (see SigtermReport.h).
#include "runtime/comm/SigtermReport.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <pthread.h>
#include <unistd.h>

namespace tessel::rt::comm {
namespace {

constexpr size_t kCapacity = 2048;

/// Two slots: a writer fills the one not in use and then publishes it, so a handler that
/// interrupts the writer (on its own thread) still finds a complete line in the other.
struct Slot {
  std::atomic<uint64_t> version{0};  // odd while a writer is updating the text
  std::atomic<size_t> length{0};
  std::atomic<char> text[kCapacity];
};

Slot slots[2];
std::atomic<int> active{0};
std::atomic<bool> installed{false};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<char>::is_always_lock_free &&
                  std::atomic<int>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

extern "C" void onSigterm(int sig) {
  char line[kCapacity];
  size_t n = 0;
  for (int attempt = 0; attempt < 64; ++attempt) {
    const Slot& slot = slots[active.load(std::memory_order_acquire)];
    uint64_t before = slot.version.load(std::memory_order_acquire);
    n = slot.length.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) line[i] = slot.text[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!(before & 1) && slot.version.load(std::memory_order_relaxed) == before) break;
    // A writer on another thread is rewriting this slot: retry; after 64 tries the last
    // copy is written anyway (a torn line beats none).
  }
  if (n > 0) {
    ssize_t ignored = write(STDERR_FILENO, line, n);
    (void)ignored;
  }
  // Die of SIGTERM as the launcher intended (it is blocked in this handler, so it is
  // delivered when the handler returns).
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void publishStatus(const std::string& line) {
  static std::atomic_flag writing = ATOMIC_FLAG_INIT;  // one writer at a time
  while (writing.test_and_set(std::memory_order_acquire)) {
  }
  const int next = 1 - active.load(std::memory_order_relaxed);
  Slot& slot = slots[next];
  size_t n = std::min(line.size(), kCapacity - 1);
  slot.version.fetch_add(1, std::memory_order_acq_rel);
  for (size_t i = 0; i < n; ++i) slot.text[i].store(line[i], std::memory_order_relaxed);
  slot.text[n].store('\n', std::memory_order_relaxed);
  slot.length.store(n + 1, std::memory_order_relaxed);
  slot.version.fetch_add(1, std::memory_order_release);
  active.store(next, std::memory_order_release);
  writing.clear(std::memory_order_release);
}

void blockSigtermInThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool installSigtermReport() {
  struct sigaction old {};
  if (sigaction(SIGTERM, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
      (old.sa_flags & SA_SIGINFO))
    return false;
  struct sigaction act {};
  act.sa_handler = onSigterm;
  sigemptyset(&act.sa_mask);
  act.sa_flags = 0;
  if (sigaction(SIGTERM, &act, nullptr) != 0) return false;
  installed = true;
  return true;
}

void removeSigtermReport() {
  if (!installed.exchange(false)) return;
  struct sigaction act {};
  act.sa_handler = SIG_DFL;
  sigemptyset(&act.sa_mask);
  sigaction(SIGTERM, &act, nullptr);
}

}  // namespace tessel::rt::comm
