// Plan::pipeline (dsl/Plan.h): its settings and their text, --plan's pp item, the layer
// ranges of --pp-stages, every pipeline plan error at the line (or flag and column) that
// causes it, CompileOptions::pipeline_stage, and what the compiler's options get from the
// plan: the batch split into dp x M_eff microbatches with no gradient accumulation stage.
#include "dsl/tessel.h"
#include "examples/gpt/model.h"
#include "test/unit/GptPlanErrors.h"  // errorOf

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <source_location>
#include <sstream>

namespace {

using tessel::Mesh;
using tessel::ModelError;
using tessel::Plan;
using tessel::Schedule;
using tessel::testing::errorOf;

const char* const kThisFile = std::source_location::current().file_name();


/// Expects `e` at `file`:`line`:`column` (column 0: any), with `text` in its message.
void expectAt(const std::optional<ModelError>& e, const std::string& file, int line, int column,
              const std::string& text) {
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->diagnostic().file, file) << e->what();
  EXPECT_EQ(e->diagnostic().line, line) << e->what();
  if (column) {
    EXPECT_EQ(e->diagnostic().column, column) << e->what();
  }
  EXPECT_NE(std::string(e->what()).find(text), std::string::npos) << e->what();
}

void expectAt(const std::optional<ModelError>& e, int line, const std::string& text) {
  expectAt(e, kThisFile, line, 0, text);
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(PlanPipeline, SettingsAccessorsAndDescribe) {
  Plan plan = Plan(Mesh{{"pp", 2}, {"dp", 2}}).shard_batch("dp").pipeline("pp", Schedule::OneFOneB, 8);
  EXPECT_EQ(plan.pp(), 2);
  EXPECT_EQ(plan.pipeline_axis(), "pp");
  EXPECT_EQ(plan.pipeline_schedule(), "1f1b");
  EXPECT_EQ(plan.pipeline_microbatches(), 8);
  EXPECT_EQ(plan.pipeline_microbatches_per_step(), 8);
  EXPECT_EQ(plan.pipeline_virtual_stages(), 1);
  EXPECT_TRUE(plan.pipeline_layer_ranges().empty());
  EXPECT_EQ(plan.pipeline_site().file, kThisFile);
  EXPECT_EQ(plan.describe(), "pp=2,dp=2 pipeline pp=2 (1f1b, 8 microbatches) bucket_mb=25 overlap=on");
  EXPECT_TRUE(plan.needs_grid());
  EXPECT_NO_THROW(plan.check_world_size(4));
  // Gradient accumulation composes: K x M microbatches per optimizer step.
  plan.grad_accumulation(3);
  EXPECT_EQ(plan.pipeline_microbatches_per_step(), 24);
  EXPECT_EQ(plan.describe(), "pp=2,dp=2 pipeline pp=2 (1f1b, 8 microbatches) microsteps=3 bucket_mb=25 overlap=on");
  // Interleaved with virtual stages and layer ranges: pp x v = 4 ranges.
  Plan interleaved = Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::Interleaved, 4,
                                                     {.virtual_stages = 2, .stages = {{0, 1}, {2, 3}, {4, 5}, {6, 7}}});
  EXPECT_EQ(interleaved.pipeline_schedule(), "interleaved");
  EXPECT_EQ(interleaved.pipeline_virtual_stages(), 2);
  EXPECT_EQ(interleaved.pipeline_layer_ranges(), (Ranges{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(interleaved.describe(), "pp=2 pipeline pp=2 (interleaved, 4 microbatches, 2 virtual stages, layers "
                                    "0-1,2-3,4-5,6-7)");
  EXPECT_NO_THROW(interleaved.check_world_size(2));
  // A user schedule replaces the built-in one: the plan names its file.
  const std::string csv = ::testing::TempDir() + "/tessel_plan_schedule.csv";
  std::ofstream(csv) << "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n";
  Plan user = Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::GPipe, 1, {.schedule_file = csv});
  EXPECT_EQ(user.pipeline_schedule(), csv);
  EXPECT_EQ(user.describe(), "pp=2 pipeline pp=2 (" + csv + ", 1 microbatch)");
  // No pipeline, or one over an axis of one rank: not pipelined.
  EXPECT_EQ(tessel::parsePlan("dp=2").pp(), 1);
  EXPECT_EQ(tessel::parsePlan("dp=2").pipeline_microbatches_per_step(), 0);
  EXPECT_EQ(tessel::parsePlan("pp=1").pipeline_microbatches_per_step(), 0);
  EXPECT_EQ(tessel::parsePlan("pp=1").describe(), "pp=1");
}

TEST(PlanPipeline, ScheduleNamesRoundTrip) {
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved, Schedule::ZeroBubble})
    EXPECT_EQ(tessel::scheduleNamed(tessel::scheduleName(s)), s) << tessel::scheduleName(s);
  EXPECT_STREQ(tessel::scheduleName(Schedule::ZeroBubble), "zero-bubble");
  EXPECT_STREQ(tessel::scheduleName(Schedule::GPipe), "gpipe");
  EXPECT_FALSE(tessel::scheduleNamed("1F1B").has_value());  // the spelling is exact
  EXPECT_FALSE(tessel::scheduleNamed("schedule.csv").has_value());
}

