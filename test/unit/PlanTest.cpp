// The plan API (dsl/Plan.h): meshes of several axes, shard() with per-dimension axes and
// globs, tensor_parallel, sequence_parallel, --plan; every plan error is a ModelError at the
// line of the plan call that caused it (with a note at the other call for conflicts); and the
// plan reaches the IR: the grid and the parameters' shardings in the module the DSL builds.
#include "dsl/tessel.h"
#include "test/unit/GptPlanErrors.h"  // errorOf

#include <gtest/gtest.h>

#include <fnmatch.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <source_location>
#include <sstream>

namespace {

using tessel::Mesh;
using tessel::ModelError;
using tessel::Plan;
using tessel::Tensor;
using tessel::testing::errorOf;

const char* const kThisFile = std::source_location::current().file_name();


/// "<this file>:<line>:", how a note at `line` of this file starts.
std::string here(int line) { return std::string(kThisFile) + ":" + std::to_string(line) + ":"; }

/// Expects `e` at this file's `line`, with `text` in its message.
void expectAt(const std::optional<ModelError>& e, int line, const std::string& text) {
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->diagnostic().file, kThisFile) << e->what();
  EXPECT_EQ(e->diagnostic().line, line) << e->what();
  EXPECT_NE(std::string(e->what()).find(text), std::string::npos) << e->what();
}

/// One attention block: parameters blocks.0.ln1.{weight,bias} [C], blocks.0.attn.qkv.weight
/// [3C, C] and .bias [3C], blocks.0.attn.proj.weight [C, C] and .bias [C]; input x [B, T, C].
struct Block : tessel::Model {
  static constexpr int64_t B = 4, T = 4, C = 12;
  tessel::LayerNorm ln{this, "blocks.0.ln1", C};
  tessel::Linear qkv{this, "blocks.0.attn.qkv", C, 3 * C};
  tessel::Linear proj{this, "blocks.0.attn.proj", C, C};
  int attentionLine = 0;
  explicit Block(int64_t heads) {
    Tensor x = input("x", {B, T, C});
    Tensor h = tessel::causal_attention(qkv(ln(x)), heads); attentionLine = __LINE__;
    set_loss(tessel::reduce_mean(proj(h), {0, 1, 2}));
  }
};

/// The text of `dir`/00-dsl.mlir (the module as the DSL built it).
std::string dslModule(const std::string& dir) {
  std::ifstream in(dir + "/00-dsl.mlir");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Plan, ShardSpellingsGiveAxesPerDimension) {
  Plan plan = Plan(Mesh{{"dp", 2}, {"tp", 2}})
                  .shard("blocks.*.attn.qkv.weight", {"tp", {}})
                  .shard("blocks.*.attn.proj.weight", {{}, "tp"})
                  .shard("wte.weight", {{"dp", "tp"}, {}})
                  .shard("x", {std::string("dp")});
  using Dims = std::vector<std::vector<std::string>>;
  ASSERT_EQ(plan.shards().size(), 4u);
  EXPECT_EQ(plan.shards()[0].dims, (Dims{{"tp"}, {}}));
  EXPECT_EQ(plan.shards()[1].dims, (Dims{{}, {"tp"}}));
  EXPECT_EQ(plan.shards()[2].dims, (Dims{{"dp", "tp"}, {}}));
  EXPECT_EQ(plan.shards()[3].dims, (Dims{{"dp"}}));
  EXPECT_EQ(plan.shards()[0].glob, "blocks.*.attn.qkv.weight");
}

