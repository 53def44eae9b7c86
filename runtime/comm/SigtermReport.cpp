// The SIGTERM status report (see SigtermReport.h).
#include "runtime/comm/SigtermReport.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace tessel::rt::comm {
namespace {

constexpr size_t kCapacity = 2048;

struct Board {
  std::atomic<uint64_t> version{0};  // odd while a writer is updating the text
  std::atomic<size_t> length{0};
  std::atomic<char> text[kCapacity];
};

Board board;
std::atomic<bool> installed{false};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<char>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

extern "C" void onSigterm(int sig) {
  char line[kCapacity];
  size_t n = 0;
  for (int attempt = 0; attempt < 64; ++attempt) {
    uint64_t before = board.version.load(std::memory_order_acquire);
    if (before & 1) continue;
    n = board.length.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) line[i] = board.text[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (board.version.load(std::memory_order_relaxed) == before) break;
    n = 0;
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
  size_t n = std::min(line.size(), kCapacity - 1);
  board.version.fetch_add(1, std::memory_order_acq_rel);
  for (size_t i = 0; i < n; ++i) board.text[i].store(line[i], std::memory_order_relaxed);
  board.text[n].store('\n', std::memory_order_relaxed);
  board.length.store(n + 1, std::memory_order_relaxed);
  board.version.fetch_add(1, std::memory_order_release);
  writing.clear(std::memory_order_release);
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