TEST(PlanPipeline, PlanFlagPpIsAOneFOneBPipelineOfPpMicrobatches) {
  Plan plan = tessel::parsePlan("dp=2,pp=4");
  EXPECT_EQ(plan.pipeline_axis(), "pp");
  EXPECT_EQ(plan.pp(), 4);
  EXPECT_EQ(plan.pipeline_schedule(), "1f1b");
  EXPECT_EQ(plan.pipeline_microbatches(), 4);
  EXPECT_EQ(plan.pipeline_site().file, "--plan");
  EXPECT_EQ(plan.pipeline_site().column, 6);
  EXPECT_NO_THROW(plan.check_world_size(8));
  EXPECT_EQ(tessel::parsePlan("pp=2,dp=2,tp=2", 2).pipeline_microbatches_per_step(), 4);
  // The mesh-size error names every axis, pp included.
  expectAt(errorOf([] { tessel::parsePlan("pp=2,dp=2,tp=2").check_world_size(4); }), "--plan", 1, 1,
           "the mesh (pp=2,dp=2,tp=2) has 8 ranks but the job has 4");
}

TEST(PlanPipeline, LayerRangesParseWithTheirColumns) {
  std::vector<tessel::PlanSite> sites;
  EXPECT_EQ(tessel::parseLayerRanges("0-5,6-11", "--pp-stages", &sites), (Ranges{{0, 5}, {6, 11}}));
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].column, 1);
  EXPECT_EQ(sites[1].column, 5);
  EXPECT_EQ(sites[1].file, "--pp-stages");
  EXPECT_EQ(tessel::parseLayerRanges("0-0,1-1,2-9", "--pp-stages"), (Ranges{{0, 0}, {1, 1}, {2, 9}}));
  struct Bad {
    std::string text;
    int column;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {"", 1, "no layer ranges"},
      {"0-5,", 5, "'' is not a layer range"},
      {"0-5,,6-11", 5, "'' is not a layer range"},
      {"0-5,x-11", 5, "'x-11' is not a layer range"},
      {"0-5-7", 1, "'0-5-7' is not a layer range"},
      {"0:5", 1, "'0:5' is not a layer range"},
      {"-1-5", 1, "is not a layer range"},
      {"0-5,6-99999999", 5, "is not a layer range"},  // more digits than any layer index
      {"1-5,6-11", 1, "the first layer range 1-5 must start at layer 0"},
      {"0-5,7-11", 5, "layer range 7-11 (stage 1) leaves a gap after 0-5 (stage 0); each range must start at layer 6"},
      {"0-5,5-11", 5, "layer range 5-11 (stage 1) overlaps 0-5 (stage 0)"},
      {"0-5,6-8,2-4", 9, "layer range 2-4 (stage 2) comes before 6-8 (stage 1)"},
      {"0-5,9-6", 5, "layer range 9-6 (stage 1) is empty"},
  };
  for (const Bad& b : bad)
    expectAt(errorOf([&] { tessel::parseLayerRanges(b.text, "--pp-stages"); }), "--pp-stages", 1, b.column,
             b.message);
}

