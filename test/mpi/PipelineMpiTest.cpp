// Multi-rank test of pipeline parallelism's runtime half over MpiCommunicator, without the
// compiler: hand-written rt::Programs of two stages (mesh pp=2 on 2 ranks, pp=2,dp=2 on 4),
// one per rank's pp coordinate, as every rank compiles only its own stage. Run by ctest as
// `mpirun -np 2 pipeline_mpi_test 2` and `mpirun -np 4 pipeline_mpi_test 4`.
//
// @train_step of stage s: a copy ("sF0"), then ONE send_recv step ("sSEND_F0") in which each
// rank sends two tensors to the other stage and receives two from it (an f32 [65536], 256 KiB,
// far above MPI's eager limit, so a rank that waited for its send before posting its receive
// would deadlock with its peer doing the same; and an i32 [3]), then a copy of what arrived
// ("sB0"); on 4 ranks a synchronous all-reduce over dp ends stage 0's function and starts
// stage 1's, so the stages name their groups in opposite orders. Checks, on every rank:
//  - the received values are exactly the peer's (integers, exact in f32), the peer being the
//    rank with the same dp coordinate on the other stage; the dp all-reduce is exact too;
//  - the executor counts one send_recv and the bytes sent; the trace holds one "p2p" event and
//    the three action spans as "pipeline" events enclosing their steps;
//  - --check-schedule passes although the stages' programs differ, and --check-replicas
//    passes, then names a perturbed replica within a stage and a perturbed tied parameter
//    across stages;
//  - --export-params: rank 0's file holds both stages' parameters in their global shapes
//    ("s0.w" sharded over dp on 4 ranks), the tied "embed.weight" once, with stage 0's
//    values, all bitwise equal to the global initialisation (runtime/Init.h).
// Exit status 0 only if every rank passed.
#include "runtime/Init.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/exec/Collectives.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExportParams.h"
#include "runtime/exec/Replicas.h"
#include "runtime/exec/Sharding.h"
#include "test/support/PipelinePrograms.h"

#include "test/mpi/RankCheck.h"
#include "test/mpi/RankMain.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <string>
#include <vector>

using namespace tessel::rt;

