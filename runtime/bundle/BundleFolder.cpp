// Temporary bundle folders; see BundleFolder.h.
#include "runtime/bundle/BundleFolder.h"

#include <cerrno>
#include <cstdlib>

#include <unistd.h>

namespace tessel::rt {

namespace fs = std::filesystem;

namespace {

/// The PID of `name` if it is `.<base>.tmp.<pid>` or `.<base>.old.<pid>`, else 0.
pid_t writerOf(const std::string& name, const std::string& base) {
  for (const char* kind : {".tmp.", ".old."}) {
    const std::string prefix = "." + base + kind;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (end && *end == '\0' && pid > 0 && name[prefix.size()] != '+' && name[prefix.size()] != '-')
      return static_cast<pid_t>(pid);
  }
  return 0;
}

}  // namespace

int sweepStaleBundleFolders(const fs::path& target) {
  const std::string base = target.filename().string();
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(target.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = writerOf(it->path().filename().string(), base);
    if (!processGone(pid)) continue;
    std::error_code ignored;
    if (fs::remove_all(it->path(), ignored) > 0 && !ignored) ++removed;
  }
  return removed;
}

BundleWriteGuard::BundleWriteGuard(fs::path tmp, fs::path target)
    : tmp_(std::move(tmp)), target_(std::move(target)), catch_(/*restartSyscalls=*/true) {}  // writes go on

BundleWriteGuard::~BundleWriteGuard() {
  // A signal after the last checkpoint (the folders are already gone) still takes effect.
  catch_.restore();
  catch_.reraise();
}

void BundleWriteGuard::undo() {
  std::error_code ignored;
  if (!old_.empty()) {
    if (fs::exists(fs::symlink_status(tmp_, ignored))) {
      fs::rename(old_, target_, ignored);  // the new bundle is not in place: the earlier one returns
    } else {
      fs::remove_all(old_, ignored);  // the new bundle is in place
    }
  }
  fs::remove_all(tmp_, ignored);
}

void BundleWriteGuard::checkpoint() {
  if (InterruptCatch::caughtSignal() == 0) return;
  undo();
  catch_.reraise();
}

}  // namespace tessel::rt
