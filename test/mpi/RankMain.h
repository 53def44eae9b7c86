// The main of a multi-rank test program run by ctest under mpirun: a world of exactly the
// expected size, the test on every rank (an exception on one rank aborts the whole job, so
// no rank waits forever for it), and the exit status from the failed checks summed over the
// ranks (RankCheck.h), with one summary line on rank 0.
#pragma once

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/World.h"
#include "test/mpi/RankCheck.h"

#include <cstdio>
#include <exception>

namespace tessel::test {

/// Runs `run` on every rank of a world of `ranks` ranks; returns 0 when every rank passed,
/// 1 when some check failed and 2 when the world has another size.
inline int rankMain(const char* name, int ranks, void (*run)(rt::MpiCommunicator&)) {
  rt::MpiCommunicator world(rt::MpiOptions{60.0, true});
  W = world.rank();
  if (world.worldSize() != ranks) {
    std::fprintf(stderr, "%s needs %d ranks, got %d\n", name, ranks, world.worldSize());
    return 2;
  }
  try {
    run(world);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED with %s\n", W, e.what());
    rt::abortJob(W, e.what());
  }
  int total = failures;
  world.allReduce(&total, 1, rt::DType::I32, rt::ReduceOp::Sum, "failures")->wait();
  if (W == 0)
    std::printf("%s: %s (%d failures over %d ranks)\n", name, total ? "FAILED" : "passed", total, ranks);
  return total == 0 ? 0 : 1;
}

}  // namespace tessel::test