TEST(PlanPipelineErrors, EachSettingAtThePipelineLine) {
  Mesh mesh{{"pp", 2}, {"dp", 2}};
  int line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).pipeline("stages", Schedule::GPipe, 2); }), line,
           "pipeline(\"stages\"): the mesh (pp=2,dp=2) has no axis 'stages'");
  for (int64_t m : {0, -3}) {
    line = __LINE__ + 1;
    expectAt(errorOf([&] { Plan(mesh).pipeline("pp", Schedule::GPipe, m); }), line,
             "microbatches; the number of microbatches must be >= 1");
  }
  line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).pipeline("pp", Schedule::OneFOneB, 2, {.virtual_stages = 0}); }), line,
           "0 virtual stages; each rank runs at least one stage");
  line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).pipeline("pp", Schedule::Interleaved, 2); }), line,
           "use --pp-virtual-stages >= 2");
  const std::string missing = ::testing::TempDir() + "/tessel_no_such_schedule.csv";
  std::filesystem::remove(missing);
  line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).pipeline("pp", Schedule::GPipe, 2, {.schedule_file = missing}); }), line,
           "cannot read the schedule file '" + missing + "' (no such file");
  line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).pipeline("pp", Schedule::GPipe, 2, {.schedule_file = ::testing::TempDir()}); }),
           line, "(not a readable file");
  // Layer ranges: the count is pp x virtual stages, and they are contiguous from layer 0.
  line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).pipeline("pp", Schedule::GPipe, 2, {.stages = {{0, 5}}}); }), line,
           "1 layer range given, but pp=2 x 1 virtual stage need 2 (one per stage)");
  line = __LINE__ + 2;
  expectAt(errorOf([&] {
             Plan(mesh).pipeline("pp", Schedule::Interleaved, 2, {.virtual_stages = 2, .stages = {{0, 1}, {2, 3}}});
           }),
           line, "2 layer ranges given, but pp=2 x 2 virtual stages need 4");
  const std::vector<Ranges> broken = {{{1, 5}, {6, 9}}, {{0, 5}, {7, 9}}, {{0, 5}, {3, 9}}, {{0, 5}, {6, 2}}};
  for (const Ranges& r : broken) {
    line = __LINE__ + 1;
    expectAt(errorOf([&] { Plan(mesh).pipeline("pp", Schedule::GPipe, 2, {.stages = r}); }), line,
             "pipeline(\"pp\"): ");
  }
}

TEST(PlanPipelineErrors, AxesAndWorld) {
  // A pp axis without pipeline() says to call it, at the mesh's line.
  int line = __LINE__ + 1;
  Plan noPipeline = Plan(Mesh{{"pp", 2}, {"tp", 2}}).tensor_parallel("tp");
  expectAt(errorOf([&] { noPipeline.check_world_size(4); }), line,
           "mesh axis pp=2 has no pipeline: call pipeline(\"pp\", schedule, microbatches)");
  // A pipeline over the batch or tensor-parallel axis, at the pipeline() line.
  line = __LINE__ + 1;
  Plan overBatch = Plan(Mesh{{"dp", 2}}).shard_batch("dp").pipeline("dp", Schedule::GPipe, 2);
  expectAt(errorOf([&] { overBatch.check_world_size(2); }), line, "'dp' is already the batch (shard_batch) axis");
  line = __LINE__ + 1;
  Plan overTp = Plan(Mesh{{"tp", 2}}).tensor_parallel("tp").pipeline("tp", Schedule::GPipe, 2);
  expectAt(errorOf([&] { overTp.check_world_size(2); }), line, "'tp' is already the tensor-parallel axis");
  // The mesh's size against the world, naming pp.
  line = __LINE__ + 1;
  Plan plan = Plan(Mesh{{"pp", 2}, {"dp", 2}}).shard_batch("dp").pipeline("pp", Schedule::GPipe, 2);
  expectAt(errorOf([&] { plan.check_world_size(2); }), line, "the mesh (pp=2,dp=2) has 4 ranks but the job has 2");
}