TEST(Plan, GlobsMatchLikeFnmatchOnTheDottedName) {
  // The documented cases: '*' crosses dots, '?' is one character.
  EXPECT_TRUE(tessel::glob_matches("blocks.*.attn.qkv.weight", "blocks.11.attn.qkv.weight"));
  EXPECT_TRUE(tessel::glob_matches("blocks.*.weight", "blocks.0.attn.qkv.weight"));
  EXPECT_TRUE(tessel::glob_matches("blocks.?.ln1.weight", "blocks.3.ln1.weight"));
  EXPECT_FALSE(tessel::glob_matches("blocks.?.ln1.weight", "blocks.12.ln1.weight"));
  EXPECT_FALSE(tessel::glob_matches("blocks.*.attn.qkv.weight", "blocks.0.attn.qkv.bias"));
  // No character classes (where fnmatch has them): '[' is itself.
  EXPECT_TRUE(tessel::glob_matches("w[0].*", "w[0].bias"));
  EXPECT_FALSE(tessel::glob_matches("w[01]", "w0"));
  // Against POSIX fnmatch(3) without flags (where '*' and '?' also match '.'): random globs
  // and names over a small alphabet, so that stars must backtrack often.
  std::mt19937 rng(7);
  const std::string globChars = "ab.*?", nameChars = "ab.";
  auto randomString = [&](const std::string& alphabet, int maxLength) {
    std::string s(std::uniform_int_distribution<int>(0, maxLength)(rng), ' ');
    for (char& c : s) c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    return s;
  };
  int matches = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string glob = randomString(globChars, 7), name = randomString(nameChars, 9);
    bool want = fnmatch(glob.c_str(), name.c_str(), 0) == 0;
    ASSERT_EQ(tessel::glob_matches(glob, name), want) << "glob '" << glob << "' name '" << name << "'";
    matches += want;
  }
  EXPECT_GT(matches, 1000);  // both outcomes are well represented
}

TEST(Plan, ParsePlanKeepsTheOrderAndMapsDpAndTp) {
  Plan plan = tessel::parsePlan("tp=2,dp=4");
  ASSERT_EQ(plan.mesh().axes().size(), 2u);
  EXPECT_EQ(plan.mesh().axes()[0], (std::pair<std::string, int64_t>{"tp", 2}));
  EXPECT_EQ(plan.mesh().axes()[1], (std::pair<std::string, int64_t>{"dp", 4}));
  EXPECT_EQ(plan.batch_axis(), "dp");
  EXPECT_EQ(plan.dp(), 4);
  EXPECT_EQ(plan.tensor_parallel_axis(), "tp");
  EXPECT_EQ(plan.tp(), 2);
  EXPECT_EQ(plan.tensor_parallel_site().file, "--plan");
  EXPECT_EQ(plan.tensor_parallel_site().column, 1);
  EXPECT_EQ(plan.batch_axis(), "dp");
  EXPECT_EQ(tessel::parsePlan("dp=2,tp=2").tensor_parallel_site().column, 6);
  EXPECT_TRUE(tessel::parsePlan("dp=2,tp=2").needs_grid());
  EXPECT_FALSE(tessel::parsePlan("dp=2").needs_grid());  // data parallelism compiles as before
  EXPECT_FALSE(tessel::parsePlan("tp=1").needs_grid());  // one rank: the single-device program
  EXPECT_FALSE(tessel::parsePlan("dp=2,tp=1").needs_grid());  // an axis of one rank changes nothing
  EXPECT_TRUE(Plan(Mesh{{"dp", 2}}).shard_batch("dp").shard("w", {"dp"}).needs_grid());
  EXPECT_FALSE(Plan(Mesh{{"dp", 2}, {"tp", 1}}).shard_batch("dp").shard("w", {"tp"}).needs_grid());
  EXPECT_EQ(tessel::parsePlan("dp=2").describe(), "dp=2 bucket_mb=25 overlap=on");
  EXPECT_EQ(tessel::parsePlan("dp=2,tp=2").sequence_parallel(true, tessel::PlanSite{"--sequence-parallel", 1, 1})
                .describe(),
            "dp=2,tp=2 tensor_parallel=tp sequence_parallel=on bucket_mb=25 overlap=on");
  EXPECT_EQ(Plan(Mesh{{"tp", 2}}).shard("a.*", {"tp", {}}).describe(), "tp=2 shard(a.*,[[tp],[]])");
}

