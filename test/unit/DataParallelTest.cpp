// Data parallelism keeps the math: the GPT example trained for 5 AdamW steps on the same
// global batches with dp = 2 and dp = 4 (ranks as threads of this process, over the
// in-process ThreadCommunicator) matches dp = 1 in the loss and every parameter; replicas
// are bitwise identical after every step; 4 x (B/4) gradient accumulation matches 1 x B;
// a clipped run gives every rank the dp = 1 norm; the validation loss, each rank evaluating
// its rows of the validation batch, is the dp = 1 one; the all-reduce payload per step is the
// total gradient bytes, in the buckets the packing rule predicts; every bucket is in place
// (no copies into or out of it); plan errors point at the plan's line.
#include "ThreadCommunicator.h"

#include "dsl/trainer/Flags.h"
#include "dsl/trainer/Trainer.h"
#include "examples/gpt/model.h"
#include "runtime/exec/Collectives.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

namespace {

constexpr int64_t kSteps = 5;
const gpt::Config kCfg{.layers = 2, .channels = 32, .heads = 2, .seq = 16};
constexpr int64_t kBatch = 8;

/// The same global batches on every rank and in every run: step s's tokens come from
/// mt19937_64(1000 + s), B x T bytes of random text (targets: the next random byte).
std::vector<int32_t> globalBatch(int64_t step, bool targets) {
  std::mt19937_64 rng(static_cast<uint64_t>(1000 + step));
  std::vector<int32_t> t(static_cast<size_t>(kBatch * kCfg.seq + 1));
  for (auto& v : t) v = static_cast<int32_t>(rng() % 256);
  return targets ? std::vector<int32_t>(t.begin() + 1, t.end()) : std::vector<int32_t>(t.begin(), t.end() - 1);
}

struct RankResult {
  std::vector<tessel::trainer::StepStats> stats;
  std::map<std::string, std::vector<float>> params;  // trainable parameters after training
  std::vector<uint64_t> paramHashes;                  // FNV-1a of all parameters before each step and at the end
  tessel::rt::CollectiveCounters counters;
  tessel::rt::Program program;
};

uint64_t hashParameters(tessel::rt::Executor& ex) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < ex.program().buffers.size(); ++i) {
    const auto& b = ex.program().buffers[i];
    if (b.kind != tessel::rt::BufferKind::Parameter && b.kind != tessel::rt::BufferKind::State) continue;
    const auto* p = static_cast<const unsigned char*>(ex.raw(static_cast<int>(i)));
    for (int64_t k = 0; k < b.bytes(); ++k) h = (h ^ p[k]) * 1099511628211ull;
  }
  return h;
}

