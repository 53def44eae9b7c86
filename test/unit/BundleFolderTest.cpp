// writeBundle's temporary folders (runtime/bundle/BundleFolder.h): an interrupted write
// (SIGINT, SIGTERM), a failed one, and a writer that died leave nothing behind beside the
// target, and an earlier bundle at the target survives an interrupted or failed write.
#include "runtime/bundle/Bundle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using tessel::rt::BundleInfo;
using tessel::rt::Program;

fs::path freshDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("tessel_bundle_folder_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void writeText(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

std::string readText(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

BundleInfo info() {
  BundleInfo i;
  i.model = "test";
  i.config = nlohmann::json::object();
  i.seq = 1;
  i.batch = 1;
  i.optimizer = "adamw";
  return i;
}

/// The names in `dir` that start with "." (writeBundle's temporary folders).
std::vector<std::string> hidden(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string()[0] == '.') names.push_back(e.path().filename().string());
  return names;
}

/// A process id that no process has: a child that exited and was reaped.
pid_t deadPid() {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

TEST(BundleFolder, StaleFoldersOfDeadWritersAreSweptAtTheNextWrite) {
  fs::path dir = freshDir("stale");
  writeText(dir / "kernels.so", "a library");
  const pid_t dead = deadPid(), live = getppid();
  for (const std::string& name :
       {".b.tmp." + std::to_string(dead), ".b.old." + std::to_string(dead), ".b.tmp." + std::to_string(live),
        ".other.tmp." + std::to_string(dead), std::string(".b.tmp.notapid")}) {
    fs::create_directories(dir / name);
    writeText(dir / name / "program.json", "{}");
  }
  tessel::rt::writeBundle(Program{}, (dir / "kernels.so").string(), info(), (dir / "b").string());
  EXPECT_TRUE(fs::exists(dir / "b" / "bundle.json"));
  // Only the dead writer's folders of this target go: a running writer's, another target's
  // and a name that is not a writer's stay.
  std::vector<std::string> left = hidden(dir);
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{".b.tmp." + std::to_string(live), ".b.tmp.notapid",
                                            ".other.tmp." + std::to_string(dead)}));
}

TEST(BundleFolder, AFailedWriteLeavesNoFolderAndKeepsTheEarlierBundle) {
  fs::path dir = freshDir("failed");
  writeText(dir / "kernels.so", "a library");
  tessel::rt::writeBundle(Program{}, (dir / "kernels.so").string(), info(), (dir / "b").string());
  const std::string before = readText(dir / "b" / "bundle.json");
  EXPECT_THROW(tessel::rt::writeBundle(Program{}, (dir / "missing.so").string(), info(), (dir / "b").string()),
               std::runtime_error);
  EXPECT_TRUE(hidden(dir).empty());
  EXPECT_EQ(readText(dir / "b" / "bundle.json"), before);
}

/// Runs writeBundle in a child whose kernel library is a FIFO, so that the write stops inside
/// (the program is already saved in the temporary folder); sends `sig` then, lets the read
/// finish, and returns the child's wait status.
int interruptedWrite(const fs::path& dir, int sig) {
  const fs::path fifo = dir / "kernels.fifo";
  EXPECT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  pid_t child = fork();
  if (child == 0) {
    try {
      tessel::rt::writeBundle(Program{}, fifo.string(), info(), (dir / "b").string());
    } catch (...) {
    }
    _exit(3);  // the signal should have ended the child
  }
  const fs::path tmp = dir / (".b.tmp." + std::to_string(child));
  for (int i = 0; i < 1000 && !fs::exists(tmp / "program.json"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(fs::exists(tmp / "program.json")) << "the child did not start writing";
  kill(child, sig);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the signal arrives while blocked
  // Non-blocking: when the signal ended the child at once there is no reader (ENXIO).
  int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) {
    EXPECT_EQ(write(fd, "x", 1), 1);
    close(fd);
  }
  int status = 0;
  waitpid(child, &status, 0);
  fs::remove(fifo);
  return status;
}

TEST(BundleFolder, AnInterruptedWriteRemovesItsFolderAndDiesOfTheSignal) {
  for (int sig : {SIGINT, SIGTERM}) {
    for (bool earlier : {false, true}) {
      SCOPED_TRACE(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + (earlier ? ", replacing a bundle" : ""));
      fs::path dir = freshDir("interrupted");
      std::string before;
      if (earlier) {
        writeText(dir / "kernels.so", "a library");
        tessel::rt::writeBundle(Program{}, (dir / "kernels.so").string(), info(), (dir / "b").string());
        before = readText(dir / "b" / "bundle.json");
      }
      int status = interruptedWrite(dir, sig);
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "wait status " << status;
      EXPECT_TRUE(hidden(dir).empty()) << hidden(dir).size() << " folder(s) left, e.g. " << hidden(dir).front();
      EXPECT_EQ(fs::exists(dir / "b"), earlier);
      if (earlier) {
        EXPECT_EQ(readText(dir / "b" / "bundle.json"), before);
      }
    }
  }
}

}  // namespace