TEST(Plan, WorldChecksAcceptTensorParallelismAndPipelinesWithPipeline) {
  EXPECT_NO_THROW(tessel::parsePlan("dp=2,tp=2").check_world_size(4));
  EXPECT_NO_THROW(tessel::parsePlan("tp=4").check_world_size(4));
  EXPECT_NO_THROW(tessel::parsePlan("pp=2,tp=2").check_world_size(4));  // --plan's pp item is a pipeline
  // A pp axis without pipeline(): test/unit/PlanPipelineTest.cpp.
  int line = __LINE__ + 1;
  Plan unused = Plan(Mesh{{"dp", 2}, {"tp", 2}}).shard_batch("dp");
  expectAt(errorOf([&] { unused.check_world_size(4); }), line, "mesh axis tp=2 is used by no part of the plan");
  // An axis that only shard() uses is used.
  EXPECT_NO_THROW(Plan(Mesh{{"x", 2}}).shard("w", {"x"}).check_world_size(2));
  line = __LINE__ + 1;
  Plan small = Plan(Mesh{{"dp", 2}, {"tp", 2}}).shard_batch("dp").tensor_parallel("tp");
  expectAt(errorOf([&] { small.check_world_size(2); }), line, "the mesh (dp=2,tp=2) has 4 ranks but the job has 2");
}

TEST(PlanErrors, UnknownAxisAtTheCallLine) {
  Mesh mesh{{"dp", 2}, {"tp", 2}};
  int line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).shard("blocks.*.weight", {"tq", {}}); }), line,
           "shard(\"blocks.*.weight\"): the mesh (dp=2,tp=2) has no axis 'tq'");
  line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).shard("w", {{"dp", "pp"}, {}}); }), line, "has no axis 'pp'");
  line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).tensor_parallel("model"); }), line,
           "tensor_parallel(\"model\"): the mesh (dp=2,tp=2) has no axis 'model'");
}

TEST(PlanErrors, SequenceParallelNeedsTensorParallelism) {
  int line = __LINE__ + 1;
  Plan plan = Plan(Mesh{{"dp", 2}}).shard_batch("dp").sequence_parallel(true);
  expectAt(errorOf([&] { plan.check_world_size(2); }), line, "sequence_parallel needs tensor parallelism");
  Block model(2);
  expectAt(errorOf([&] { model.compile({.train = false, .plan = plan}); }), line,
           "sequence_parallel needs tensor parallelism");
  // In either order with tensor_parallel, and off needs nothing.
  EXPECT_NO_THROW(Plan(Mesh{{"tp", 2}}).sequence_parallel(true).tensor_parallel("tp").check_world_size(2));
  EXPECT_NO_THROW(Plan(Mesh{{"dp", 2}}).shard_batch("dp").sequence_parallel(false).check_world_size(2));
}

TEST(PlanErrors, TensorParallelTwiceOrOverTheBatchAxisNotesTheOtherCall) {
  Mesh mesh{{"a", 2}, {"b", 2}};
  int first = __LINE__ + 1;
  Plan plan = Plan(mesh).tensor_parallel("a");
  int line = __LINE__ + 1;
  auto e = errorOf([&] { plan.tensor_parallel("b"); });
  expectAt(e, line, "tensor_parallel(\"b\"): the plan is already tensor-parallel over 'a'");
  EXPECT_NE(std::string(e->what()).find(here(first)), std::string::npos) << e->what();
  int batch = __LINE__ + 1;
  Plan same = Plan(mesh).shard_batch("a");
  line = __LINE__ + 1;
  same.tensor_parallel("a");
  e = errorOf([&] { same.check_world_size(4); });
  expectAt(e, line, "'a' is the batch axis");
  EXPECT_NE(std::string(e->what()).find(here(batch)), std::string::npos) << e->what();
}

