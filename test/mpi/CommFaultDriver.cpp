// Failure scenarios of MpiCommunicator, run under mpirun by comm_fault_test.sh.
//
// Usage: comm_fault_driver SCENARIO TIMEOUT_SECONDS
// Every rank all-reduces 1001 f32 named "grad.step<s>" at steps 0, 1, 2, 3. At step 2 rank 1
//   skip      issues nothing and sleeps (alive, absent): the others time out;
//   mismatch  issues an all_reduce of another name and size: every rank fails at once;
//   kill      waits until every other rank has issued the step-2 all_reduce (each sends it a
//             point-to-point "issued" message after issuing), then raises SIGKILL on itself.
// A rank whose wait() throws checks the message (collective, bytes, step, the missing rank or
// the mismatch), prints "rank R: CHECKED <message>" or "rank R: BAD <message>", then exits
// through abortJob. The script checks the lines of every surviving rank.
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/World.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace tessel::rt;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: comm_fault_driver skip|mismatch|kill TIMEOUT_SECONDS\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const double timeout = std::atof(argv[2]);
  MpiCommunicator comm(MpiOptions{timeout, true});
  const int rank = comm.rank(), world = comm.worldSize();
  std::vector<float> grad(1001, 1.0f);
  for (int step = 0; step < 4; ++step) {
    comm.setStep(step);
    const std::string name = "grad.step" + std::to_string(step);
    if (step == 2 && rank == 1) {
      if (scenario == "skip") {
        std::this_thread::sleep_for(std::chrono::duration<double>(3 * timeout));
        std::_Exit(0);
      }
      if (scenario == "kill") {
        int32_t token = 0;
        for (int p = 0; p < world; ++p)
          if (p != rank) comm.recv(&token, 1, DType::I32, p, "issued")->wait();
        std::fprintf(stderr, "rank 1: raising SIGKILL at step 2\n");
        std::raise(SIGKILL);
      }
      if (scenario == "mismatch") {
        std::vector<float> other(7, 0.0f);
        try {
          comm.allReduce(other.data(), 7, DType::F32, ReduceOp::Sum, "other")->wait();
        } catch (const CommError& e) {
          abortJob(rank, e.what());
        }
        abortJob(rank, "the mismatched collective completed");
      }
    }
    auto work = comm.allReduce(grad.data(), 1001, DType::F32, ReduceOp::Sum, name);
    if (step == 2 && scenario == "kill" && rank != 1) {
      int32_t token = 1;
      comm.send(&token, 1, DType::I32, 1, "issued");  // completes with rank 1's recv
    }
    try {
      work->wait();
    } catch (const CommError& e) {
      const std::string m = e.what();
      bool ok = m.find("all_reduce 'grad.step2'") != std::string::npos &&
                m.find("4004 bytes") != std::string::npos &&
                m.find("step 2") != std::string::npos;
      if (scenario == "mismatch")
        ok = ok && m.find("does not match rank 1") != std::string::npos &&
             m.find("all_reduce 'other'") != std::string::npos;
      else
        ok = ok && m.find("did not arrive: 1") != std::string::npos &&
             m.find("timed out after") != std::string::npos;
      std::fprintf(stderr, "rank %d: %s %s\n", rank, ok ? "CHECKED" : "BAD", m.c_str());
      std::fflush(stderr);
      abortJob(rank, m);
    }
  }
  std::printf("rank %d: finished without a failure\n", rank);
  return 0;
}
