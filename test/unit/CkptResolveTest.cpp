// resolveCheckpoint and readIndex against what a path may turn out to be: a file, a FIFO, a
// folder, a symbolic link loop where a folder or a regular file belongs; an uncommitted
// (.tmp) save reached by any route; a step folder whose name and index disagree. Each must
// give an exact one-line message, and none may block (a FIFO opened for reading without
// O_NONBLOCK waits forever; ctest's TIMEOUT catches a regression).
#include "runtime/ckpt/Checkpoint.h"
#include "test/unit/CkptTestUtil.h"

#include <sys/stat.h>

#include <functional>

namespace tessel::ckpt {
namespace {

using namespace tessel::ckpt::testing;

/// Every kind of non-regular, non-folder path, made at `path`; returns the phrase a message
/// must use for it. `which`: 0 FIFO, 1 symbolic link to a FIFO, 2 symbolic link loop.
std::string makeOddPath(const fs::path& path, int which) {
  switch (which) {
    case 0:
      EXPECT_EQ(::mkfifo(path.c_str(), 0644), 0);
      return "is a FIFO";
    case 1:
      EXPECT_EQ(::mkfifo((path.string() + ".target").c_str(), 0644), 0);
      fs::create_symlink(path.string() + ".target", path);
      return "is a FIFO";
    default:
      fs::create_symlink(path.string() + ".loop", path);
      fs::create_symlink(path, path.string() + ".loop");
      return "symbolic link loop";
  }
}

void writeSmall(const fs::path& dir, int64_t step) {
  fs::create_directories(dir);
  const FullTensor b = makeTensor({4}, 0);
  writeCheckpoint(dir.string(), {{"b", {b, gridBoxes(b.shape, {1}, 1)}}}, step);
}

void expectMessage(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string msg = messageOf(f);
  ASSERT_NE(msg, "(no CheckpointError)") << "accepted; expected: " << parts.front();
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << msg << "' lacks '" << p << "'";
}

TEST(CkptResolveTest, AGivenPathThatIsNotAFolderIsNamedForWhatItIs) {
  const TempDir root("given");
  std::ofstream(root.path / "afile") << "x";
  expectMessage([&] { resolveCheckpoint(root.str() + "/afile"); }, {root.str() + "/afile", "is a file, not a folder"});
  for (int which = 0; which < 3; ++which) {
    const fs::path odd = root.path / ("odd" + std::to_string(which));
    const std::string kind = makeOddPath(odd, which);
    expectMessage([&] { resolveCheckpoint(odd.string()); }, {odd.string(), kind});
  }
}

TEST(CkptResolveTest, AnIndexThatIsNotARegularFileIsNamedNotCalledMissing) {
  const TempDir root("index");
  for (int which = 0; which < 4; ++which) {
    const fs::path dir = root.path / ("ck" + std::to_string(which));
    writeSmall(dir, 7);
    fs::remove(dir / "index.json");
    std::string kind = "is a folder";
    if (which < 3)
      kind = makeOddPath(dir / "index.json", which);
    else
      fs::create_directory(dir / "index.json");
    for (const std::string& given : {dir.string(), dir.string() + "/"})
      expectMessage([&] { resolveCheckpoint(given); }, {"'" + dir.string() + "/index.json'", kind});
    expectMessage([&] { readIndex(dir.string()); }, {"'" + dir.string() + "/index.json'", kind});
    // The same folder reached through a root's `latest`.
    std::ofstream(root.path / "latest", std::ios::trunc) << "ck" << which << "\n";
    expectMessage([&] { resolveCheckpoint(root.str()); },
                  {"'" + dir.string() + "/index.json'", kind, "named by '" + root.str() + "/latest'"});
  }
}

TEST(CkptResolveTest, ALatestThatIsNotARegularFileIsNamedForWhatItIs) {
  const TempDir root("latest");
  writeSmall(root.path / "step_00000007", 7);
  const fs::path latest = root.path / "latest";
  for (int which = 0; which < 4; ++which) {
    fs::remove(latest);
    std::string kind = "is a folder";
    if (which < 3)
      kind = makeOddPath(latest, which);
    else
      fs::create_directory(latest);
    expectMessage([&] { resolveCheckpoint(root.str()); }, {"'" + latest.string() + "'", kind});
    fs::remove_all(latest);
    fs::remove(latest.string() + ".target");
    fs::remove(latest.string() + ".loop");
  }
  // `latest` naming a regular file, or nothing.
  std::ofstream(root.path / "afile") << "x";
  std::ofstream(latest) << "afile\n";
  expectMessage([&] { resolveCheckpoint(root.str()); },
                {"names '" + root.str() + "/afile', which is a regular file, not a folder"});
  std::ofstream(latest, std::ios::trunc) << "step_00000008\n";
  expectMessage([&] { resolveCheckpoint(root.str()); }, {"names '" + root.str() + "/step_00000008'", "No such file"});
  std::ofstream(latest, std::ios::trunc) << "step_00000007\n";
  EXPECT_EQ(resolveCheckpoint(root.str()), root.str() + "/step_00000007");
}

TEST(CkptResolveTest, AnUncommittedSaveIsNeverLoadedHoweverItIsReached) {
  const TempDir root("tmp");
  // A run killed before its first commit: only a complete-looking .tmp folder.
  writeSmall(root.path / "step_00000006.tmp", 6);
  expectMessage([&] { resolveCheckpoint(root.str()); },
                {"no committed checkpoint yet; skipped 'step_00000006.tmp' (a save that did not commit)"});
  for (const std::string& given : {root.str() + "/step_00000006.tmp", root.str() + "/step_00000006.tmp/"})
    expectMessage([&] { resolveCheckpoint(given); },
                  {"'" + root.str() + "/step_00000006.tmp'", "an uncommitted save", "never loaded"});
  std::ofstream(root.path / "latest") << "step_00000006.tmp\n";
  expectMessage([&] { resolveCheckpoint(root.str()); },
                {"an uncommitted save", "never loaded", "named by '" + root.str() + "/latest'"});
  // A save killed before its index, given itself.
  fs::create_directories(root.path / "step_00000007.tmp");
  expectMessage([&] { resolveCheckpoint(root.str() + "/step_00000007.tmp"); }, {"an uncommitted save"});
  // Reached through "..", or through a link of another name.
  fs::create_directories(root.path / "step_00000006.tmp" / "sub");
  fs::create_symlink("step_00000006.tmp", root.path / "good");
  for (const std::string& given : {root.str() + "/step_00000006.tmp/sub/..", root.str() + "/good"})
    expectMessage([&] { resolveCheckpoint(given); }, {"an uncommitted save", "never loaded"});
  // A root whose own name ends in .tmp is only a root.
  writeSmall(root.path / "run.tmp" / "step_00000002", 2);
  std::ofstream(root.path / "run.tmp" / "latest") << "step_00000002\n";
  EXPECT_EQ(resolveCheckpoint(root.str() + "/run.tmp"), root.str() + "/run.tmp/step_00000002");
  // Once a save commits, the root resolves to it and the older .tmp is not noted.
  writeSmall(root.path / "step_00000008", 8);
  std::ofstream(root.path / "latest", std::ios::trunc) << "step_00000008\n";
  std::vector<std::string> notes;
  EXPECT_EQ(resolveCheckpoint(root.str(), &notes), root.str() + "/step_00000008");
  EXPECT_TRUE(notes.empty());
}

TEST(CkptResolveTest, AStepFolderWhoseIndexSaysAnotherStepIsRefused) {
  const TempDir root("stepname");
  writeSmall(root.path / "step_00000006", 7);
  expectMessage([&] { readIndex(root.str() + "/step_00000006"); },
                {"'" + root.str() + "/step_00000006/index.json'", "'step_00000006' is step 6 by its name",
                 "the index's \"step\" is 7"});
  expectMessage([&] { verifyCheckpoint(root.str() + "/step_00000006"); }, {"is step 6 by its name"});
  // A name beyond int64 cannot be any index's step.
  writeSmall(root.path / "step_99999999999999999999", 7);
  expectMessage([&] { readIndex(root.str() + "/step_99999999999999999999"); }, {"beyond int64"});
  // Agreeing names, and folders not named by stepFolderName, read.
  writeSmall(root.path / stepFolderName(7), 7);
  writeSmall(root.path / stepFolderName(123456789), 123456789);
  writeSmall(root.path / "imported", 3);
  writeSmall(root.path / "step_6", 7);
  EXPECT_EQ(readIndex((root.path / stepFolderName(7)).string()).step, 7);
  EXPECT_EQ(readIndex((root.path / stepFolderName(123456789)).string()).step, 123456789);
  EXPECT_EQ(readIndex(root.str() + "/imported").step, 3);
  EXPECT_EQ(readIndex(root.str() + "/step_6").step, 7);
}

}  // namespace
}  // namespace tessel::ckpt