namespace {

using namespace tessel::test::pipeline;
using tessel::test::expectThrows;
using tessel::test::failures;
using tessel::test::W;

constexpr uint64_t kSeed = 11;
constexpr int64_t kBig = 1 << 16;  // f32 elements of the large transfer (256 KiB)

/// The value element i of the large tensor has on world rank r (exact in f32: below 2^24).
float big(int r, int64_t i) { return static_cast<float>(100000 * r + i); }

void run(MpiCommunicator& world) {
  const bool dp = world.worldSize() == 4;
  const int stage = dp ? W / 2 : W;  // pp outermost: world rank = pp * dp_size + dp
  const int d = dp ? W % 2 : 0;
  const int peer = dp ? (1 - stage) * 2 + d : 1 - stage;
  Program p = stageProgram(stage, dp, kBig);
  Executor ex(p, [](const std::string&) { return nullptr; });
  std::unique_ptr<DeviceMesh> mesh = deviceMeshFor(ex.program(), world);
  ex.setMesh(mesh.get());
  ex.initParameters(kSeed);
  checkCollectiveSchedule(ex.program(), world);  // different programs per stage: compared within a stage only

  std::vector<float> out(kBig);
  for (int64_t i = 0; i < kBig; ++i) out[static_cast<size_t>(i)] = big(W, i);
  ex.writeBuffer(Out, out.data());
  const int32_t outi[3] = {W, -W, 7 * W + 1};
  ex.writeBuffer(OutI, outi);
  const float g[4] = {W + 1.0f, 2 * (W + 1.0f), 3 * (W + 1.0f), 4 * (W + 1.0f)};
  ex.writeBuffer(G, g);
  TraceRecorder trace;
  trace.alignClocks(&world);
  trace.setActive(true);
  ex.setTrace(&trace);
  ex.run("train_step");
  trace.setActive(false);

  std::vector<OutputView> res = ex.outputs("train_step");
  int wrong = 0;
  for (int64_t i = 0; i < kBig; ++i) wrong += res[0].value(i) != big(peer, i);
  CHECK(wrong == 0, "%d of %lld received f32 values differ from rank %d's", wrong, (long long)kBig, peer);
  const auto* ini = static_cast<const int32_t*>(res[1].data);
  CHECK(ini[0] == peer && ini[1] == -peer && ini[2] == 7 * peer + 1, "received i32 [%d, %d, %d] from rank %d",
        ini[0], ini[1], ini[2], peer);
  if (dp)  // the dp all-reduce of %g: the sum of its dp group's (i + 1) (w + 1), exact in f32
    for (int i = 0; i < 4; ++i) {
      const float want = static_cast<float>((i + 1) * ((2 * stage + 1) + (2 * stage + 2)));
      CHECK(res[2].value(i) == want, "g[%d] = %g after the dp all-reduce, expected %g", i, res[2].value(i), want);
    }
  const CollectiveCounters& c = ex.collectiveCounters();
  CHECK(c.kindCollectives[4] == 1 && c.kindPayloadBytes[4] == kBig * 4 + 12, "send_recv counted %lld, %lld bytes",
        (long long)c.kindCollectives[4], (long long)c.kindPayloadBytes[4]);

  // The trace: the send_recv as "p2p", each action span enclosing its step.
  std::vector<const TraceEvent*> spans, steps;
  for (const TraceEvent& e : trace.events()) (e.category == "pipeline" ? spans : steps).push_back(&e);
  // The dp all-reduce's start and wait lie outside the spans: before them on stage 1.
  if (dp) steps.erase(stage == 0 ? steps.end() - 2 : steps.begin(), stage == 0 ? steps.end() : steps.begin() + 2);
  CHECK(spans.size() == 3 && steps.size() == 3, "%zu spans and %zu step events", spans.size(), steps.size());
  if (spans.size() == 3 && steps.size() == 3) {
    CHECK(steps[1]->category == "p2p", "the send_recv's category is %s", steps[1]->category.c_str());
    CHECK(spans[1]->name == std::to_string(stage) + "SEND_F0", "span 1 is %s", spans[1]->name.c_str());
    for (size_t i = 0; i < 3; ++i)
      CHECK(spans[i]->startUs <= steps[i]->startUs &&
                spans[i]->startUs + spans[i]->durationUs >= steps[i]->startUs + steps[i]->durationUs,
            "span %zu does not enclose its step", i);
  }

  // Replicas: equal after initialisation (the tied embed.weight has one name, so one init).
  checkReplicas(ex, world, 1);
  if (dp) {  // stage 1's s1.b is replicated over dp: rank 3's copy perturbed
    const float old = ex.data(Own)[0];
    if (W == 3) ex.data(Own)[0] += 1;
    expectThrows([&] { checkReplicas(ex, world, 2); }, {"after step 2", "'s1.b'", "ranks 2, 3", "rank(s) 3 differ from rank 2"},
                 "perturbed s1.b");
    ex.data(Own)[0] = old;
  }
  const int tiedRank = dp ? 2 : 1;  // stage 1's lead
  const float embedOld = ex.data(Embed)[0];
  if (W == tiedRank) ex.data(Embed)[0] += 1;
  expectThrows([&] { checkReplicas(ex, world, 3); },
               {"'embed.weight'", "tied across stages 0, 1", fmt::format("rank(s) {} differ from rank 0", tiedRank)},
               "perturbed tied embed.weight");
  if (dp && W == 3) ex.data(Embed)[0] += 1;  // now both of stage 1's copies differ from stage 0's, equally

  // Export: stage 0's embed.weight wins; stage 1's differs (perturbed above) and is not written.
  tessel::SafeTensorsFile file = gatherParameters(ex, &world);
  if (W == 0) {
    const std::vector<float> embed = tessel::initParameter(12, tessel::InitKind::Normal, 1.0, kSeed, "embed.weight");
    const std::vector<float> w = tessel::initParameter(12, tessel::InitKind::Normal, 1.0, kSeed, "s0.w");
    const std::vector<float> b = tessel::initParameter(5, tessel::InitKind::Normal, 1.0, kSeed, "s1.b");
    CHECK(file.tensors.size() == 3, "%zu tensors exported", file.tensors.size());
    for (const auto& [name, want, shape] :
         {std::tuple{std::string("embed.weight"), embed, std::vector<int64_t>{4, 3}},
          std::tuple{std::string("s0.w"), w, std::vector<int64_t>{4, 3}},
          std::tuple{std::string("s1.b"), b, std::vector<int64_t>{5}}}) {
      if (!file.tensors.count(name)) {
        CHECK(false, "%s not exported", name.c_str());
        continue;
      }
      CHECK(file.tensors.at(name).shape == shape, "%s's shape", name.c_str());
      const std::vector<double> v = file.tensors.at(name).toF64();
      for (size_t i = 0; i < want.size() && i < v.size(); ++i)
        CHECK(v[i] == want[i], "exported %s[%zu] = %g, global %g", name.c_str(), i, v[i], want[i]);
    }
  } else {
    CHECK(file.tensors.empty(), "rank %d got %zu tensors", W, file.tensors.size());
  }
  ex.data(Embed)[0] = embedOld;
  checkReplicas(ex, world, 4);
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
  return tessel::test::rankMain("pipeline_mpi_test", ranks, run);
}
