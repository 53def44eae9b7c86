// A bundle's plan against a sharded program (runtime/bundle/BundleConfig.h): the plan's mesh
// must be the program's, every collective's group the plan's ranks along its axes, and the
// gradient buckets over the batch axis; forward/backward (synchronous) all-reduces over tp
// are not gradient buckets. The program is hand-written (test/support/ShardedPrograms.h).
#include "runtime/bundle/BundleConfig.h"
#include "test/support/ShardedPrograms.h"

#include <gtest/gtest.h>

namespace {

using namespace tessel::rt;
using tessel::test::buffer;

/// dp=2,tp=2: w (rows over tp) with AdamW state, input train_step.x [2, 3] (2 rows per rank of
/// a batch of 4), a synchronous sum of a [3] temp over tp and a gradient bucket of w over dp.
Program shardedProgram() {
  Program p;
  p.mesh = {{"dp", 2}, {"tp", 2}};
  p.buffers = tessel::test::meshParameters(0.02);  // w, w:exp_avg, b
  Buffer v = p.buffers[1];
  v.name = "w:exp_avg_sq";
  p.buffers.push_back(v);  // 3
  for (Buffer b : {buffer("train_step.x", {2, 3}, BufferKind::Input), buffer("%y", {3}, BufferKind::Temp, 0),
                   buffer("%sum", {3}, BufferKind::Temp, 64), buffer("%ys", {3}, BufferKind::Temp, 128),
                   buffer("%g", {6}, BufferKind::Temp, 192), buffer("%gw", {2, 3}, BufferKind::Temp, 256)})
    p.buffers.push_back(b);  // 4 .. 9
  using K = CollectiveStep::Kind;
  using tessel::test::synchronousAllReduce;
  CollectiveStep start = synchronousAllReduce(K::AllReduceStart, 1, 8, 0, "avg", {"dp"}, 2);
  start.synchronous = false;  // a gradient bucket: w's gradient averaged over dp
  start.names = {"w"};
  CollectiveStep wait = start;
  wait.kind = K::AllReduceWait;
  wait.tensors = {9};
  wait.names.clear();
  Function f{"train_step", {4}, {7}, {"loss"},
             {synchronousAllReduce(K::AllReduceStart, 0, 6, 5, "sum", {"tp"}, 2),
              synchronousAllReduce(K::AllReduceWait, 0, 6, 7, "sum", {"tp"}, 2), start, wait},
             320};
  f.batchShards = 2;
  p.functions = {f};
  validateProgram(p, "test");
  return p;
}

BundleInfo info(std::vector<std::pair<std::string, int64_t>> mesh) {
  BundleInfo i;
  i.model = "sharded";
  i.batch = 4;
  i.optimizer = "adamw";
  i.plan.mesh = std::move(mesh);
  return i;
}

void expectMismatch(const BundleInfo& i, const Program& p, const std::string& message) {
  try {
    checkBundleConfig(i, p, "bundle.json");
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(BundleMesh, TheSameMeshIsAcceptedAndAnotherIsNamed) {
  const Program p = shardedProgram();
  EXPECT_NO_THROW(checkBundleConfig(info({{"dp", 2}, {"tp", 2}}), p, "bundle.json"));
  expectMismatch(info({{"dp", 2}, {"tp", 4}}), p, "plan dp=2,tp=4 does not match program.json's mesh dp=2,tp=2");
  expectMismatch(info({{"tp", 2}, {"dp", 2}}), p, "plan tp=2,dp=2 does not match program.json's mesh dp=2,tp=2");
  // Without a mesh in the program, a plan axis besides the batch axis must have size 1.
  Program flat = p;
  flat.mesh.clear();
  for (Buffer& b : flat.buffers) b.globalShape.clear(), b.sharding.clear();
  expectMismatch(info({{"dp", 2}, {"tp", 2}}), flat, "plan axis tp=2 does not match program.json, which has no mesh");
}

TEST(BundleMesh, CollectivesAreCheckedAgainstThePlanAxisByAxis) {
  // A group that is not the plan's size along the axes (the program edited without its mesh).
  Program flat = shardedProgram();
  flat.mesh.clear();
  for (Buffer& b : flat.buffers) b.globalShape.clear(), b.sharding.clear();
  auto& tp = std::get<CollectiveStep>(flat.functions[0].steps[0]);
  EXPECT_EQ(tp.axes, std::vector<std::string>{"tp"});
  expectMismatch(info({{"dp", 2}, {"tp", 1}}), flat, "is over axes [tp] of 1 ranks but over a group of 2");
  expectMismatch(info({{"dp", 2}}), flat, "is over axis 'tp', which the plan's mesh lacks");
  // A gradient bucket that does not name the batch axis when dp > 1.
  Program noBatch = shardedProgram();
  for (Step& s : noBatch.functions[0].steps)
    if (auto* c = std::get_if<CollectiveStep>(&s); c && !c->synchronous) c->axes = {"tp"};
  expectMismatch(info({{"dp", 2}, {"tp", 2}}), noBatch,
                 "plan.batch_axis 'dp' does not match program.json: the all-reduce of bucket 1 in @train_step is "
                 "over axes [tp]");
}

}  // namespace