/// Trains kSteps steps under `plan` on `world` ranks (threads) and returns every rank's result.
std::vector<RankResult> run(const tessel::Plan& plan, int world, double gradClip = 0.0) {
  gpt::GPT model(kCfg);
  gpt::build(model, kBatch);
  tessel::Program program = model.compile({.plan = plan});
  tessel::test::ThreadGroup group(world);
  std::vector<RankResult> results(static_cast<size_t>(world));
  std::vector<tessel::NativeProgram> natives;
  for (int r = 0; r < world; ++r)
    natives.push_back(program.native(
        {.threads = 1, .cache_dir = (std::filesystem::path(testing::TempDir()) / "tessel-dp-test").string(),
         .seed = 7}));
  auto body = [&](int rank) {
    tessel::test::ThreadCommunicator comm(group, rank);
    tessel::rt::Executor& ex = natives[static_cast<size_t>(rank)].executor();
    ex.setCommunicator(&comm);
    tessel::rt::checkCollectiveSchedule(ex.program(), comm);
    RankResult& out = results[static_cast<size_t>(rank)];
    int64_t calls = 0;
    const int64_t k = plan.microsteps();
    // Validation: step 1's global batch, this rank's rows of each microbatch.
    auto val = tessel::trainer::orderedValidation(
        kBatch, kBatch, rank, world, k, "rows of random bytes",
        [&](tessel::rt::ProgramExecutor& e, const std::string& fn, int64_t a, int64_t n) {
          auto t = globalBatch(1, false), y = globalBatch(1, true);
          e.setInput(fn, 0, t.data() + a * kCfg.seq, static_cast<size_t>(n * kCfg.seq) * 4);
          e.setInput(fn, 1, y.data() + a * kCfg.seq, static_cast<size_t>(n * kCfg.seq) * 4);
        });
    auto feed = [&](tessel::rt::ProgramExecutor& e, const std::string& fn, size_t) {
      int64_t step = calls / k, micro = calls % k;
      ++calls;
      if (micro == 0) out.paramHashes.push_back(hashParameters(ex));
      auto [a, b] = tessel::trainer::microbatchRows(kBatch, rank, world, micro, k);
      auto t = globalBatch(step, false), y = globalBatch(step, true);
      e.setInput(fn, 0, t.data() + a * kCfg.seq, static_cast<size_t>((b - a) * kCfg.seq) * 4);
      e.setInput(fn, 1, y.data() + a * kCfg.seq, static_cast<size_t>((b - a) * kCfg.seq) * 4);
    };
    tessel::trainer::TrainOptions o;
    o.steps = kSteps;
    o.schedule = "constant";
    o.gradClip = gradClip;
    o.evalBatches = 1;
    o.microsteps = k;
    o.comm = &comm;
    out.stats = tessel::trainer::train(ex, o, feed, val);
    out.paramHashes.push_back(hashParameters(ex));
    for (const tessel::ParameterSpec& p : program.parameters()) {
      const float* d = ex.data(ex.bufferId(p.name));
      int64_t n = ex.program().buffers[static_cast<size_t>(ex.bufferId(p.name))].numel();
      out.params[p.name].assign(d, d + n);
    }
    out.counters = ex.collectiveCounters();
    out.program = ex.program();
  };
  tessel::test::runRanks(world, body);
  return results;
}

tessel::Plan dpPlan(int64_t dp, double bucketMb = 0.02, bool overlap = true) {
  return tessel::Plan(tessel::Mesh{{"dp", dp}}).shard_batch("dp").bucket_mb(bucketMb).overlap(overlap);
}

// Tolerance: dp = N differs from dp = 1 only in the order of f32 summations: the batch mean
// (N local means averaged vs one mean over B*T tokens) and the GEMM reductions over the
// batch rows of the weight gradients (B*T/N rows per rank, then an N-term sum). Each is a
// relative error of at most ~n u (n = B*T = 128 terms, u = 6e-8: ~1e-5 of the gradient's
// scale, typically ~sqrt(n) u ~ 1e-6). AdamW carries a relative gradient error into its
// update m / sqrt(v) about one for one, times lr = 1e-3 per step, except for elements whose
// gradient is dominated by cancellation, where the update can differ by more. Measured on
// this configuration: at most 1.2e-6 over all parameters after 5 steps (dp = 2 and 4, with
// and without overlap, clipped or not, 4 x (B/4) accumulation). 5e-6 leaves 4x margin and
// still catches a sum in place of the average (AdamW is nearly invariant to the gradient's
// scale, yet that mutation moves parameters by 2.4e-5 to 1.7e-4 here) or a wrong shard.
constexpr double kParamTol = 5e-6;
// Losses (means of ~5.5) differed by at most 4.8e-7 (8 f32 ulps at 5.5) in the same runs;
// 5e-6 absolute keeps a 10x margin.
constexpr double kLossTol = 5e-6;

void expectMatches(const RankResult& got, const RankResult& want, const std::string& what) {
  ASSERT_EQ(got.stats.size(), want.stats.size());
  for (size_t s = 0; s < got.stats.size(); ++s) {
    EXPECT_NEAR(got.stats[s].loss, want.stats[s].loss, kLossTol) << what << " loss at step " << s + 1;
    EXPECT_NEAR(got.stats[s].gradNorm, want.stats[s].gradNorm, 1e-4 * want.stats[s].gradNorm)
        << what << " grad norm at step " << s + 1;
    // The validation loss (after the last step) is a mean over the same global batch.
    EXPECT_NEAR(got.stats[s].valLoss, want.stats[s].valLoss, kLossTol) << what << " val loss at step " << s + 1;
  }
  for (const auto& [name, values] : want.params) {
    const std::vector<float>& mine = got.params.at(name);
    ASSERT_EQ(mine.size(), values.size());
    double worst = 0;
    for (size_t i = 0; i < values.size(); ++i) worst = std::max(worst, std::abs(double(mine[i]) - values[i]));
    EXPECT_LE(worst, kParamTol) << what << " parameter " << name;
  }
}

