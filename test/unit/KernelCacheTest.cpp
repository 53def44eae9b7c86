// The kernel cache keeps no build folder of a build that is over: a folder of a dead
// process is swept by the next build, a build interrupted by SIGINT or SIGTERM removes its
// folder (and its compiler) before the signal ends the process, and a failed build removes
// its folder too.
#include "codegen/HostCompiler.h"
#include "codegen/KernelCache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

const char* kGood = "extern \"C\" int seven() { return 7; }\n";

fs::path freshDir(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// Entries of `dir` whose names start with "build.".
std::vector<std::string> buildFolders(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("build.", 0) == 0) out.push_back(e.path().filename().string());
  return out;
}

/// A pid that certainly belonged to a process that is gone: a child that exited and was reaped.
pid_t deadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

/// The host part of this process's build folder names.
std::string thisHost() {
  std::string name = tessel::buildFolderName(0);  // build.<key>.<host>.<pid>
  size_t last = name.rfind('.');
  return name.substr(23, last - 23);  // "build." + 16 hex digits + "."
}

TEST(KernelCache, StaleBuildFoldersAreSweptLiveOnesKept) {
  fs::path dir = freshDir("tessel-cache-sweep");
  const std::string host = thisHost();
  fs::path dead = dir / ("build.00000000000000aa." + host + "." + std::to_string(deadPid()));
  fs::path live = dir / ("build.00000000000000bb." + host + "." + std::to_string(getppid()));
  fs::path otherHost = dir / "build.00000000000000cc.some-other-host.1";
  fs::path oldOtherHost = dir / "build.00000000000000dd.some-other-host.2";
  fs::path oldRejected = dir / "k00000000000000ee.rejected.cpp";
  for (const fs::path& p : {dead, live, otherHost, oldOtherHost}) {
    fs::create_directories(p);
    std::ofstream(p / "k.cpp") << "// half a build\n";
  }
  std::ofstream(oldRejected) << "// rejected\n";
  // Older than kStaleBuildAge: whoever owns them has given up long ago.
  auto old = fs::file_time_type::clock::now() - tessel::kStaleBuildAge - std::chrono::hours(1);
  fs::last_write_time(oldOtherHost, old);
  fs::last_write_time(oldRejected, old);

  tessel::HostCompileOptions o;
  o.cacheDir = dir.string();
  tessel::KernelLibrary lib = tessel::buildKernelLibrary(kGood, o);
  EXPECT_EQ(reinterpret_cast<int (*)()>(lib.symbol("seven"))(), 7);
  EXPECT_FALSE(fs::exists(dead)) << "a dead process's folder was kept";
  EXPECT_FALSE(fs::exists(oldOtherHost)) << "a folder older than kStaleBuildAge was kept";
  EXPECT_FALSE(fs::exists(oldRejected));
  EXPECT_TRUE(fs::exists(live)) << "a live process's folder was removed";
  EXPECT_TRUE(fs::exists(otherHost)) << "a recent folder of another host was removed";
  EXPECT_EQ(buildFolders(dir).size(), 2u);  // live and otherHost; this build left nothing
}

/// True if `pid` is a process that has not exited. A killed process whose parent is gone
/// stays a zombie until something reaps it (in a container, perhaps nothing does): it has
/// exited, so "Z" in /proc/<pid>/stat counts as not running.
bool running(pid_t pid) {
  for (int i = 0; i < 50; ++i) {  // up to 5 s for the kill to land
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    size_t close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z') return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

// A compiler that never finishes on its own: records its pid, then sleeps (exec, so the pid
// is the sleeping process).
fs::path slowCompiler(const fs::path& dir) {
  fs::path script = dir / "slow-cc.sh";
  std::ofstream(script) << "#!/bin/sh\necho $$ > '" << (dir / "cc.pid").string() << "'\nexec sleep 60\n";
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

TEST(KernelCache, InterruptedBuildLeavesNoFolderAndNoCompiler) {
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    fs::path dir = freshDir("tessel-cache-interrupt");
    fs::path cache = dir / "kernels";
    tessel::HostCompileOptions o;
    o.cacheDir = cache.string();
    o.compiler = slowCompiler(dir).string();
    pid_t child = fork();
    if (child == 0) {
      try {
        tessel::buildKernelLibrary(kGood, o);
      } catch (...) {
      }
      _exit(3);  // reached only if the signal did not end the build
    }
    // Wait (at most 30 s) until the compiler runs inside its build folder.
    fs::path pidFile = dir / "cc.pid";
    for (int i = 0; i < 300 && !fs::exists(pidFile); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(fs::exists(pidFile)) << "the fake compiler never started";
    ASSERT_EQ(buildFolders(cache).size(), 1u);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the pid is written before exec
    pid_t compiler = 0;
    std::ifstream(pidFile) >> compiler;
    ASSERT_GT(compiler, 0);
    kill(child, sig);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
        << "the builder did not end by the signal (status " << status << ")";
    EXPECT_TRUE(buildFolders(cache).empty()) << "left behind: " << buildFolders(cache)[0];
    EXPECT_FALSE(running(compiler)) << "the compiler (pid " << compiler << ") outlived its build";
  }
}

TEST(KernelCache, FailedBuildRemovesItsFolder) {
  fs::path dir = freshDir("tessel-cache-failed");
  tessel::HostCompileOptions o;
  o.cacheDir = dir.string();
  // A compiler error, and a compiler that cannot be started: both are failures after the
  // folder exists.
  for (std::string compiler : {std::string("c++"), std::string("/nonexistent/tessel-cc")}) {
    o.compiler = compiler;
    EXPECT_THROW(tessel::buildKernelLibrary("extern \"C\" int broken() { return undefined_name; }\n", o),
                 tessel::HostCompileError);
    EXPECT_TRUE(buildFolders(dir).empty()) << compiler << " left " << buildFolders(dir)[0];
  }
}

}  // namespace
