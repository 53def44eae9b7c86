// The GPU executor's send_recv step (runtime/cuda/CudaExecutor.h) on the stand-in CUDA driver
// and NCCL, run by ctest as `mpirun -np 2 standin_pipeline_cuda_test` with
// TESSEL_CUDA_LIBRARY_PATH set: each rank runs its own stage's program of a pp=2 pipeline
// (test/support/PipelinePrograms.h) on the device, whose one send_recv step exchanges an f32
// [4096] and an i32 [3] both ways through the NCCL communicator's group along pp (one
// ncclGroupStart ... ncclGroupEnd: ungrouped, both ranks' first ncclSend would wait for a
// receive the peer has not posted, which the stand-in refuses). Checks the received values
// exactly (integers), the counters (one send_recv, the bytes sent) and the stage check of
// setMesh (a rank given the other stage's program is refused before any exchange).
#include "codegen/Nvrtc.h"
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/exec/Sharding.h"
#include "test/mpi/RankMain.h"
#include "test/support/PipelinePrograms.h"

#include <cstdint>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::rt;
using namespace tessel::test::pipeline;

namespace {

constexpr int64_t kBig = 4096;

/// The module's only kernel, never launched: the executor needs a module to load.
constexpr const char* kSource = R"(extern "C" __global__ void tessel_unused(float* out) { out[0] = 0.0f; }
)";

float big(int r, int64_t i) { return static_cast<float>(100000 * r + i); }

void run(MpiCommunicator& world) {
  const int stage = world.rank();
  NcclCommunicator nccl(world, NcclOptions{.timeoutSeconds = 60, .hostWait = true});
  CudaModule module = compileCuda(kSource);
  const CudaBinary binary{"sm_90", std::string(module.cubin.begin(), module.cubin.end()), module.ptx};
  Program p = stageProgram(stage, false, kBig);
  p.cudaSource = kSource;

  {  // The other stage's program is refused on this rank.
    Program other = stageProgram(1 - stage, false, kBig);
    other.cudaSource = kSource;
    CudaExecutor wrong(other, binary);
    std::unique_ptr<DeviceMesh> mesh = deviceMeshFor(wrong.program(), nccl);
    std::string error;
    try {
      wrong.setMesh(mesh.get());
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    CHECK(error.find("compiled for stage " + std::to_string(1 - stage)) != std::string::npos,
          "the other stage's program: '%s'", error.c_str());
  }

  CudaExecutor ex(p, binary);
  std::unique_ptr<DeviceMesh> mesh = deviceMeshFor(ex.program(), nccl);
  ex.setMesh(mesh.get());
  std::vector<float> out(kBig);
  for (int64_t i = 0; i < kBig; ++i) out[static_cast<size_t>(i)] = big(stage, i);
  ex.writeBuffer(Out, out.data());
  const int32_t outi[3] = {stage, -stage, 7 * stage + 1};
  ex.writeBuffer(OutI, outi);
  ex.run("train_step");
  std::vector<OutputView> res = ex.outputs("train_step");
  const int peer = 1 - stage;
  int wrong = 0;
  for (int64_t i = 0; i < kBig; ++i) wrong += res[0].value(i) != big(peer, i);
  CHECK(wrong == 0, "%d of %lld received values differ from rank %d's", wrong, static_cast<long long>(kBig), peer);
  const auto* ini = static_cast<const int32_t*>(res[1].data);
  CHECK(ini[0] == peer && ini[1] == -peer && ini[2] == 7 * peer + 1, "received i32 [%d, %d, %d]", ini[0], ini[1],
        ini[2]);
  const CollectiveCounters& c = ex.collectiveCounters();
  CHECK(c.kindCollectives[4] == 1 && c.kindPayloadBytes[4] == kBig * 4 + 12, "send_recv counted %lld, %lld bytes",
        static_cast<long long>(c.kindCollectives[4]), static_cast<long long>(c.kindPayloadBytes[4]));
}

}  // namespace

int main() { return test::rankMain("standin_pipeline_cuda_test", 2, run); }