void expectReplicasIdentical(const std::vector<RankResult>& ranks) {
  for (size_t r = 1; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].paramHashes, ranks[0].paramHashes) << "rank " << r << " diverged from rank 0";
    for (size_t s = 0; s < ranks[r].stats.size(); ++s)
      EXPECT_EQ(ranks[r].stats[s].gradNorm, ranks[0].stats[s].gradNorm) << "rank " << r << " step " << s + 1;
  }
  EXPECT_EQ(ranks[0].paramHashes.size(), static_cast<size_t>(kSteps + 1));
}

TEST(DataParallel, Dp2AndDp4MatchDp1) {
  RankResult single = run(tessel::Plan(), 1).at(0);
  // The single-device program has no collectives at all.
  EXPECT_EQ(single.counters.collectives, 0);
  for (int dp : {2, 4}) {
    for (bool overlap : {true, false}) {
      auto ranks = run(dpPlan(dp, 0.02, overlap), dp);
      for (int r = 0; r < dp; ++r)
        expectMatches(ranks[static_cast<size_t>(r)], single,
                      "dp=" + std::to_string(dp) + " rank " + std::to_string(r) + (overlap ? "" : " no-overlap"));
      expectReplicasIdentical(ranks);
    }
  }
}

TEST(DataParallel, AccumulationMatchesOneBigBatch) {
  RankResult single = run(tessel::Plan(), 1).at(0);
  RankResult accumulated = run(tessel::Plan().grad_accumulation(4), 1).at(0);
  expectMatches(accumulated, single, "4 x (B/4)");
  // And with data parallelism: dp = 2 x 2 microsteps.
  auto ranks = run(dpPlan(2).grad_accumulation(2), 2);
  expectMatches(ranks[0], single, "dp=2 x 2 microsteps");
  expectReplicasIdentical(ranks);
}

TEST(DataParallel, ClippingMatchesOnEveryRank) {
  // A threshold well below the unclipped norm (~1.7 at step 1) so every step clips.
  RankResult single = run(tessel::Plan(), 1, 0.05).at(0);
  ASSERT_GT(single.stats[0].gradNorm, 0.05);
  auto ranks = run(dpPlan(2), 2, 0.05);
  for (int r = 0; r < 2; ++r) expectMatches(ranks[static_cast<size_t>(r)], single, "clipped rank " + std::to_string(r));
  expectReplicasIdentical(ranks);
}

TEST(DataParallel, PayloadIsTheGradientBytesInPredictedBuckets) {
  gpt::GPT model(kCfg);
  const double bucketMb = 0.02;
  auto ranks = run(dpPlan(2, bucketMb), 2);
  // Independent count: every trainable parameter's gradient is reduced once per step.
  int64_t gradientBytes = 0;
  std::vector<int64_t> sizes;
  for (const tessel::ParameterSpec& p : model.parameters()) {
    int64_t n = 4;
    for (int64_t d : p.shape) n *= d;
    gradientBytes += n;
  }
  for (const RankResult& r : ranks) EXPECT_EQ(r.counters.payloadBytes, kSteps * gradientBytes);
  // The buckets: at most ceil(total / cap); each bucket but the last reaches the cap, and
  // without its last gradient it would not (greedy packing of whole gradients).
  const tessel::rt::Program& p = ranks[0].program;
  const double cap = bucketMb * 1024 * 1024;
  std::vector<std::pair<int64_t, int64_t>> buckets;  // (bytes, last tensor bytes)
  for (const auto& step : p.function("train_step")->steps)
    if (auto* c = std::get_if<tessel::rt::CollectiveStep>(&step); c && c->kind == tessel::rt::CollectiveStep::Kind::AllReduceStart)
      buckets.emplace_back(p.buffers[static_cast<size_t>(c->buffer)].bytes(),
                           p.buffers[static_cast<size_t>(c->tensors.back())].bytes());
  EXPECT_EQ(static_cast<int64_t>(buckets.size()) * kSteps, ranks[0].counters.collectives);
  EXPECT_LE(static_cast<double>(buckets.size()), std::ceil(static_cast<double>(gradientBytes) / cap));
  EXPECT_GT(buckets.size(), 1u);
  for (size_t b = 0; b + 1 < buckets.size(); ++b) {
    EXPECT_GE(static_cast<double>(buckets[b].first), cap) << "bucket " << b;
    EXPECT_LT(static_cast<double>(buckets[b].first - buckets[b].second), cap) << "bucket " << b;
  }
  tessel::rt::CollectiveBytes bytes = tessel::rt::collectiveBytes(p, "train_step");
  EXPECT_EQ(bytes.payloadBytes, gradientBytes);
  EXPECT_DOUBLE_EQ(bytes.ringWireBytes, static_cast<double>(gradientBytes));  // 2 (2-1)/2 = 1
}

