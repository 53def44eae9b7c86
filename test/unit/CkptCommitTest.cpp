// The multi-rank commit (runtime/ckpt/Checkpoint.h): a crash at each point of the protocol
// leaves the previous checkpoint loadable (the partial states are made by hand from a real
// save's files), leftovers of a crashed run do not spoil the next save, keep-K pruning, the
// asynchronous snapshot, a failing rank's .failed marker and the agreement's timeout.
#include "CkptTestRanks.h"

#include "runtime/ckpt/Checkpoint.h"
#include "runtime/comm/GatherBytes.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace tessel::ckpt {
namespace {

namespace fs = std::filesystem;
using test::TensorSpec;

/// Two ranks over fsdp=2: a sharded weight with padding, a replicated bias, their state.
rt::Program model() {
  return test::makeProgram({{"fsdp", 2}}, {{"w", {5, 3}, {{{"fsdp"}, 1, 0}, {}}, rt::BufferKind::Parameter},
                                           {"b", {3}, {}, rt::BufferKind::Parameter},
                                           {"w:exp_avg", {5, 3}, {{{"fsdp"}, 1, 0}, {}}, rt::BufferKind::State}});
}

/// Saves `model()` on 2 ranks with the values of `salt` as step `step` under `options`.
void save2(const std::string& root, int64_t step, int salt, SaveOptions options = {}) {
  options.root = root;
  const auto errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(model());
    test::fillBuffers(ex, r, salt);
    Checkpointer ck(ex, world, options);
    ck.save(step, {{"step", step}});
    ck.wait();
  });
  for (const std::string& e : errors) ASSERT_EQ(e, "");
}

/// Loads `root` on 2 ranks; returns the folder loaded, checking the values are save `salt`'s.
std::string load2(const std::string& root, int salt) {
  std::string dir;
  const auto errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(model());
    const LoadResult result = loadCheckpoint(ex, world, root);
    const rt::MeshLayout mesh(ex.program().mesh);
    for (size_t i = 0; i < ex.program().buffers.size(); ++i) {
      const rt::Buffer& b = ex.program().buffers[i];
      const auto want = test::expectedShard(b, &mesh, mesh.coordinates(r), b.kind == rt::BufferKind::State ? salt + 1 : salt);
      if (std::memcmp(want.data(), ex.bytes(static_cast<int>(i)).data(), want.size() * 4) != 0)
        throw std::runtime_error(b.name + " is not save " + std::to_string(salt) + "'s");
    }
    if (r == 0) dir = fs::path(result.dir).filename().string();
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return dir;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void copyFolder(const std::string& from, const std::string& to) {
  fs::create_directories(to);
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

TEST(CkptCommit, CrashAtEachPointLeavesThePreviousCheckpoint) {
  // A complete step 2 made elsewhere supplies the files of each partial state.
  const std::string full = test::freshFolder("crash_full");
  save2(full, 2, 2);
  const std::string done = full + "/step_00000002";
  using Make = std::function<void(const std::string& root)>;
  const std::vector<std::pair<std::string, Make>> states = {
      {"tmp folder, no markers",
       [&](const std::string& root) {
         fs::create_directories(root + "/step_00000002.tmp");
         fs::copy(done + "/rank_00000.safetensors", root + "/step_00000002.tmp/rank_00000.safetensors");
       }},
      {"markers, no index",
       [&](const std::string& root) {
         copyFolder(done, root + "/step_00000002.tmp");
         fs::remove(root + "/step_00000002.tmp/index.json");
         std::ofstream(root + "/step_00000002.tmp/rank_00000.done") << R"({"save": "0-1", "rank": 0, "tensors": {}})";
         std::ofstream(root + "/step_00000002.tmp/rank_00001.done") << R"({"save": "0-1", "rank": 1, "tensors": {}})";
       }},
      {"index, folder not renamed",
       [&](const std::string& root) { copyFolder(done, root + "/step_00000002.tmp"); }},
      {"renamed, latest not updated", [&](const std::string& root) { copyFolder(done, root + "/step_00000002"); }},
  };
  for (const auto& [what, make] : states) {
    SCOPED_TRACE(what);
    const std::string root = test::freshFolder("crash");
    save2(root, 1, 1);
    make(root);
    EXPECT_EQ(readText(root + "/latest"), "step_00000001\n");
    EXPECT_EQ(load2(root, 1), "step_00000001");
    // The next save of the same step commits over the leftovers.
    save2(root, 2, 3);
    EXPECT_EQ(readText(root + "/latest"), "step_00000002\n");
    EXPECT_EQ(load2(root, 3), "step_00000002");
    EXPECT_FALSE(fs::exists(root + "/step_00000002.tmp"));
    EXPECT_EQ(load2(root + "/step_00000001", 1), "step_00000001");
  }
}

TEST(CkptCommit, StaleFilesOfAnEarlierRunAreRemoved) {
  // An earlier run on more ranks left shard files, markers and temporaries in step_3.tmp.
  const std::string root = test::freshFolder("stale");
  const std::string tmp = root + "/step_00000003.tmp";
  fs::create_directories(tmp);
  for (const char* f : {"rank_00005.safetensors", "rank_00001.done", "rank_00001.failed", "rank_00000.safetensors.tmp",
                        "index.json"})
    std::ofstream(tmp + "/" + f) << R"({"save": "old", "reason": "an old failure"})";
  save2(root, 3, 1);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(root + "/step_00000003")) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"index.json", "rank_00000.safetensors", "rank_00001.safetensors"}));
  EXPECT_EQ(load2(root, 1), "step_00000003");
}

