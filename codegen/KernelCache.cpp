// The kernel cache's temporary build folders; see KernelCache.h.
//
// Interrupts: SIGINT and SIGTERM handlers are installed only while a compiler runs. They set
// a flag (the only async-signal-safe thing to do); the loop that reads the compiler's output
// polls with a 100 ms timeout, so it sees the flag whichever thread the kernel delivered the
// signal to, then kills the compiler's process group, reaps it, removes the folder, restores
// the previous handlers and raises the signal again.
#include "codegen/KernelCache.h"

#include "runtime/io/Interrupt.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace tessel {
namespace {

namespace fs = std::filesystem;

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "host";
  std::string out(name);
  for (char& c : out)
    if (c == '.' || c == '/') c = '_';  // the folder name is split on '.'
  return out;
}

/// The pid of a "build.<key>.<host>.<pid>" folder of this host, or 0.
pid_t ownerOnThisHost(const std::string& name, const std::string& host) {
  size_t last = name.rfind('.');
  if (last == std::string::npos || last == 0) return 0;
  size_t prev = name.rfind('.', last - 1);
  if (prev == std::string::npos || name.compare(prev + 1, last - prev - 1, host) != 0) return 0;
  char* end = nullptr;
  long pid = std::strtol(name.c_str() + last + 1, &end, 10);
  return end && *end == '\0' && pid > 0 ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

std::string buildFolderName(uint64_t key) {
  return fmt::format("build.{:016x}.{}.{}", key, hostName(), getpid());
}

int sweepStaleBuildFolders(const std::string& cacheDir) {
  const std::string host = hostName();
  const auto now = fs::file_time_type::clock::now();
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(cacheDir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool build = name.rfind("build.", 0) == 0;
    const bool rejected = name.size() > 13 && name.compare(name.size() - 13, 13, ".rejected.cpp") == 0;
    if (!build && !rejected) continue;
    std::error_code ignored;
    auto written = fs::last_write_time(it->path(), ignored);
    bool stale = !ignored && now - written > kStaleBuildAge;
    if (build && !stale) {
      pid_t pid = ownerOnThisHost(name, host);
      stale = rt::processGone(pid);
    }
    if (stale && fs::remove_all(it->path(), ignored) > 0 && !ignored) ++removed;
  }
  return removed;
}

int runCompilerIn(const std::string& workFolder, const std::string& command, std::string& output) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  rt::InterruptCatch handlers(/*restartSyscalls=*/false);  // a blocked poll returns at once
  pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (child == 0) {
    // Only async-signal-safe calls until exec. Its own group, so that one kill reaches the
    // shell, the compiler driver and its cc1plus; default signal dispositions for the group.
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(child, child);  // also here: no window in which a kill(-child) misses the group
  close(fds[1]);
  char buf[4096];
  for (;;) {
    if (rt::InterruptCatch::caughtSignal()) break;
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  bool reaped = false;
  while (!rt::InterruptCatch::caughtSignal() && !reaped) {
    if (waitpid(child, &status, 0) == child) reaped = true;
    else if (errno != EINTR) return -1;
  }
  // Checked after the wait too: a signal that came once the output ended still cleans up.
  if (rt::InterruptCatch::caughtSignal() != 0) {
    if (!reaped) {
      kill(-child, SIGKILL);
      while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    std::error_code ignored;
    fs::remove_all(workFolder, ignored);
    handlers.reraise();
    return -1;  // a previous handler that returns: the build did not complete
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace tessel