// Gradients are written straight into their buckets (PyTorch DDP's gradient_as_bucket_view):
// every gradient bucket of train_step is in place, so the executor copies nothing into or out
// of a bucket (the copy path moved 2 x the gradient bytes per step), with and without overlap
// and with gradient accumulation; that the results still match dp = 1 is the tests above.
TEST(DataParallel, GradientsAreWrittenIntoTheirBucketsInPlace) {
  const std::vector<std::pair<tessel::Plan, std::string>> plans = {
      {dpPlan(2), "overlap"}, {dpPlan(2, 0.02, false), "no overlap"}, {dpPlan(2).grad_accumulation(2), "2 microsteps"}};
  for (const auto& [plan, what] : plans) {
    auto ranks = run(plan, 2);
    const tessel::rt::Function* f = ranks[0].program.function("train_step");
    ASSERT_NE(f, nullptr) << what;
    int buckets = 0;
    for (const auto& step : f->steps)
      if (auto* c = std::get_if<tessel::rt::CollectiveStep>(&step); c && !c->movesShards()) {
        EXPECT_TRUE(c->inPlace) << what << ": bucket " << c->bucket;
        buckets += c->kind == tessel::rt::CollectiveStep::Kind::AllReduceStart;
      }
    EXPECT_GT(buckets, 1) << what;
    for (const RankResult& r : ranks) {
      EXPECT_GT(r.counters.payloadBytes, 0) << what;
      EXPECT_EQ(r.counters.bucketCopyBytes, 0) << what;
    }
  }
}

TEST(DataParallel, PlanErrorsPointAtThePlanLine) {
  int line = __LINE__ + 1;
  tessel::Plan plan = tessel::Plan(tessel::Mesh{{"dp", 4}}).shard_batch("dp");
  try {
    plan.check_world_size(2);
    FAIL() << "a mesh of 4 on 2 ranks must fail";
  } catch (const tessel::ModelError& e) {
    EXPECT_EQ(e.diagnostic().line, line);
    EXPECT_NE(std::string(e.what()).find("has 4 ranks but the job has 2"), std::string::npos) << e.what();
  }
  line = __LINE__ + 1;
  tessel::Plan odd = tessel::Plan(tessel::Mesh{{"dp", 2}}).shard_batch("dp");
  gpt::GPT model(kCfg);
  gpt::build(model, 7);
  try {
    model.compile({.plan = odd});
    FAIL() << "a batch of 7 on 2 ranks must fail";
  } catch (const tessel::ModelError& e) {
    EXPECT_EQ(e.diagnostic().line, line);
    EXPECT_NE(std::string(e.what()).find("global batch 7 is not divisible by the data-parallel degree 2"),
              std::string::npos) << e.what();
  }
  // Tensor parallelism and pipelines are accepted (test/unit/PlanTest.cpp, PlanPipelineTest.cpp);
  // a pp axis needs pipeline(), which --plan's pp item is.
  EXPECT_NO_THROW(tessel::parsePlan("pp=2,dp=2").check_world_size(4));
  try {
    tessel::Plan(tessel::Mesh{{"pp", 2}, {"dp", 2}}).shard_batch("dp").check_world_size(4);
    FAIL() << "a pp axis without pipeline() must be rejected";
  } catch (const tessel::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("mesh axis pp=2 has no pipeline"), std::string::npos) << e.what();
  }
}

}  // namespace