TEST(CkptCommit, KeepsTheNewestK) {
  const std::string root = test::freshFolder("keep");
  SaveOptions options;
  options.keep = 2;
  for (int step = 1; step <= 4; ++step) save2(root, step, step, options);
  std::vector<std::string> folders;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) folders.push_back(e.path().filename().string());
  std::sort(folders.begin(), folders.end());
  EXPECT_EQ(folders, (std::vector<std::string>{"step_00000003", "step_00000004"}));
  EXPECT_EQ(load2(root, 4), "step_00000004");
  EXPECT_EQ(load2(root + "/step_00000003", 3), "step_00000003");
}

TEST(CkptCommit, AsyncSaveWritesTheSnapshot) {
  // The writer sleeps between the shard file and the marker, so the buffers change while the
  // save is still in flight; what is written must be what save() saw.
  // 500 ms: far longer than the few microseconds from save()'s return to the poll below.
  ::setenv("TESSEL_CKPT_TEST_DELAY_MS", "500", 1);
  const std::string root = test::freshFolder("async");
  SaveOptions options;
  options.root = root;
  options.async = true;
  std::vector<std::vector<std::string>> lines(2);
  const auto errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(model());
    test::fillBuffers(ex, r, 1);
    Checkpointer ck(ex, world, options);
    ck.save(6, {{"step", 6}});
    test::fillBuffers(ex, r, 5);  // training goes on
    if (!ck.poll().empty()) throw std::runtime_error("durable before the writer's delay");
    ck.wait();
    lines[static_cast<size_t>(r)] = ck.poll();
  });
  ::unsetenv("TESSEL_CKPT_TEST_DELAY_MS");
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  ASSERT_EQ(lines[0].size(), 1u);
  EXPECT_NE(lines[0][0].find("checkpoint step 6 durable: "), std::string::npos) << lines[0][0];
  EXPECT_NE(lines[0][0].find("from 2 ranks"), std::string::npos) << lines[0][0];
  EXPECT_NE(lines[0][0].find(root + "/step_00000006'"), std::string::npos) << lines[0][0];
  EXPECT_TRUE(lines[1].empty());
  EXPECT_EQ(load2(root, 1), "step_00000006");
}

TEST(CkptCommit, TheSameStepTwiceIsSavedOnce) {
  // The loop's periodic save and its final one can fall on one step: one checkpoint, one line.
  const std::string root = test::freshFolder("twice");
  for (bool async : {false, true}) {
    SaveOptions options;
    options.root = root;
    options.async = async;
    std::vector<std::string> lines;
    const auto errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
      test::HostExecutor ex(model());
      test::fillBuffers(ex, r, 1);
      Checkpointer ck(ex, world, options);
      ck.save(8, {{"step", 8}});
      ck.save(8, {{"step", 8}});
      ck.wait();
      if (r == 0) lines = ck.poll();
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    EXPECT_EQ(lines.size(), 1u);
    EXPECT_EQ(load2(root, 1), "step_00000008");
  }
}

TEST(CkptCommit, FailedRankAbortsTheCommitWithItsReason) {
  const std::string root = test::freshFolder("failed");
  save2(root, 1, 1);
  // Rank 1 cannot create its shard file: a folder stands where its temporary would go.
  fs::create_directories(root + "/step_00000002.tmp/rank_00001.safetensors.tmp");
  for (bool async : {false, true}) {
    SaveOptions options;
    options.root = root;
    options.async = async;
    const auto errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
      test::HostExecutor ex(model());
      Checkpointer ck(ex, world, options);
      ck.save(2, {{"step", 2}});
      ck.wait();
    });
    EXPECT_NE(errors[0].find("rank 1 failed: "), std::string::npos) << errors[0];
    for (const std::string& error : errors)
      EXPECT_NE(error.find("rank_00001.safetensors.tmp' is a folder, not a regular file"), std::string::npos) << error;
    EXPECT_EQ(readText(root + "/latest"), "step_00000001\n");
    EXPECT_EQ(load2(root, 1), "step_00000001");
  }
}

