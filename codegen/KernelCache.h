// The kernel cache's temporary build folders: naming them, running a compiler inside one,
// and sweeping those that a dead or interrupted build left behind.
//
// Promise: a build folder ("build.<key>.<host>.<pid>" under the cache folder) never outlives
// the build that made it. On success or on any failure (compiler error, a full disk) its
// builder removes it; on SIGINT or SIGTERM while the compiler runs, the compiler's process
// group is killed, the folder removed, the previous signal handler restored and the signal
// raised again, so the process ends (or handles it) as it would have without a build in
// flight. Folders that a killed process (SIGKILL, power loss) left behind are swept by the
// next build: those of this host whose process is gone, and any older than kStaleBuildAge
// (a folder of another host sharing the cache, whose process this host cannot see). Plain
// C++ and POSIX, no MLIR.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tessel {

/// Age after which a build folder is stale whoever owns it: far longer than any kernel
/// build (a GPT training program compiles in under a minute on 2 cores), so a live build
/// of another host is never removed.
inline constexpr std::chrono::hours kStaleBuildAge{24};

/// "build.<16 hex digits of key>.<host name>.<pid of this process>": the private folder in
/// which this process builds `key` (concurrent builders never share one).
std::string buildFolderName(uint64_t key);

/// Removes every stale build folder under `cacheDir` (see the file comment) and rejected
/// sources ("*.rejected.cpp", kept for the user to read) older than kStaleBuildAge. Errors
/// (a folder removed concurrently, no permission) are ignored: sweeping is best effort.
/// Returns how many entries it removed.
int sweepStaleBuildFolders(const std::string& cacheDir);

/// Runs `command` with /bin/sh in its own process group, stdout and stderr into `output`,
/// and returns its exit status (-1 if it could not start or did not exit normally). If this
/// process receives SIGINT or SIGTERM meanwhile, kills the group, removes `workFolder` and
/// re-raises the signal (the function then returns only if a previous handler returns).
int runCompilerIn(const std::string& workFolder, const std::string& command, std::string& output);

}  // namespace tessel
