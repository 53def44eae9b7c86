// `tessel launch`'s rewriting of the job's command (runtime/tools/tessel/LaunchArgs.h): the
// rank-count and flag spellings, --resume insertion and replacement, the plan shrink (dp first,
// then fsdp, other axes kept, the batch rule) and the hostfile's slot count. Expected values are
// written out by hand from the rules in the header, not computed by the code under test.
#include "runtime/tools/tessel/LaunchArgs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace tessel::cli {
namespace {

const Words kJob = {"mpirun", "--oversubscribe", "-np", "4", "tessel-gpt", "--plan", "dp=4", "--checkpoint-dir", "D"};

TEST(LaunchArgs, RankCountInEverySpelling) {
  EXPECT_EQ(commandRanks(kJob), 4);
  EXPECT_EQ(commandRanks({"mpirun", "-n", "3", "x"}), 3);
  EXPECT_EQ(commandRanks({"mpirun", "--np", "8", "x"}), 8);
  EXPECT_EQ(commandRanks({"mpirun", "--np=6", "x"}), 6);
  EXPECT_EQ(commandRanks({"mpirun", "-np=2", "x"}), 2);
  EXPECT_EQ(commandRanks({"tessel-gpt", "--steps", "3"}), std::nullopt);
  // A flag that merely starts like one (--npx, -nx) is not the rank count.
  EXPECT_EQ(commandRanks({"mpirun", "--npx", "5", "-nx", "x"}), std::nullopt);
  for (const char* bad : {"0", "-1", "two", "", "2.5", "99999999999999"})
    EXPECT_THROW(commandRanks({"mpirun", "-np", bad, "x"}), std::runtime_error) << bad;
  EXPECT_THROW(commandRanks({"mpirun", "-np"}), std::runtime_error);
}

TEST(LaunchArgs, RankCountRewriteKeepsTheSpelling) {
  EXPECT_EQ(withFlagValue(kJob, rankCountFlags(), "2"),
            (Words{"mpirun", "--oversubscribe", "-np", "2", "tessel-gpt", "--plan", "dp=4", "--checkpoint-dir", "D"}));
  EXPECT_EQ(withFlagValue({"mpirun", "-n", "4", "x"}, rankCountFlags(), "2"), (Words{"mpirun", "-n", "2", "x"}));
  EXPECT_EQ(withFlagValue({"mpirun", "--np=4", "x"}, rankCountFlags(), "2"), (Words{"mpirun", "--np=2", "x"}));
}

TEST(LaunchArgs, ResumeIsAddedOrReplaced) {
  // Absent: appended after the trainer's arguments.
  EXPECT_EQ(withFlagValue(kJob, {"--resume"}, "D"),
            (Words{"mpirun", "--oversubscribe", "-np", "4", "tessel-gpt", "--plan", "dp=4", "--checkpoint-dir", "D",
                   "--resume", "D"}));
  // Present as two words or one: its value is replaced in place, nothing is appended.
  EXPECT_EQ(withFlagValue({"t", "--resume", "init", "--steps", "5"}, {"--resume"}, "D"),
            (Words{"t", "--resume", "D", "--steps", "5"}));
  EXPECT_EQ(withFlagValue({"t", "--resume=init", "--steps", "5"}, {"--resume"}, "D"),
            (Words{"t", "--resume=D", "--steps", "5"}));
  // A repeated --resume: the last one, the one the trainer takes, is replaced.
  EXPECT_EQ(withFlagValue({"t", "--resume", "a", "--resume=b"}, {"--resume"}, "D"),
            (Words{"t", "--resume", "a", "--resume=D"}));
  // A second rewrite (the second restart) replaces the first one's value rather than adding
  // another --resume.
  Words twice = withFlagValue(withFlagValue(kJob, {"--resume"}, "D"), {"--resume"}, "E");
  EXPECT_EQ(std::count(twice.begin(), twice.end(), "--resume"), 1);
  EXPECT_EQ(twice.back(), "E");
}

TEST(LaunchArgs, FlagValueForms) {
  EXPECT_EQ(flagValue(kJob, {"--checkpoint-dir"}), "D");
  EXPECT_EQ(flagValue({"t", "--checkpoint-dir=a/b"}, {"--checkpoint-dir"}), "a/b");
  EXPECT_EQ(flagValue({"t", "--checkpoint-dirs", "x"}, {"--checkpoint-dir"}), std::nullopt);
  // Repeated: the last counts, as in the trainers (LastValueWins.h), in either spelling.
  EXPECT_EQ(flagValue({"t", "--plan", "dp=2", "--plan", "dp=4"}, {"--plan"}), "dp=4");
  EXPECT_EQ(flagValue({"t", "--plan=dp=2", "--steps", "3", "--plan", "dp=4"}, {"--plan"}), "dp=4");
  EXPECT_EQ(flagValue({"t", "--plan", "dp=2", "--plan=dp=4"}, {"--plan"}), "dp=4");
  EXPECT_THROW(flagValue({"t", "--checkpoint-dir"}, {"--checkpoint-dir"}), std::runtime_error);
}

std::string shrunk(const std::string& plan, int64_t ranks, int64_t batch = 0, int64_t microsteps = 1) {
  auto out = shrinkPlanTo(parsePlanAxes(plan), ranks, batch, microsteps);
  return out ? planText(*out) : "none";
}

TEST(LaunchArgs, PlanShrinksDpFirstThenFsdp) {
  EXPECT_EQ(shrunk("dp=4", 2), "dp=2");
  EXPECT_EQ(shrunk("dp=4", 3), "dp=3");
  EXPECT_EQ(shrunk("fsdp=4", 2), "fsdp=2");
  EXPECT_EQ(shrunk("dp=4,tp=2", 4), "dp=2,tp=2");
  EXPECT_EQ(shrunk("pp=2,dp=2,tp=2", 4), "pp=2,dp=1,tp=2");
  // HSDP: dp gives up its ranks before fsdp does.
  EXPECT_EQ(shrunk("dp=2,fsdp=2", 2), "dp=1,fsdp=2");
  EXPECT_EQ(shrunk("dp=2,fsdp=4", 4), "dp=1,fsdp=4");
  EXPECT_EQ(shrunk("dp=2,fsdp=4", 2), "dp=1,fsdp=2");
  EXPECT_EQ(shrunk("dp=4,fsdp=2", 4), "dp=2,fsdp=2");
  // The same size: unchanged.
  EXPECT_EQ(shrunk("dp=2,tp=2", 4), "dp=2,tp=2");
  // No fit: tp and pp never shrink, no axis grows, R must be a multiple of the other axes.
  EXPECT_EQ(shrunk("dp=2,tp=2", 3), "none");
  EXPECT_EQ(shrunk("tp=4", 2), "none");
  EXPECT_EQ(shrunk("dp=2", 4), "none");
  EXPECT_EQ(shrunk("dp=4", 0), "none");
  // The global batch must divide among the data-parallel ranks (x microbatches).
  EXPECT_EQ(shrunk("dp=4", 3, 8), "none");
  EXPECT_EQ(shrunk("dp=4", 2, 8), "dp=2");
  EXPECT_EQ(shrunk("dp=4", 2, 8, 8), "none");
  EXPECT_EQ(shrunk("dp=4", 2, 8, 4), "dp=2");
}

TEST(LaunchArgs, RestartShapeTakesTheLargestFit) {
  auto shape = [](const std::string& plan, int64_t available, int64_t minRanks, int64_t batch = 0) {
    auto s = restartShape(parsePlanAxes(plan), available, minRanks, batch);
    return s ? std::to_string(s->ranks) + " " + planText(s->plan) : "none";
  };
  EXPECT_EQ(shape("dp=4", 2, 1), "2 dp=2");
  EXPECT_EQ(shape("dp=4", 3, 1), "3 dp=3");
  EXPECT_EQ(shape("dp=4", 3, 1, 8), "2 dp=2");      // 3 does not divide the batch of 8
  EXPECT_EQ(shape("dp=4,tp=2", 7, 1), "6 dp=3,tp=2");
  EXPECT_EQ(shape("dp=4,tp=2", 7, 1, 8), "4 dp=2,tp=2");
  EXPECT_EQ(shape("dp=4,tp=2", 7, 5, 8), "none");   // 4 < --min-ranks 5
  EXPECT_EQ(shape("dp=4", 8, 1), "4 dp=4");         // more slots than needed: unchanged
  EXPECT_EQ(shape("tp=2", 1, 1), "none");
}

TEST(LaunchArgs, PlanTextErrors) {
  EXPECT_EQ(planText(parsePlanAxes("dp=2,tp=2")), "dp=2,tp=2");
  EXPECT_EQ(planRanks(parsePlanAxes("pp=2,dp=3,tp=2")), 12);
  for (const char* bad : {"", "dp", "dp=", "=2", "dp=0", "dp=x", "dp=2,", "dp=2,,tp=2"})
    EXPECT_THROW(parsePlanAxes(bad), std::runtime_error) << bad;
}

class Hostfile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() / ("tessel-hostfile-" + std::to_string(getpid()));
    std::ofstream(path_) << text;
    return path_.string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(Hostfile, SumsTheSlots) {
  EXPECT_EQ(hostfileSlots(write("localhost slots=4\n")), 4);
  EXPECT_EQ(hostfileSlots(write("# the cluster\nnode1 slots=4 max_slots=8\n\n  node2   slots=2  # half\n")), 6);
  EXPECT_EQ(hostfileSlots(write("node1 slots=2\nnode1 slots=2\n")), 4);  // listed twice, counted twice
}

TEST_F(Hostfile, RefusesWhatItCannotCount) {
  for (const char* bad : {"node1\n", "node1 slots=0\n", "node1 slots=x\n", "# nothing\n", ""}) {
    try {
      hostfileSlots(write(bad));
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path_.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(hostfileSlots("/nonexistent/hostfile"), std::runtime_error);
}


TEST_F(Hostfile, RefusesEveryPathThatIsNotARegularFileWithoutBlocking) {
  // A FIFO used to block the launcher forever (ctest's TIMEOUT catches a regression).
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessel-hostfile-kinds-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "folder");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  std::filesystem::create_symlink(dir / "fifo", dir / "link_to_fifo");
  for (const auto& [name, kind] : std::vector<std::pair<std::string, std::string>>{
           {"fifo", "a FIFO"}, {"folder", "a folder"}, {"link_to_fifo", "a FIFO"}}) {
    const std::string path = (dir / name).string();
    try {
      hostfileSlots(path);
      ADD_FAILURE() << "accepted: " << path;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + path + "': is " + kind), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel::cli