TEST(PlanErrors, OneAxisTwiceOnATensor) {
  Mesh mesh{{"dp", 2}, {"tp", 2}};
  int line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).shard("w", {"tp", "tp"}); }), line,
           "shard(\"w\"): mesh axis 'tp' is used twice (on dimensions 0 and 1)");
  line = __LINE__ + 1;
  expectAt(errorOf([&] { Plan(mesh).shard("w", {{"tp", "tp"}, {}}); }), line,
           "mesh axis 'tp' is used twice (on dimension 0)");
}

TEST(PlanErrors, GlobMatchingNoParameterAtCompile) {
  Block model(2);
  int line = __LINE__ + 1;
  Plan plan = Plan(Mesh{{"tp", 2}}).shard("blocks.*.mlp.fc.weight", {"tp", {}});
  expectAt(errorOf([&] { model.compile({.train = false, .plan = plan}); }), line,
           "shard(\"blocks.*.mlp.fc.weight\"): the glob matches no parameter of the model (names look like "
           "'blocks.0.ln1.weight')");
}

TEST(PlanErrors, ConflictingEntriesNoteTheOtherEntry) {
  Block model(2);
  int first = __LINE__ + 1;
  Plan plan = Plan(Mesh{{"tp", 2}}).shard("blocks.*.attn.*.weight", {"tp", {}});
  int line = __LINE__ + 1;
  plan.shard("blocks.0.attn.proj.weight", {{}, "tp"});
  auto e = errorOf([&] { model.compile({.train = false, .plan = plan}); });
  expectAt(e, line,
           "shard(\"blocks.0.attn.proj.weight\"): parameter 'blocks.0.attn.proj.weight' is sharded [[],[tp]] here "
           "but [[tp],[]] by an earlier entry");
  EXPECT_NE(std::string(e->what())
                .find("\n" + here(first)),
            std::string::npos)
      << e->what();
  EXPECT_NE(std::string(e->what()).find(": note: the earlier entry shard(\"blocks.*.attn.*.weight\") is here"),
            std::string::npos)
      << e->what();
  // Two entries that agree are no conflict.
  Block agreeing(2);
  EXPECT_NO_THROW(agreeing.compile({.train = false,
                                    .plan = Plan(Mesh{{"tp", 2}})
                                                .shard("blocks.*.ln1.*", {"tp"})
                                                .shard("blocks.0.ln1.weight", {"tp"})
                                                .shard("blocks.*.attn.*.weight", {"tp", {}})
                                                .shard("blocks.0.attn.qkv.weight", {"tp", {}})}));
}

TEST(PlanErrors, WrongRankOrUnevenDimensionAtTheEntry) {
  Block model(2);
  int line = __LINE__ + 1;
  Plan rank = Plan(Mesh{{"tp", 2}}).shard("blocks.0.attn.qkv.weight", {"tp"});
  expectAt(errorOf([&] { model.compile({.train = false, .plan = rank}); }), line,
           "1 dimension given, but parameter 'blocks.0.attn.qkv.weight' has shape [36, 12] (rank 2)");
  Block again(2);
  // C = 12 rows over dp x tp = 2 x 5 = 10 parts: uneven.
  line = __LINE__ + 1;
  Plan uneven = Plan(Mesh{{"dp", 2}, {"tp", 5}}).shard_batch("dp").shard("blocks.0.attn.proj.weight", {{"dp", "tp"}, {}});
  expectAt(errorOf([&] { again.compile({.train = false, .plan = uneven}); }), line,
           "dimension 0 of parameter 'blocks.0.attn.proj.weight' (shape [12, 12]) has size 12, which dp=2 x tp=5 "
           "(10 parts) does not divide; shard() needs sizes its axes divide");
}

