// Where a trainer's start-up time goes, from process start to the first step's launch:
// phases marked as they end (compile, lower, host compile, executor, parameter init, data,
// first step), each with the seconds since the process started. The process start is the
// kernel's (/proc/self/stat starttime), so loading the binary counts too.
// One process-wide record; not thread-safe (the start-up is single-threaded). Header-only so
// that dsl/ and runtime/ code mark phases without a library of their own.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

namespace tessel::rt {

/// Seconds since this process started, by the kernel's clock (CLOCK_BOOTTIME against
/// /proc/self/stat field 22, clock ticks since boot; resolution 1 / sysconf(_SC_CLK_TCK),
/// 10 ms on Linux). Falls back to the first call's time when /proc cannot be read.
inline double secondsSinceProcessStart() {
  static const double startBoot = [] {
    std::ifstream in("/proc/self/stat");
    std::string line;
    std::getline(in, line);
    size_t close = line.rfind(')');  // the command name may hold spaces; fields follow ')'
    if (close != std::string::npos) {
      std::istringstream fields(line.substr(close + 2));
      std::string f;
      for (int i = 3; i <= 22 && fields >> f; ++i)
        if (i == 22) return std::stod(f) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
    timespec now{};
    clock_gettime(CLOCK_BOOTTIME, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
  }();
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec) - startBoot;
}

/// The phases marked so far: (name, seconds since process start at its end), in order.
inline std::vector<std::pair<std::string, double>>& startupPhases() {
  static std::vector<std::pair<std::string, double>> phases;
  return phases;
}

/// Marks the end of start-up phase `name` now. A phase marked again (a second program) adds a
/// second entry under the same name.
inline void markStartupPhase(const std::string& name) { startupPhases().emplace_back(name, secondsSinceProcessStart()); }

/// "startup: compile 0.41 s, lower 0.12 s, ..., first step launched at 1.73 s after process
/// start": each phase's own duration (from the previous mark, the first from process start).
inline std::string startupSummary() {
  std::string out = "startup:";
  double last = 0;
  for (const auto& [name, at] : startupPhases()) {
    out += fmt::format(" {} {:.3f} s,", name, at - last);
    last = at;
  }
  return out + fmt::format(" first step launched at {:.3f} s after process start", last);
}

}  // namespace tessel::rt