TEST(PlanPipelineErrors, GlobalBatchNotDivisibleByDpTimesMicrobatchesTimesAccumulation) {
  int line = __LINE__ + 1;
  Plan plan = Plan(Mesh{{"pp", 2}, {"dp", 2}}).shard_batch("dp").pipeline("pp", Schedule::OneFOneB, 3);
  expectAt(errorOf([&] { plan.check_batch(8); }), line,
           "the global batch 8 is not divisible by 2 data-parallel ranks x 3 microbatches x 1 microstep");
  EXPECT_NO_THROW(plan.check_batch(12));
  plan.grad_accumulation(2);
  expectAt(errorOf([&] { plan.check_batch(8); }), line, "x 3 microbatches x 2 microsteps (grad_accumulation)");
  EXPECT_NO_THROW(plan.check_batch(24));
  // In the compile path: the batch of the model against the plan.
  gpt::GPT model(gpt::Config{2, 16, 2, 8, 256});
  gpt::build(model, 6);
  line = __LINE__ + 1;
  Plan odd = Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::GPipe, 4);
  expectAt(errorOf([&] { model.compile({.plan = odd}); }), line,
           "the global batch 6 is not divisible by 1 data-parallel rank x 4 microbatches");
}

TEST(PlanPipelineErrors, MoreStagesThanLayersOrRangesPastTheModel) {
  // The layers are the blocks: "blocks.<i>", not their submodules or other modules.
  const std::vector<std::string> modules = {"wte", "blocks.0", "blocks.0.ln1", "blocks.1", "blocks.1.attn", "ln_f"};
  EXPECT_EQ(Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::GPipe, 2).resolve_pipeline_layers(modules), 2);
  EXPECT_EQ(Plan().resolve_pipeline_layers({"fc1", "fc2"}), 0);
  const int fourLine = __LINE__ + 1;
  Plan four = Plan(Mesh{{"pp", 4}}).pipeline("pp", Schedule::GPipe, 4);
  expectAt(errorOf([&] { four.resolve_pipeline_layers(modules); }), fourLine,
           "pipeline(\"pp\"): more stages than layers: pp=4 make 4 stages, but the model has 2 layers (blocks.0 to "
           "blocks.1)");
  int line = __LINE__ + 1;
  Plan virtualStages = Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::Interleaved, 2, {.virtual_stages = 2});
  expectAt(errorOf([&] { virtualStages.resolve_pipeline_layers(modules); }), line,
           "pp=2 x 2 virtual stages make 4 stages, but the model has 2 layers");
  line = __LINE__ + 1;
  Plan past = Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::GPipe, 2, {.stages = {{0, 0}, {1, 2}}});
  expectAt(errorOf([&] { past.resolve_pipeline_layers(modules); }), line,
           "the layer ranges end at layer 2, but the model has 2 layers (blocks.0 to blocks.1); the last range must "
           "end at layer 1");
  // When the model compiles, at the plan's line.
  gpt::GPT model(gpt::Config{2, 16, 2, 8, 256});
  gpt::build(model, 8);
  expectAt(errorOf([&] { model.compile({.plan = four}); }), fourLine, "more stages than layers");
}