TEST(PlanErrors, TensorParallelNotDividingTheHeads) {
  Block model(4);  // C = 12 over 4 heads; tp = 3 divides C but not the heads
  int line = __LINE__ + 1;
  Plan plan = Plan(Mesh{{"tp", 3}}).tensor_parallel("tp");
  auto e = errorOf([&] { model.compile({.train = false, .plan = plan}); });
  expectAt(e, line, "tensor_parallel(\"tp\"): tp=3 does not divide the 4 attention heads");
  EXPECT_NE(std::string(e->what())
                .find("\n" + here(model.attentionLine)),
            std::string::npos)
      << e->what();
  Block fits(4);
  EXPECT_NO_THROW(fits.compile({.train = false, .plan = Plan(Mesh{{"tp", 2}}).tensor_parallel("tp")}));
}

TEST(Plan, FullyShardSplitsTheBatchAndShardsTheParameters) {
  Plan fsdp = tessel::parsePlan("fsdp=4");
  EXPECT_EQ(fsdp.fully_shard_axis(), "fsdp");
  EXPECT_EQ(fsdp.zero_stage(), 3);
  EXPECT_EQ(fsdp.batch_axis(), "fsdp");
  EXPECT_EQ(fsdp.batch_axes(), std::vector<std::string>{"fsdp"});
  EXPECT_EQ(fsdp.dp(), 4);
  EXPECT_TRUE(fsdp.needs_grid());
  EXPECT_NO_THROW(fsdp.check_world_size(4));
  EXPECT_EQ(fsdp.describe(), "fsdp=4 fully_shard=fsdp zero_stage=3 bucket_mb=25 overlap=on");
  // HSDP: the batch is split over both axes, in mesh order.
  Plan hsdp = tessel::parsePlan("dp=2,fsdp=3");
  EXPECT_EQ(hsdp.batch_axis(), "dp");
  EXPECT_EQ(hsdp.batch_axes(), (std::vector<std::string>{"dp", "fsdp"}));
  EXPECT_EQ(hsdp.dp(), 6);
  EXPECT_EQ(tessel::parsePlan("fsdp=2,dp=2").batch_axes(), (std::vector<std::string>{"fsdp", "dp"}));
  EXPECT_FALSE(tessel::parsePlan("fsdp=1").needs_grid());  // one rank: the single-device program
  Plan api = Plan(Mesh{{"dp", 2}, {"fsdp", 2}}).shard_batch("dp").fully_shard("fsdp");
  EXPECT_EQ(api.dp(), 4);
  EXPECT_NO_THROW(api.check_world_size(4));
  // ZeRO stages 1 and 2, and the reduce-scatter mode of gradient accumulation.
  for (int stage : {1, 2}) {
    Plan zero = Plan(Mesh{{"fsdp", 4}}).fully_shard("fsdp", {.stage = stage});
    EXPECT_EQ(zero.zero_stage(), stage);
    EXPECT_EQ(zero.describe(),
              "fsdp=4 fully_shard=fsdp zero_stage=" + std::to_string(stage) + " bucket_mb=25 overlap=on");
  }
  Plan last = Plan(Mesh{{"fsdp", 2}}).fully_shard(
      "fsdp", {.stage = 2, .reduce_scatter = tessel::FsdpReduceScatter::LastMicrostep});
  EXPECT_EQ(last.fsdp_reduce_scatter(), tessel::FsdpReduceScatter::LastMicrostep);
  EXPECT_EQ(fsdp.fsdp_reduce_scatter(), tessel::FsdpReduceScatter::EveryMicrostep);  // FSDP2's default
  EXPECT_EQ(last.describe(),
            "fsdp=2 fully_shard=fsdp zero_stage=2 reduce_scatter=last-microstep bucket_mb=25 overlap=on");
}

