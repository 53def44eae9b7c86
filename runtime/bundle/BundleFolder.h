// The temporary folders writeBundle (runtime/bundle/Bundle.h) works in, and their cleanup.
// MLIR-free.
//
// Promise: writeBundle builds a bundle NAME in the sibling folder `.NAME.tmp.PID` and moves
// an earlier bundle aside to `.NAME.old.PID` while it swaps the new one in (PID: the writer's
// process id). Neither outlives the write: a failure removes them (and puts an earlier bundle
// back), SIGINT or SIGTERM during the write removes them before the signal takes effect
// (runtime/io/Interrupt.h, as for codegen/KernelCache's interrupted compiler builds), and a folder left by a writer that died otherwise (SIGKILL, power loss) is
// swept by the next write of the same NAME once its PID no longer runs.
#pragma once

#include "runtime/io/Interrupt.h"

#include <csignal>
#include <filesystem>
#include <string>

namespace tessel::rt {

/// Removes `.NAME.tmp.PID` and `.NAME.old.PID` beside `target` (NAME its file name) whose PID
/// is not a running process and is not this one. Returns how many were removed. Never throws.
int sweepStaleBundleFolders(const std::filesystem::path& target);

/// Catches SIGINT and SIGTERM while a bundle is written (a flag set by the handler, the only
/// async-signal-safe thing to do); the writer calls checkpoint() between its steps. The
/// previous handlers come back on destruction, which then raises a signal that came after the
/// last checkpoint.
class BundleWriteGuard {
 public:
  /// `tmp` is the folder being written; `old`, once set (movedAside), the earlier bundle.
  BundleWriteGuard(std::filesystem::path tmp, std::filesystem::path target);
  ~BundleWriteGuard();
  BundleWriteGuard(const BundleWriteGuard&) = delete;
  BundleWriteGuard& operator=(const BundleWriteGuard&) = delete;

  /// The earlier bundle at the target now lives at `old`.
  void movedAside(std::filesystem::path old) { old_ = std::move(old); }
  /// If a signal came: cleans up (see undo), restores the previous handlers and raises the
  /// signal again. Returns only when no signal came (or a previous handler returns).
  void checkpoint();
  /// Removes the temporary folder and, when the new bundle is not in place yet, moves the
  /// earlier bundle back to the target; a moved-aside bundle is removed once the new one is
  /// in place. Never throws.
  void undo();

 private:
  std::filesystem::path tmp_, target_, old_;
  InterruptCatch catch_;
};

}  // namespace tessel::rt
