// The parts of runtime/comm that need no launcher: bf16 rounding, the world-size-1
// communicator, launcher detection and makeWorld for a plain run. The MPI backend is tested
// under mpirun in test/mpi.
#include "runtime/numeric/BFloat16.h"
#include "runtime/comm/Reduce.h"
#include "runtime/comm/SingleCommunicator.h"
#include "runtime/comm/World.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>

using namespace tessel::rt;

namespace {

double bf16Value(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Reference rounding: of the two bf16 values around x (x's upper half and the next one up
/// in magnitude), the nearer one; on a tie the one with an even bit pattern.
uint16_t referenceBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  uint16_t down = static_cast<uint16_t>(u >> 16), up = static_cast<uint16_t>(down + 1);
  double dd = std::fabs(static_cast<double>(x) - bf16Value(down));
  double du = std::fabs(bf16Value(up) - static_cast<double>(x));
  if (std::isinf(bf16Value(up)) && !std::isinf(x)) {
    // Past the largest finite bf16: IEEE rounds to infinity from half an ulp beyond it.
    du = std::fabs(std::ldexp(1.0, 128) * (x < 0 ? -1 : 1) - static_cast<double>(x));
  }
  if (dd < du) return down;
  if (du < dd) return up;
  return (down & 1) ? up : down;
}

TEST(Bf16, RoundsToNearestEvenLikeTheReference) {
  std::mt19937 rng(7);
  for (int k = 0; k < 200000; ++k) {
    uint32_t u = rng();
    float x;
    std::memcpy(&x, &u, 4);
    if (std::isnan(x) || std::isinf(x)) continue;
    ASSERT_EQ(tessel::numeric::bf16FromFloat(x), referenceBf16(x)) << "x = " << x;
  }
  // Exact ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even 1.
  EXPECT_EQ(tessel::numeric::bf16FromFloat(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(tessel::numeric::bf16FromFloat(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16Value(tessel::numeric::bf16FromFloat(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16Value(tessel::numeric::bf16FromFloat(std::numeric_limits<float>::infinity()))));
}

TEST(SingleCommunicator, CollectivesOfOneRankKeepOrCopyTheBits) {
  SingleCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.worldSize(), 1);
  float x[3] = {1.5f, -2.25f, 3.0f};
  auto w = c.allReduce(x, 3, DType::F32, ReduceOp::Avg, "x");
  EXPECT_TRUE(w->test());
  w->wait();
  EXPECT_EQ(x[0], 1.5f);
  EXPECT_EQ(x[1], -2.25f);
  uint16_t h[2] = {0x3f81, 0xc000};  // 1.0078125, -2 in bf16
  c.allReduce(h, 2, DType::BF16, ReduceOp::Sum, "h")->wait();
  EXPECT_EQ(h[0], 0x3f81);
  EXPECT_EQ(h[1], 0xc000);
  int32_t in[5] = {1, 2, 3, 4, 5}, out[5] = {};
  c.allGather(in, out, 5, DType::I32, "ag")->wait();
  EXPECT_EQ(out[4], 5);
  int32_t out2[5] = {};
  c.reduceScatter(in, out2, 5, DType::I32, ReduceOp::Sum, "rs")->wait();
  EXPECT_EQ(out2[2], 3);
  int32_t out3[5] = {};
  c.allToAll(in, out3, 5, DType::I32, "a2a")->wait();
  EXPECT_EQ(out3[0], 1);
  c.broadcast(in, 5, DType::I32, 0, "bc")->wait();
  EXPECT_EQ(in[1], 2);
  c.allReduce(nullptr, 0, DType::F32, ReduceOp::Sum, "empty")->wait();
  CommStats s = c.stats();
  EXPECT_EQ(s.collectives, 7);
  EXPECT_EQ(s.payloadBytes, 3 * 4 + 2 * 2 + 5 * 4 * 4 + 0);
}

TEST(SingleCommunicator, BadArgumentsNameTheCollective) {
  SingleCommunicator c;
  float x = 0;
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const CommError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { c.allReduce(&x, -1, DType::F32, ReduceOp::Sum, "g"); }),
            "all_reduce 'g': element count must be >= 0, got -1");
  EXPECT_EQ(message([&] { c.broadcast(&x, 1, DType::F32, 1, "b"); }),
            "broadcast 'b': root rank 1 is outside [0, 1)");
  EXPECT_EQ(message([&] { c.send(&x, 1, DType::F32, 0, "s"); }),
            "send 's': rank 0 cannot send to itself");
  EXPECT_EQ(message([&] { c.recv(&x, 1, DType::F32, 3, "r"); }),
            "recv 'r': peer rank 3 is outside [0, 1)");
  EXPECT_EQ(message([&] { c.allGather(nullptr, &x, 1, DType::F32, "a"); }),
            "all_gather 'a': null buffer for 1 elements");
  EXPECT_EQ(message([&] { c.setTimeout(0); }),
            "collective timeout must be a number of seconds in (0, 1e+06], got 0");
  // Above 1e6 s, up to where the deadline in int64 nanoseconds (about 9.2e9 s) and beyond
  // overflows: refused, never converted.
  for (double huge : {1e6 * (1 + 1e-9), 1e10, 1e30, std::numeric_limits<double>::infinity(),
                      std::numeric_limits<double>::quiet_NaN()})
    EXPECT_NE(message([&] { c.setTimeout(huge); }).find("in (0, 1e+06]"), std::string::npos) << huge;
  EXPECT_EQ(message([&] { c.setTimeout(kMaxTimeoutSeconds); }), "no error");
  EXPECT_EQ(c.stats().collectives, 0);
}

WorldInfo detect(std::map<std::string, std::string> env) {
  return detectWorld([env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(DetectWorld, RecognisesEachLauncher) {
  WorldInfo plain = detect({});
  EXPECT_FALSE(plain.launched());
  EXPECT_EQ(plain.size, 1);
  EXPECT_EQ(plain.rank, 0);

  WorldInfo ompi = detect({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"PMIX_RANK", "2"}});
  EXPECT_EQ(ompi.launcher, "openmpi");
  EXPECT_EQ(ompi.rank, 2);
  EXPECT_EQ(ompi.size, 4);
  EXPECT_EQ(ompi.localRank, 0);
  EXPECT_EQ(ompi.localSize, 2);

  WorldInfo slurm = detect({{"SLURM_PROCID", "5"}, {"SLURM_STEP_NUM_TASKS", "8"},
                            {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "8"}});
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.size, 8);
  EXPECT_EQ(slurm.localRank, 1);

  // A batch script (no srun step) is a plain run.
  EXPECT_FALSE(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}).launched());

  WorldInfo hydra = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "1"}});
  EXPECT_EQ(hydra.launcher, "hydra");
  EXPECT_EQ(hydra.size, 3);
  EXPECT_EQ(hydra.localRank, 1);

  WorldInfo pmix = detect({{"PMIX_RANK", "3"}});
  EXPECT_EQ(pmix.launcher, "pmix");
  EXPECT_EQ(pmix.rank, 3);
  EXPECT_EQ(pmix.size, 0);  // known once MPI starts

  WorldInfo one = detect({{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}});
  EXPECT_EQ(one.size, 1);
  EXPECT_EQ(one.localRank, 0);
}

TEST(DetectWorld, MalformedVariablesAreNamed) {
  try {
    detect({{"OMPI_COMM_WORLD_SIZE", "four"}, {"OMPI_COMM_WORLD_RANK", "0"}});
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(),
                 "environment variable OMPI_COMM_WORLD_SIZE='four' is not a non-negative "
                 "integer (set by the launcher)");
  }
  try {
    detect({{"PMI_SIZE", "2"}, {"PMI_RANK", "2"}});
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(), "environment variable PMI_RANK=2 is outside the world of size 2");
  }
}

TEST(MakeWorld, APlainRunIsOneRankWithoutMpi) {
  // ctest runs this without a launcher (the test fails if one is found).
  ASSERT_FALSE(detectWorld().launched()) << "run this test without mpirun";
  World w = makeWorld();
  EXPECT_EQ(w.info.size, 1);
  ASSERT_NE(dynamic_cast<SingleCommunicator*>(w.comm.get()), nullptr);
  float x = 2;
  w.comm->allReduce(&x, 1, DType::F32, ReduceOp::Sum, "x")->wait();
  EXPECT_EQ(x, 2);
}

}  // namespace
