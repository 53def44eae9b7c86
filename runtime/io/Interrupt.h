// Ctrl-C (SIGINT) and SIGTERM during work that must clean up before the process dies (a
// kernel build's folder, a bundle's temporary folders), and whether the process that left a
// folder behind still runs. MLIR-free; codegen/KernelCache and runtime/bundle/BundleFolder
// share it.
//
// The handler only records the signal (the one async-signal-safe thing to do); the work
// polls caughtSignal() at its checkpoints, cleans up, then calls reraise(), which restores
// the previous handlers and raises the signal again, so the process ends as it would have.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <csignal>

#include <signal.h>
#include <unistd.h>

namespace tessel::rt {

namespace interrupt_detail {
inline volatile std::sig_atomic_t caught = 0;
extern "C" inline void onSignal(int sig) { caught = sig; }
}  // namespace interrupt_detail

/// Catches SIGINT and SIGTERM from construction until restore() or destruction, which put
/// the previous handlers back. One at a time per process (the caught signal is global).
class InterruptCatch {
 public:
  /// `restartSyscalls`: SA_RESTART (blocking writes go on; the next checkpoint acts), or not
  /// (a blocked poll returns at once with EINTR).
  explicit InterruptCatch(bool restartSyscalls) {
    interrupt_detail::caught = 0;
    struct sigaction sa {};
    sa.sa_handler = interrupt_detail::onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = restartSyscalls ? SA_RESTART : 0;
    sigaction(SIGINT, &sa, &oldInt_);
    sigaction(SIGTERM, &sa, &oldTerm_);
  }
  ~InterruptCatch() { restore(); }
  InterruptCatch(const InterruptCatch&) = delete;
  InterruptCatch& operator=(const InterruptCatch&) = delete;

  /// The signal caught so far (SIGINT or SIGTERM), or 0.
  static int caughtSignal() { return interrupt_detail::caught; }

  /// Puts the previous handlers back (once).
  void restore() {
    if (restored_) return;
    restored_ = true;
    sigaction(SIGINT, &oldInt_, nullptr);
    sigaction(SIGTERM, &oldTerm_, nullptr);
  }

  /// If a signal was caught: restores the previous handlers and raises it again (by default
  /// the process ends here). Returns when none was caught, or a previous handler returns.
  void reraise() {
    const int sig = interrupt_detail::caught;
    if (sig == 0) return;
    interrupt_detail::caught = 0;
    restore();
    raise(sig);
  }

 private:
  struct sigaction oldInt_ {}, oldTerm_ {};
  bool restored_ = false;
};

/// Whether process `pid` of this host has exited (not this process; kill(pid, 0) fails with
/// ESRCH): the folder it was writing is stale.
inline bool processGone(pid_t pid) { return pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace tessel::rt
