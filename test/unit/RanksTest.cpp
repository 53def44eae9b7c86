// Startup agreement among the ranks (runtime/train/Ranks.h) and the plan a bundle records
// (runtime/bundle/Bundle.h BundlePlan), on one process. The multi-rank behaviour is tested
// under mpirun by test/mpi/check_world_refusal.sh and check_data_identity.sh.
#include "runtime/bundle/Bundle.h"
#include "runtime/comm/SingleCommunicator.h"
#include "runtime/numeric/Fnv1a.h"
#include "runtime/train/Ranks.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

using tessel::trainer::DataFingerprint;
using tessel::trainer::requireWorldSize;

std::string refusal(int world, int64_t planRanks, const std::string& plan, const std::string& remedy) {
  try {
    requireWorldSize(world, planRanks, plan, remedy);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Ranks, AWorldRunsOnlyAPlanOfItsSize) {
  EXPECT_EQ(refusal(2, 2, "dp=2", "pass"), "");
  EXPECT_EQ(refusal(1, 1, "dp=1", "pass"), "");
  EXPECT_EQ(refusal(2, 1, "dp=1", "pass"),
            "launched as 2 ranks but the plan is dp=1 (one rank); pass --plan dp=2 or launch one process");
  EXPECT_EQ(refusal(2, 4, "dp=4", "pass"),
            "launched as 2 ranks but the plan is dp=4 (4 ranks); pass --plan dp=2 or launch 4 processes "
            "(mpirun -np 4)");
  EXPECT_EQ(refusal(1, 2, "dp=2", "compile the bundle with"),
            "started as one rank but the plan is dp=2 (2 ranks); compile the bundle with --plan dp=1 or launch 2 "
            "processes (mpirun -np 2)");
  // Other axes than dp: no dp=N that would drop them.
  EXPECT_EQ(refusal(3, 4, "pp=2,dp=2", "pass"),
            "launched as 3 ranks but the plan is pp=2,dp=2 (4 ranks); launch 4 processes (mpirun -np 4), or pass "
            "a plan whose axis sizes multiply to 3");
  EXPECT_EQ(refusal(2, 1, "tp=1", "pass"),
            "launched as 2 ranks but the plan is tp=1 (one rank); launch one process, or pass a plan whose axis "
            "sizes multiply to 2");
}

TEST(Ranks, TheFingerprintIsFnv1aOverEveryByteAndTheirCount) {
  const std::string text = "to be, or not to be";
  DataFingerprint whole, pieces, other;
  whole.add(text.data(), text.size());
  pieces.add(text.data(), 5);
  pieces.add(text.data() + 5, text.size() - 5);
  EXPECT_EQ(whole.hash, pieces.hash);  // streaming: the split does not matter
  EXPECT_EQ(whole.bytes, text.size());
  EXPECT_EQ(whole.hash, tessel::numeric::fnv1a(tessel::numeric::kFnv1aOffsetBasis, text));
  std::string changed = text;
  changed[7] = 'O';
  other.add(changed.data(), changed.size());
  EXPECT_NE(other.hash, whole.hash);
  EXPECT_EQ(DataFingerprint{}.hash, tessel::numeric::kFnv1aOffsetBasis);
}

TEST(Ranks, OneRankAlwaysAgreesWithItself) {
  tessel::rt::SingleCommunicator one;
  DataFingerprint f;
  EXPECT_NO_THROW(tessel::trainer::requireSameData(one, f, "'x'"));
  char arg0[] = "prog", arg1[] = "--seed";
  char* argv[] = {arg0, arg1};
  EXPECT_NO_THROW(tessel::trainer::checkSameCommandLine(2, argv, one));
}

TEST(BundlePlan, RanksAndDataParallelDegreeComeFromTheMesh) {
  tessel::rt::BundlePlan p;
  EXPECT_EQ(p.ranks(), 1);
  EXPECT_EQ(p.dp(), 1);
  EXPECT_EQ(p.meshText(), "dp=1");
  p.mesh = {{"dp", 4}, {"tp", 1}};
  EXPECT_EQ(p.ranks(), 4);
  EXPECT_EQ(p.dp(), 4);
  EXPECT_EQ(p.meshText(), "dp=4,tp=1");
  p.batchAxis = "tp";
  EXPECT_EQ(p.dp(), 1);
}

TEST(BundlePlan, TheBatchIsSplitOverTheFullyShardedAxisToo) {
  tessel::rt::BundlePlan p;
  // fsdp=4: the fully sharded axis is the batch axis (Plan::batch_axis without shard_batch).
  p.mesh = {{"fsdp", 4}};
  p.batchAxis = p.fullyShardAxis = "fsdp";
  EXPECT_EQ(p.batchAxes(), std::vector<std::string>{"fsdp"});
  EXPECT_EQ(p.dp(), 4);
  // HSDP dp=2,fsdp=3: replicated over dp, sharded over fsdp, the batch split over both, in
  // mesh order whatever the fields' order.
  p.mesh = {{"dp", 2}, {"fsdp", 3}};
  p.batchAxis = "dp";
  EXPECT_EQ(p.batchAxes(), (std::vector<std::string>{"dp", "fsdp"}));
  EXPECT_EQ(p.dp(), 6);
  p.mesh = {{"fsdp", 3}, {"dp", 2}};
  EXPECT_EQ(p.batchAxes(), (std::vector<std::string>{"fsdp", "dp"}));
  // With tensor parallelism the tp axis splits no batch.
  p.mesh = {{"fsdp", 2}, {"tp", 2}};
  p.batchAxis = "fsdp";
  EXPECT_EQ(p.batchAxes(), std::vector<std::string>{"fsdp"});
  EXPECT_EQ(p.dp(), 2);
}

}  // namespace