TEST(CkptCommit, TimeoutNamesTheMissingRanks) {
  const std::string root = test::freshFolder("timeout");
  SaveOptions options;
  options.root = root;
  options.timeoutSeconds = 0.2;
  const auto errors = test::runRanks(3, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(test::makeProgram({}, {{"b", {3}, {}, rt::BufferKind::Parameter}}));
    Checkpointer ck(ex, world, options);
    if (r == 1) ck.save(4, {{"step", 4}});  // its marker is durable when save() returns
    rt::allGatherBytes(*world, "", "rank 1 saved");
    if (r == 0) ck.save(4, {{"step", 4}});  // waits for rank 2, which never saves
  });
  EXPECT_NE(errors[0].find("rank 2 wrote no marker"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("within 0.2 s"), std::string::npos) << errors[0];
  EXPECT_FALSE(fs::exists(root + "/latest"));
}

TEST(CkptCommit, UnusableRootIsAnErrorOnEveryRank) {
  const std::string parent = test::freshFolder("bad_root");
  std::ofstream(parent + "/file") << "x";
  const auto errors = test::runRanks(2, [&](int, rt::Communicator* world) {
    test::HostExecutor ex(model());
    Checkpointer ck(ex, world, {parent + "/file/sub"});
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("cannot create the checkpoint root '" + parent + "/file/sub'"), std::string::npos) << e;
  EXPECT_EQ(errors[0], errors[1]);
}

TEST(CkptCommit, RanksDescribingATensorDifferentlyIsAnErrorOnEveryRank) {
  // Replicas of one tensor with different shapes cannot be written once: refused up front.
  const std::string root = test::freshFolder("disagree");
  const auto errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
    test::HostExecutor ex(test::makeProgram({}, {{"b", {r == 0 ? 3 : 4}, {}, rt::BufferKind::Parameter}}));
    Checkpointer ck(ex, world, {root});
  });
  EXPECT_NE(errors[0].find("tensor 'b' is parameter F32 [4] on rank 1 but parameter F32 [3] on rank 0"),
            std::string::npos) << errors[0];
  EXPECT_EQ(errors[0], errors[1]);
}

TEST(CkptCommit, ASecondRunOnTheSameRootIsRefusedOnEveryRank) {
  // flock locks belong to the open file description: a second Checkpointer on the root
  // conflicts with the first even within this one process, as a second job would.
  const std::string root = test::freshFolder("locked");
  save2(root, 1, 1);
  std::string holderLine;
  {
    test::HostExecutor holder(test::makeProgram({}, {{"b", {3}, {}, rt::BufferKind::Parameter}}));
    Checkpointer first(holder, nullptr, {root});
    holderLine = readText(root + "/.lock");
    const auto errors = test::runRanks(2, [&](int r, rt::Communicator* world) {
      test::HostExecutor ex(model());
      test::fillBuffers(ex, r, 2);
      Checkpointer second(ex, world, {root});
      second.save(2, {{"step", 2}});
    });
    const std::string want = fmt::format("another run is saving checkpoints into '{}' (pid {} on ", root, ::getpid());
    for (const std::string& e : errors) EXPECT_NE(e.find(want), std::string::npos) << e;
    for (const std::string& e : errors) EXPECT_NE(e.find(" holds " + root + "/.lock)"), std::string::npos) << e;
    EXPECT_EQ(errors[0], errors[1]);
    EXPECT_EQ(load2(root, 1), "step_00000001");  // the lock never blocks a load
    EXPECT_EQ(resolveCheckpoint(root), root + "/step_00000001");
  }
  EXPECT_EQ(holderLine.rfind(std::to_string(::getpid()) + " ", 0), 0u) << holderLine;
  // Released with its Checkpointer: the next run saves, and pruning ignores the lock file.
  SaveOptions options;
  options.keep = 1;
  save2(root, 2, 2, options);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".lock", "latest", "step_00000002"}));
  EXPECT_EQ(load2(root, 2), "step_00000002");
}

TEST(CkptCommit, AnUnusableLockFileIsAnErrorOnEveryRank) {
  // A folder, or a link (whose target must not be truncated), where ROOT/.lock goes.
  for (const bool link : {false, true}) {
    const std::string root = test::freshFolder(link ? "lock_link" : "lock_folder");
    const std::string target = root + "/../lock_target_" + std::to_string(link);
    if (link) {
      std::ofstream(target) << "precious";
      fs::create_symlink(fs::absolute(target), root + "/.lock");
    } else {
      fs::create_directories(root + "/.lock");
    }
    const auto errors = test::runRanks(2, [&](int, rt::Communicator* world) {
      test::HostExecutor ex(model());
      Checkpointer ck(ex, world, {root});
    });
    for (const std::string& e : errors)
      EXPECT_NE(e.find("cannot open the lock file '" + root + "/.lock': "), std::string::npos) << e;
    EXPECT_EQ(errors[0], errors[1]);
    if (link) {
      EXPECT_EQ(readText(target), "precious");
    }
  }
}

}  // namespace
}  // namespace tessel::ckpt
