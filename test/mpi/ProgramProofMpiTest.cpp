// Multi-rank test of the whole program's proof (runtime/exec/ProgramProof.h) over
// MpiCommunicator: the hand-written two-stage programs of test/support/PipelinePrograms.h
// (mesh pp=2 on 2 ranks, pp=2,dp=2 on 4), one per rank's pp coordinate. Run by ctest as
// `mpirun -np 2 program_proof_mpi_test 2` and `mpirun -np 4 program_proof_mpi_test 4`.
// Checks, on every rank:
//  - the stages' programs, which differ, are proved: one send_recv group per rank, no
//    collective, and the same result on every rank;
//  - a tampered stage 1 whose program lacks its send_recv step (so stage 0's sends would
//    never be received) is refused on every rank, before anything runs, with the same message
//    naming world rank 0, its event 0 and the step's label; no rank hangs: the exchange is
//    the same on every rank whatever its program.
// Exit status 0 only if every rank passed.
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/exec/ProgramProof.h"
#include "test/support/PipelinePrograms.h"

#include "test/mpi/RankCheck.h"
#include "test/mpi/RankMain.h"

#include <algorithm>
#include <cstdlib>
#include <string>

using namespace tessel::rt;

namespace {

using tessel::test::expectThrows;
using tessel::test::failures;
using tessel::test::W;

void run(MpiCommunicator& world) {
  const bool dp = world.worldSize() == 4;
  const int stage = dp ? W / 2 : W;  // pp outermost: world rank = pp * dp_size + dp
  Program p = tessel::test::pipeline::stageProgram(stage, dp, 1 << 16);

  const pipeline::VerifyResult r = proveProgram(p, world, "train_step");
  // One send_recv per rank, and with dp one all-reduce over dp per rank (stageProgram).
  const int collectives = dp ? world.worldSize() : 0;
  CHECK(r.events == world.worldSize() + collectives && r.p2pGroups == world.worldSize() &&
            r.collectives == collectives,
        "proof of the stages: %lld events, %lld groups, %lld collectives", static_cast<long long>(r.events),
        static_cast<long long>(r.p2pGroups), static_cast<long long>(r.collectives));
  const pipeline::VerifyResult training = proveTraining(p, world);  // @forward absent: no events of it
  CHECK(training.events == r.events, "proveTraining: %lld events", static_cast<long long>(training.events));

  if (stage == 1) {  // no send_recv
    std::vector<Step>& steps = p.functions[0].steps;
    steps.erase(std::find_if(steps.begin(), steps.end(), [](const Step& s) {
      const auto* c = std::get_if<CollectiveStep>(&s);
      return c && c->kind == CollectiveStep::Kind::SendRecv;
    }));
    p.functions[0].actions.clear();
  }
  // World rank 0 (stage 0, dp 0) sends first to stage 1's rank with its dp coordinate.
  const std::string peer = dp ? "2" : "1";
  expectThrows([&] { proveProgram(p, world, "train_step"); },
               {"the compiled program can hang or mismatch: rank 0, event 0 (@train_step step 1: send_recv SEND big, "
                "SEND small, RECV big, RECV small over pp) sends to rank " + peer + ", which never receives it"},
               "a stage without its send_recv");
}

}  // namespace

int main(int argc, char** argv) {
  return tessel::test::rankMain("program_proof_mpi_test", argc > 1 ? std::atoi(argv[1]) : 2, run);
}
