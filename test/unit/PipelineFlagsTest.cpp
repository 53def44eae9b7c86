// The trainer's pipeline flags (dsl/trainer/Flags.h): --pp-schedule, --microbatches,
// --pp-virtual-stages and --pp-stages parsed by CLI11 as the example binaries do, turned into
// the plan's pipeline by planFromFlags, with --grad-accumulation composing; each error names
// its flag and column.
#include "dsl/trainer/Flags.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace {

using tessel::Plan;
using tessel::trainer::Flags;

/// Parses `args` (without the program name) with the common flags into `flags`.
void parse(Flags& flags, std::vector<std::string> args) {
  CLI::App app("test");
  tessel::trainer::addCommonFlags(app, flags, "data.txt", "data");
  args.insert(args.begin(), "tessel-test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

/// The plan of `args`.
Plan planOf(std::vector<std::string> args) {
  Flags flags;
  parse(flags, std::move(args));
  return tessel::trainer::planFromFlags(flags);
}

/// The ModelError text planFromFlags throws for `args` ("" when it accepts them).
std::string errorOf(std::vector<std::string> args) {
  try {
    planOf(std::move(args));
  } catch (const tessel::ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineFlags, DefaultsAreOneFOneBWithPpMicrobatches) {
  Plan plan = planOf({"--plan", "pp=4,dp=2"});
  EXPECT_EQ(plan.pp(), 4);
  EXPECT_EQ(plan.pipeline_schedule(), "1f1b");
  EXPECT_EQ(plan.pipeline_microbatches(), 4);
  EXPECT_EQ(plan.pipeline_virtual_stages(), 1);
  EXPECT_TRUE(plan.pipeline_layer_ranges().empty());
  EXPECT_EQ(plan.pipeline_site().file, "--plan");
  EXPECT_EQ(plan.pipeline_site().column, 1);
  EXPECT_EQ(planOf({"--plan", "dp=2"}).pp(), 1);  // no pp axis: no pipeline
}

TEST(PipelineFlags, EveryFlagReachesThePlan) {
  Plan plan = planOf({"--plan", "dp=2,pp=2", "--pp-schedule", "interleaved", "--microbatches", "6",
                      "--pp-virtual-stages", "2", "--pp-stages", "0-1,2-3,4-5,6-7"});
  EXPECT_EQ(plan.pipeline_schedule(), "interleaved");
  EXPECT_EQ(plan.pipeline_microbatches(), 6);
  EXPECT_EQ(plan.pipeline_virtual_stages(), 2);
  EXPECT_EQ(plan.pipeline_layer_ranges(), (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(plan.pipeline_site().column, 6);
  for (const char* name : {"gpipe", "1f1b", "zero-bubble"})
    EXPECT_EQ(planOf({"--plan", "pp=2", "--pp-schedule", name}).pipeline_schedule(), name);
  // --grad-accumulation K: K x M microbatches per optimizer step.
  Plan accumulated = planOf({"--plan", "pp=2", "--microbatches", "3", "--grad-accumulation", "2"});
  EXPECT_EQ(accumulated.pipeline_microbatches(), 3);
  EXPECT_EQ(accumulated.microsteps(), 2);
  EXPECT_EQ(accumulated.pipeline_microbatches_per_step(), 6);
  // A CSV file as the schedule.
  const std::string csv = ::testing::TempDir() + "/tessel_flags_schedule.csv";
  std::ofstream(csv) << "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n";
  EXPECT_EQ(planOf({"--plan", "pp=2", "--pp-schedule", csv, "--microbatches", "1"}).pipeline_schedule(), csv);
}

TEST(PipelineFlags, ErrorsNameTheFlagAndColumn) {
  // Each pipeline flag needs a pp axis.
  EXPECT_EQ(errorOf({"--plan", "dp=2", "--microbatches", "2"}),
            "--microbatches:1:1: error: --microbatches needs a pp axis in --plan (e.g. --plan pp=2)");
  EXPECT_NE(errorOf({"--pp-schedule", "gpipe"}).find("--pp-schedule:1:1: error: --pp-schedule needs a pp axis"),
            std::string::npos);
  EXPECT_NE(errorOf({"--pp-virtual-stages", "2"}).find("--pp-virtual-stages:1:1: error: --pp-virtual-stages needs"),
            std::string::npos);
  EXPECT_NE(errorOf({"--pp-stages", "0-1"}).find("--pp-stages:1:1: error: --pp-stages needs a pp axis"),
            std::string::npos);
  // Layer ranges: the column of the offending range, or of the flag for their count.
  EXPECT_NE(errorOf({"--plan", "pp=2", "--pp-stages", "0-1,3-4"})
                .find("--pp-stages:1:5: error: --pp-stages: layer range 3-4 (stage 1) leaves a gap"),
            std::string::npos)
      << errorOf({"--plan", "pp=2", "--pp-stages", "0-1,3-4"});
  EXPECT_NE(errorOf({"--plan", "pp=2", "--pp-stages", "0-1,2-3,4-5"})
                .find("--pp-stages:1:1: error: pipeline(\"pp\"): 3 layer ranges given, but pp=2 x 1 virtual stage "
                      "need 2"),
            std::string::npos);
  EXPECT_NE(errorOf({"--plan", "pp=2", "--pp-stages", "0-1,x"}).find("--pp-stages:1:5: error: 'x' is not a layer"),
            std::string::npos);
  // Interleaved needs virtual stages; an unknown schedule is a file that cannot be read.
  EXPECT_NE(errorOf({"--plan", "pp=2", "--pp-schedule", "interleaved"})
                .find("--pp-schedule:1:1: error: pipeline(\"pp\"): the interleaved schedule runs several chunks of "
                      "layers per rank; use --pp-virtual-stages >= 2"),
            std::string::npos);
  const std::string missing = ::testing::TempDir() + "/tessel_flags_missing.csv";
  std::filesystem::remove(missing);
  EXPECT_NE(errorOf({"--plan", "pp=2", "--pp-schedule", missing})
                .find("--pp-schedule:1:1: error: pipeline(\"pp\"): cannot read the schedule file '" + missing +
                      "' (no such file; the built-in schedules are gpipe, 1f1b, interleaved and zero-bubble)"),
            std::string::npos);
  // The global batch against dp x microbatches x accumulation, at --microbatches.
  Plan plan = planOf({"--plan", "pp=2,dp=2", "--microbatches", "3"});
  try {
    plan.check_batch(8);
    ADD_FAILURE() << "batch 8 accepted for dp 2 x 3 microbatches";
  } catch (const tessel::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("--microbatches:1:1: error: the global batch 8 is not divisible by 2 "
                                         "data-parallel ranks x 3 microbatches x 1 microstep"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelineFlags, NumericFlagsAreRangeChecked) {
  // CLI11 refuses these while parsing, naming the flag and the range.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--microbatches", "0"},
                                             {"--microbatches", "1048577"},
                                             {"--microbatches", "-2"},
                                             {"--pp-virtual-stages", "0"},
                                             {"--pp-virtual-stages", "4097"}}) {
    Flags flags;
    try {
      parse(flags, args);
      ADD_FAILURE() << args[0] << " " << args[1] << " accepted";
    } catch (const CLI::ParseError& e) {
      EXPECT_NE(std::string(e.what()).find("is not an integer in [1, "), std::string::npos) << e.what();
    }
  }
  Flags flags;
  EXPECT_THROW(parse(flags, {"--pp-stages", ""}), CLI::ParseError);
  EXPECT_THROW(parse(flags, {"--pp-schedule", ""}), CLI::ParseError);
}

}  // namespace