TEST(PlanPipelineErrors, UserScheduleFileAtThePipelineLine) {
  // A CSV that reads but is malformed, or deadlocks, is found when the model compiles (the
  // schedule needs the stage and microbatch counts); the error is at the pipeline() line.
  auto write = [](const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  // Rank 0 waits for a gradient before it has sent its activation: a cycle of waits.
  const std::string deadlock = write("tessel_deadlock.csv", "0RECV_B0,0F0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  const std::string malformed = write("tessel_malformed.csv", "0F0,0SEND_F0,0B0,0RECV_B0\n1RECV_F0,1F0,1B0,1BACK0\n");
  for (const auto& [file, text] :
       {std::pair{deadlock, "rank 0, action 0 (0RECV_B0) waits for rank 1 to post action 3 (1SEND_B0) (rank 1 is "
                            "blocked at action 0 (1RECV_F0)); cycle of waits"},
        std::pair{malformed, "tessel_malformed.csv:2: rank 1, cell 4: '1BACK0' is not an action"}}) {
    gpt::GPT model(gpt::Config{2, 16, 2, 8, 256});
    gpt::build(model, 4);
    const int line = __LINE__ + 1;
    Plan plan = Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::GPipe, 1, {.schedule_file = file});
    expectAt(errorOf([&] { model.compile({.plan = plan}); }), line, text);
  }
}

TEST(PlanPipeline, CompileStageIsRangeChecked) {
  Plan plan = Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::GPipe, 2);
  for (int64_t stage : {-1, 2}) {
    gpt::GPT model(gpt::Config{2, 16, 2, 8, 256});
    gpt::build(model, 4);
    try {
      model.compile({.plan = plan, .pipeline_stage = stage});
      ADD_FAILURE() << "stage " << stage << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("pipeline_stage is " + std::to_string(stage) +
                                           ", but the plan has 2 pipeline stages (stages 0 to 1)"),
                std::string::npos)
          << e.what();
    }
  }
  gpt::GPT single(gpt::Config{2, 16, 2, 8, 256});
  gpt::build(single, 4);
  EXPECT_THROW(single.compile({.pipeline_stage = 1}), std::invalid_argument);  // one stage: only 0
}

/// The text of the first file in `dir` whose name ends with `suffix` ("" if none).
std::string dumped(const std::string& dir, const std::string& suffix) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::ifstream in(entry.path());
      std::stringstream s;
      s << in.rdbuf();
      return s.str();
    }
  }
  return "";
}

TEST(PlanPipeline, TheBatchIsSplitIntoDpTimesEffectiveMicrobatchesWithoutAccumulation) {
  // B = 16 over pp=2 with M = 2 microbatches and grad_accumulation 2: M_eff = 4, so @forward
  // runs on 16 / 4 = 4 rows and there is no @accumulate_step (the microbatches are all in
  // @train_step), while the module holds the pp grid.
  const std::string dir = ::testing::TempDir() + "/tessel_plan_pipeline_ir";
  std::filesystem::remove_all(dir);
  gpt::GPT model(gpt::Config{2, 16, 2, 8, 256});
  gpt::build(model, 16);
  Plan plan = Plan(Mesh{{"pp", 2}}).pipeline("pp", Schedule::OneFOneB, 2).grad_accumulation(2);
  try {
    model.compile({.dump_ir_dir = dir, .plan = plan, .pipeline_stage = 1});
  } catch (const std::exception& e) {
    // The stages after shard-batch belong to the pipeline passes; what this test checks is
    // written before them.
    std::cerr << "compile: " << e.what() << "\n";
  }
  const std::string dsl = dumped(dir, "-dsl.mlir"), split = dumped(dir, "-shard-batch.mlir");
  EXPECT_NE(dsl.find("axis_names = [\"pp\"]"), std::string::npos) << dsl;
  EXPECT_NE(dsl.find("tensor<16x8xi32>"), std::string::npos) << dsl;
  ASSERT_FALSE(split.empty()) << "no shard-batch stage was dumped";
  EXPECT_NE(split.find("tensor<4x8xi32>"), std::string::npos) << split;
  EXPECT_EQ(split.find("tensor<16x8xi32>"), std::string::npos) << split;
  EXPECT_EQ(dumped(dir, "-gradient-accumulation.mlir"), "");
}

}  // namespace
