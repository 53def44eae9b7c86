// FSDP units (compiler/FsdpUnits.h, Plan::fully_shard's unit / min_unit_params / prefetch):
// the unit rule on names, the size-based rule against counts derived by hand, the plan's
// errors at the fully_shard line, and the lowered GPT program under fsdp=2: the order of
// its parameter gathers by unit (root once, each block once in forward and once in
// backward), and with prefetch the start/wait placement and the bound on gathers in flight.
#include "compiler/FsdpUnits.h"
#include "dsl/tessel.h"
#include "examples/gpt/model.h"
#include "test/unit/GptPlanErrors.h"
#include "runtime/exec/Program.h"
#include "runtime/exec/ProgramJson.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <source_location>
#include <string>
#include <variant>
#include <vector>

namespace {

namespace rt = tessel::rt;
using tessel::FullyShardConfig;
using tessel::Mesh;
using tessel::ModelError;
using tessel::Plan;

const char* const kThisFile = std::source_location::current().file_name();

TEST(FsdpUnits, GlobStandsForItsOutermostModules) {
  const std::vector<std::string> blocks{"blocks.*"};
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.0.attn.qkv.weight", blocks), "blocks.0");
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.11.ln1.weight", blocks), "blocks.11");
  EXPECT_EQ(tessel::fsdpUnitOf("wte.weight", blocks), "");  // the root unit
  EXPECT_EQ(tessel::fsdpUnitOf("ln_f.bias", blocks), "");
  // A glob never makes a unit of the parameter itself: "blocks.0.ln1.*" matches no proper prefix.
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.0.ln1.weight", {"blocks.0.ln1.*"}), "");
}

TEST(FsdpUnits, NestedUnitsGiveTheInnermost) {
  // Literal paths (what the DSL passes): nested modules are units of their own.
  const std::vector<std::string> nested{"blocks.0", "blocks.0.mlp.fc"};
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.0.mlp.fc.weight", nested), "blocks.0.mlp.fc");
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.0.mlp.proj.weight", nested), "blocks.0");
  // The order of the globs does not matter.
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.0.mlp.fc.weight", {"blocks.0.mlp.fc", "blocks.0"}), "blocks.0.mlp.fc");
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.0.mlp.fc.weight", {"blocks.*", "*.mlp"}), "blocks.0.mlp");
}

/// The GPT's parameters (L blocks, channels C, vocabulary V, context T) and their counts.
std::vector<std::pair<std::string, int64_t>> gptCounts(int L, int64_t C, int64_t V, int64_t T) {
  std::vector<std::pair<std::string, int64_t>> p{{"wte.weight", V * C}, {"wpe.weight", T * C}};
  for (int l = 0; l < L; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    p.insert(p.end(), {{b + "ln1.weight", C},
                       {b + "ln1.bias", C},
                       {b + "attn.qkv.weight", 3 * C * C},
                       {b + "attn.qkv.bias", 3 * C},
                       {b + "attn.proj.weight", C * C},
                       {b + "attn.proj.bias", C},
                       {b + "ln2.weight", C},
                       {b + "ln2.bias", C},
                       {b + "mlp.fc.weight", 4 * C * C},
                       {b + "mlp.fc.bias", 4 * C},
                       {b + "mlp.proj.weight", 4 * C * C},
                       {b + "mlp.proj.bias", C}});
  }
  p.insert(p.end(), {{"ln_f.weight", C}, {"ln_f.bias", C}});
  return p;
}

TEST(FsdpUnits, SizeBasedUnitsMatchTheHandCount) {
  // C = 64: qkv 12480, fc 16640, proj 16448 elements reach 10000, attn.proj (4160) does not;
  // each block's remainder (ln1 128 + attn 4160 + ln2 128 = 4416) and both blocks (8832) stay
  // below; wte (16384) reaches it, wpe (2048) and ln_f (128) do not.
  std::vector<std::string> units = tessel::sizeBasedFsdpUnits(gptCounts(2, 64, 256, 32), 10000);
  std::set<std::string> got(units.begin(), units.end());
  EXPECT_EQ(got, (std::set<std::string>{"blocks.0.attn.qkv", "blocks.0.mlp.fc", "blocks.0.mlp.proj",
                                        "blocks.1.attn.qkv", "blocks.1.mlp.fc", "blocks.1.mlp.proj", "wte"}));
  // 4000: attn.proj (4160) too, then each block's remainder (256) and attn (0) stay below.
  units = tessel::sizeBasedFsdpUnits(gptCounts(2, 64, 256, 32), 4000);
  EXPECT_EQ(std::set<std::string>(units.begin(), units.end()).count("blocks.0.attn.proj"), 1u);
  EXPECT_EQ(std::set<std::string>(units.begin(), units.end()).count("blocks.0"), 0u);
  // 4416 exactly: attn.proj (4160) is below, so each block's remainder (4416) wraps the block.
  units = tessel::sizeBasedFsdpUnits(gptCounts(2, 64, 256, 32), 4416);
  EXPECT_EQ(std::set<std::string>(units.begin(), units.end()).count("blocks.1"), 1u);
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.1.attn.proj.weight", units), "blocks.1");
  EXPECT_EQ(tessel::fsdpUnitOf("blocks.1.mlp.fc.weight", units), "blocks.1.mlp.fc");
}

/// Compiles the GPT under `plan`, expecting a ModelError at this file's `line` with `text`.
void expectPlanError(const Plan& plan, int line, const std::string& text) {
  tessel::testing::expectGptPlanError(plan, kThisFile, line, text);
}

/// Expects fully_shard(config) itself to throw at this file's `line` with `text`.
void expectCallError(const FullyShardConfig& config, int line, const std::string& text,
                     std::source_location loc = std::source_location::current()) {
  try {
    Plan(Mesh{{"fsdp", 2}}).fully_shard("fsdp", config, loc);
    ADD_FAILURE() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_EQ(e.diagnostic().line, line) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(FsdpUnitsErrors, AtTheFullyShardLine) {
  int line = __LINE__ + 1;
  expectPlanError(Plan(Mesh{{"fsdp", 2}}).fully_shard("fsdp", {.unit = "decoder.*"}), line,
                  "fully_shard(\"fsdp\"): the unit glob 'decoder.*' matches no module of the model that holds "
                  "parameters (its modules: wte, wpe, ln_f, blocks.0, ...)");
  line = __LINE__ + 1;
  expectPlanError(Plan(Mesh{{"fsdp", 2}}).fully_shard("fsdp", {.unit = {"blocks.*", "blocks.*.mlp.fc.weight"}}),
                  line,
                  "fully_shard(\"fsdp\"): the unit glob 'blocks.*.mlp.fc.weight' names parameter "
                  "'blocks.0.mlp.fc.weight', not a module");
  line = __LINE__ + 1;
  expectPlanError(Plan(Mesh{{"fsdp", 2}}).fully_shard("fsdp", {.min_unit_params = 1000000000}), line,
                  "no module has min_unit_params=1000000000 parameter elements");
  expectCallError({.min_unit_params = 0}, __LINE__, "min_unit_params=0 must be at least 1");
  expectCallError({.min_unit_params = -5}, __LINE__, "min_unit_params=-5 must be at least 1");
  expectCallError({.prefetch = -1}, __LINE__, "prefetch=-1 must be at least 0");
  expectCallError({.unit = ""}, __LINE__, "a unit glob must not be empty");
  expectCallError({.unit = "blocks.*", .min_unit_params = 100}, __LINE__, "not both");
  // Units and prefetch group the gathers of stored shards: stage 3 only.
  expectCallError({.stage = 1, .unit = "blocks.*"}, __LINE__, "units and prefetch apply to ZeRO stage 3");
  expectCallError({.stage = 2, .min_unit_params = 100}, __LINE__, "stage 2 keeps them replicated");
  expectCallError({.stage = 2, .prefetch = 2}, __LINE__, "units and prefetch apply to ZeRO stage 3");
}

/// The unit of every parameter all-gather of `f` in step order, with its phase
/// ('=' whole, '>' start, '<' wait): "(root)=" or "blocks.0>". The norms' gather has none.
std::vector<std::string> gathers(const rt::Function& f) {
  std::vector<std::string> out;
  for (const rt::Step& s : f.steps) {
    const auto* c = std::get_if<rt::CollectiveStep>(&s);
    if (!c || c->kind != rt::CollectiveStep::Kind::AllGather || c->unit.empty()) continue;
    const char* phase = c->phase == rt::CollectiveStep::Phase::Whole   ? "="
                        : c->phase == rt::CollectiveStep::Phase::Start ? ">"
                                                                       : "<";
    out.push_back(c->unit + phase);
  }
  return out;
}

/// `n` copies of `s`.
std::vector<std::string> times(size_t n, const std::string& s) { return std::vector<std::string>(n, s); }

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const rt::Function& trainStep(const rt::Program& p) {
  for (const rt::Function& f : p.functions)
    if (f.name == "train_step") return f;
  throw std::runtime_error("no train_step");
}

rt::Program compileGpt(FullyShardConfig config) {
  gpt::GPT model(gpt::Config{2, 16, 2, 8, 256});
  gpt::build(model, 2);
  return model.compile({.plan = Plan(Mesh{{"fsdp", 2}}).fully_shard("fsdp", config)}).lower(false);
}

TEST(FsdpUnitsProgram, GathersGroupedPerUnitAndRootOnce) {
  // GPT blocks hold 12 parameters each (ln1, qkv, proj, ln2, fc, proj: weight and bias);
  // the root unit wte, wpe, ln_f.weight, ln_f.bias: 4. The norms' gather has no unit.
  rt::Program p = compileGpt({.unit = "blocks.*", .prefetch = 0});
  const std::vector<std::string> want = times(4, "(root)=") + times(12, "blocks.0=") + times(12, "blocks.1=") +
                                        times(12, "blocks.1=") + times(12, "blocks.0=");
  EXPECT_EQ(gathers(trainStep(p)), want);
}

TEST(FsdpUnitsProgram, PrefetchStartsUnitsAheadWithABoundInFlight) {
  for (int prefetch : {1, 2}) {
    rt::Program p = compileGpt({.unit = "blocks.*", .prefetch = prefetch});
    const rt::Function& f = trainStep(p);
    // Gather groups in order of their starts, and the groups with a gather in flight
    // (started, not yet waited) after each step.
    std::map<int, int> groupOfSlot, openPerGroup;
    std::vector<std::string> startedUnits, waitedUnits;
    std::vector<int> waitedGroups;
    size_t most = 0, splits = 0;
    int groupsAtFirstWait = -1;
    const rt::CollectiveStep* previous = nullptr;  // the previous parameter gather step
    for (const rt::Step& s : f.steps) {
      const auto* c = std::get_if<rt::CollectiveStep>(&s);
      if (!c || c->kind != rt::CollectiveStep::Kind::AllGather || c->unit.empty()) continue;
      ASSERT_NE(c->phase, rt::CollectiveStep::Phase::Whole) << "a parameter gather was not split";
      ++splits;
      if (c->phase == rt::CollectiveStep::Phase::Start) {
        // A group's starts are consecutive steps.
        if (!previous || previous->phase != rt::CollectiveStep::Phase::Start || previous->unit != c->unit)
          startedUnits.push_back(c->unit);
        const int group = static_cast<int>(startedUnits.size()) - 1;
        groupOfSlot[c->bucket] = group;
        ++openPerGroup[group];
      } else {
        if (groupsAtFirstWait < 0) groupsAtFirstWait = static_cast<int>(startedUnits.size());
        const int group = groupOfSlot.at(c->bucket);
        if (waitedGroups.empty() || waitedGroups.back() != group) {
          waitedGroups.push_back(group);
          waitedUnits.push_back(c->unit);
        }
        if (--openPerGroup[group] == 0) openPerGroup.erase(group);
      }
      most = std::max(most, openPerGroup.size());
      previous = c;
    }
    EXPECT_EQ(splits, 2u * (4 + 12 * 4)) << "each gather is a start and a wait";
    const std::vector<std::string> order{"(root)", "blocks.0", "blocks.1", "blocks.1", "blocks.0"};
    EXPECT_EQ(startedUnits, order);
    EXPECT_EQ(waitedUnits, order);
    EXPECT_EQ(waitedGroups, (std::vector<int>{0, 1, 2, 3, 4})) << "each group is waited for in start order";
    // Before the first wait, the first group and the `prefetch` after it are started.
    EXPECT_EQ(groupsAtFirstWait, 1 + prefetch);
    EXPECT_EQ(most, static_cast<size_t>(prefetch) + 1) << "prefetch " << prefetch;
  }
}

/// Index in `f.steps` of the first parameter gather in `phase`.
size_t firstGather(const rt::Function& f, rt::CollectiveStep::Phase phase) {
  for (size_t i = 0; i < f.steps.size(); ++i)
    if (const auto* c = std::get_if<rt::CollectiveStep>(&f.steps[i]); c && !c->unit.empty() && c->phase == phase)
      return i;
  throw std::runtime_error("no such gather");
}

TEST(FsdpUnitsProgram, SplitGathersRoundTripAndArePaired) {
  rt::Program p = compileGpt({.unit = "blocks.*", .prefetch = 1});
  EXPECT_NO_THROW(rt::validateProgram(p, "units"));
  int64_t version = 0;
  // The steps survive the program format (phase, slot and unit included).
  rt::Program back = rt::decodeProgramJson(rt::encodeProgramJson(p), "program.json", version);
  ASSERT_EQ(back.functions.size(), p.functions.size());
  for (size_t i = 0; i < p.functions.size(); ++i) EXPECT_EQ(back.functions[i].steps, p.functions[i].steps);
  auto functionOf = [](rt::Program& q) -> rt::Function& {
    for (rt::Function& f : q.functions)
      if (f.name == "train_step") return f;
    throw std::runtime_error("no train_step");
  };
  auto expectRefused = [](const rt::Program& q, const std::string& text) {
    try {
      rt::validateProgram(q, "units");
      ADD_FAILURE() << "expected the program to be refused: " << text;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  rt::Program noStart = p;
  rt::Function& f1 = functionOf(noStart);
  f1.steps.erase(f1.steps.begin() + static_cast<std::ptrdiff_t>(firstGather(f1, rt::CollectiveStep::Phase::Start)));
  expectRefused(noStart, "which is not started");
  rt::Program noWait = p;
  rt::Function& f2 = functionOf(noWait);
  f2.steps.erase(f2.steps.begin() + static_cast<std::ptrdiff_t>(firstGather(f2, rt::CollectiveStep::Phase::Wait)));
  expectRefused(noWait, "is started but never waited for");
  rt::Program splitScatter = p;
  rt::Function& f3 = functionOf(splitScatter);
  for (rt::Step& s : f3.steps)
    if (auto* c = std::get_if<rt::CollectiveStep>(&s); c && c->kind == rt::CollectiveStep::Kind::ReduceScatter) {
      c->phase = rt::CollectiveStep::Phase::Start;
      break;
    }
  expectRefused(splitScatter, "only an all_gather is split in a start and a wait");
}

}  // namespace