TEST(PlanErrors, FullyShardStagesAxesAndCombinations) {
  Mesh mesh{{"dp", 2}, {"fsdp", 2}};
  int line = __LINE__ + 1;
  auto stage0 = errorOf([&] { Plan(mesh).fully_shard("fsdp", {.stage = 0}); });
  expectAt(stage0, line, "fully_shard(\"fsdp\"): ZeRO stage 0 does not exist (stages are 1, 2 and 3)");
  line = __LINE__ + 1;
  auto stage4 = errorOf([&] { Plan(mesh).fully_shard("fsdp", {.stage = 4}); });
  expectAt(stage4, line, "ZeRO stage 4 does not exist (stages are 1, 2 and 3)");
  line = __LINE__ + 1;
  auto missing = errorOf([&] { Plan(mesh).fully_shard("zz"); });
  expectAt(missing, line, "fully_shard(\"zz\"): the mesh (dp=2,fsdp=2) has no axis 'zz'");
  line = __LINE__ + 1;
  Plan overBatch = Plan(mesh).shard_batch("dp").fully_shard("dp");
  expectAt(errorOf([&] { overBatch.check_world_size(4); }), line, "'dp' is already the batch (shard_batch) axis");
  // FSDP x TP: the batch is split over fsdp only, and the plan is accepted (tessel-fully-shard
  // stores each tensor-parallel block split again over fsdp).
  Plan withTp = Plan(Mesh{{"fsdp", 2}, {"tp", 2}}).fully_shard("fsdp").tensor_parallel("tp");
  EXPECT_NO_THROW(withTp.check_world_size(4));
  EXPECT_EQ(withTp.batch_axes(), std::vector<std::string>{"fsdp"});
  EXPECT_EQ(withTp.tp(), 2);
  EXPECT_NO_THROW(tessel::parsePlan("fsdp=2,tp=2").check_world_size(4));
}

TEST(PlanIr, TheModuleHoldsTheGridAndTheShardings) {
  const std::string dir = ::testing::TempDir() + "/tessel_plan_ir";
  std::filesystem::remove_all(dir);
  Block model(2);
  // Forward only: what is checked is the module as the DSL built it, whatever layout the
  // sharding passes later make of these (deliberately non-Megatron) entries.
  model.compile({.dump_ir_dir = dir,
                 .train = false,
                 .plan = Plan(Mesh{{"dp", 2}, {"tp", 2}})
                             .shard_batch("dp")
                             .tensor_parallel("tp")
                             .shard("blocks.*.attn.qkv.weight", {"tp", {}})
                             .shard("blocks.0.attn.proj.weight", {{}, {"dp", "tp"}})});
  std::string ir = dslModule(dir);
  EXPECT_NE(ir.find("shard.grid @mesh(shape = 2x2) {tessel.axis_names = [\"dp\", \"tp\"]}"), std::string::npos) << ir;
  EXPECT_NE(ir.find("\"blocks.0.attn.qkv.weight\" {std = 2.000000e-02 : f64, tessel.shardings = "
                    "[#tessel.sharding<@mesh, [[1], []]>]}"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("[#tessel.sharding<@mesh, [[], [0, 1]]>]"), std::string::npos) << ir;
  // Only the matched parameters carry a sharding.
  size_t count = 0;
  for (size_t at = ir.find("#tessel.sharding<"); at != std::string::npos; at = ir.find("#tessel.sharding<", at + 1))
    ++count;
  EXPECT_EQ(count, 2u) << ir;

  // A data-parallel plan compiles as before: no grid in the module the DSL builds.
  const std::string dpDir = ::testing::TempDir() + "/tessel_plan_ir_dp";
  std::filesystem::remove_all(dpDir);
  Block dp(2);
  dp.compile({.dump_ir_dir = dpDir, .plan = Plan(Mesh{{"dp", 2}}).shard_batch("dp")});
  EXPECT_EQ(dslModule(dpDir).find("shard.grid"), std::string::npos);
  EXPECT_NE(dslModule(dpDir).find("func.func @forward"), std::string::npos);
}

}  // namespace
