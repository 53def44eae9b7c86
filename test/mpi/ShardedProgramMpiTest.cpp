// Multi-rank test of a sharded program on a dp=2,tp=2 mesh over MpiCommunicator, without the
// compiler: a hand-written rt::Program whose row-parallel weight "w" (global [4, 3], each tp
// rank holding 2 rows) and replicated bias "b" are initialised per shard, a GEMM of each
// rank's slice of x, a synchronous all-reduce sum over tp (Megatron's g) and a max over
// dp,tp. Run by ctest as `mpirun -np 4 sharded_program_mpi_test`.
//
// Checks, on every rank, against values computed here from the global initialisation
// (runtime/Init.h) and the closed form of each collective:
//  - each rank's shard of w is rows 2 tp .. 2 tp + 1 of the global tensor, bitwise;
//  - the tp all-reduce gives x @ W over the full contraction; the max over dp,tp the larger
//    of the two dp replicas' results; the executor counts 2 collectives per run;
//  - --check-replicas' comparison passes, and names the buffer, its group's axes and the
//    rank when one replica is perturbed (w: its dp group only; b: the whole mesh);
//  - the export gathers w to its global [4, 3] and b to [3], bitwise, and no optimizer state.
// Exit status 0 only if every rank passed.
#include "runtime/Init.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/World.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExportParams.h"
#include "runtime/exec/Replicas.h"
#include "runtime/exec/Sharding.h"
#include "test/support/ShardedPrograms.h"

#include "test/mpi/RankCheck.h"
#include "test/mpi/RankMain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace tessel::rt;

namespace {

using tessel::test::expectThrows;
using tessel::test::failures;
using tessel::test::W;

constexpr uint64_t kSeed = 5;

using tessel::test::buffer;

/// Buffers: 0 w [2, 3] of [4, 3] (rows over tp), 1 w:exp_avg (the same layout), 2 b [3]
/// (test/support/ShardedPrograms.h), 3 step.x [1, 2], temps 4 y, 5 and 7 the buckets, 6 ys,
/// 8 ymax (64 bytes apart).
Program program() {
  Program p;
  p.mesh = {{"dp", 2}, {"tp", 2}};
  p.buffers = tessel::test::meshParameters(1.0);
  for (Buffer b : {buffer("step.x", {1, 2}, BufferKind::Input), buffer("%y", {1, 3}, BufferKind::Temp, 0),
                   buffer("%sum", {3}, BufferKind::Temp, 64), buffer("%ys", {1, 3}, BufferKind::Temp, 128),
                   buffer("%max", {3}, BufferKind::Temp, 192), buffer("%ymax", {1, 3}, BufferKind::Temp, 256)})
    p.buffers.push_back(b);
  GemmStep g;
  g.a = 3;
  g.b = 0;
  g.c = 4;
  g.m = 1;
  g.n = 3;
  g.k = 2;
  using K = CollectiveStep::Kind;
  using tessel::test::synchronousAllReduce;
  p.functions = {Function{"step",
                          {3},
                          {6, 8},
                          {"y", "ymax"},
                          {g, synchronousAllReduce(K::AllReduceStart, 0, 5, 4, "sum", {"tp"}, 2),
                           synchronousAllReduce(K::AllReduceWait, 0, 5, 6, "sum", {"tp"}, 2),
                           synchronousAllReduce(K::AllReduceStart, 1, 7, 6, "max", {"dp", "tp"}, 4),
                           synchronousAllReduce(K::AllReduceWait, 1, 7, 8, "max", {"dp", "tp"}, 4)},
                          320}};
  return p;
}

void run(MpiCommunicator& world) {
  Program p = program();
  Executor ex(p, [](const std::string&) { return nullptr; });
  ex.setCommunicator(&world);
  std::unique_ptr<DeviceMesh> mesh = deviceMeshFor(ex.program(), world);
  ex.setMesh(mesh.get());
  ex.initParameters(kSeed);
  const int d = mesh->coordinate("dp"), t = mesh->coordinate("tp");

  // The shard of w: rows 2t, 2t + 1 of the global [4, 3].
  const std::vector<float> wGlobal = tessel::initParameter(12, tessel::InitKind::Normal, 1.0, kSeed, "w");
  const std::vector<float> bGlobal = tessel::initParameter(3, tessel::InitKind::Normal, 1.0, kSeed, "b");
  const float* w = ex.data(0);
  for (int i = 0; i < 6; ++i)
    CHECK(w[i] == wGlobal[static_cast<size_t>(6 * t + i)], "w[%d] = %g, global row element %g", i, w[i],
          wGlobal[static_cast<size_t>(6 * t + i)]);

  // x of dp replica d is (d + 1) [1, 2, 3, 4]; tp rank t holds its columns 2t, 2t + 1.
  const float x[2] = {static_cast<float>((d + 1) * (2 * t + 1)), static_cast<float>((d + 1) * (2 * t + 2))};
  ex.setInput("step", 0, x, sizeof x);
  ex.run("step");
  std::vector<OutputView> out = ex.outputs("step");
  for (int j = 0; j < 3; ++j) {
    double want = 0, wantMax = 0;
    for (int r = 0; r < 4; ++r) want += (d + 1) * (r + 1) * static_cast<double>(wGlobal[static_cast<size_t>(3 * r + j)]);
    // The dp = 1 replica's x is exactly twice dp = 0's, so its sums are exactly twice too.
    const double base = want / (d + 1);
    wantMax = std::max(base, 2 * base);
    // Four f32 products summed in f32 (two per rank, then across tp): |error| below
    // 4 x 2^-24 x sum |terms| (Higham's bound for n = 4), about 2.4e-7 x 10 x max|w|.
    double bound = 0;
    for (int r = 0; r < 4; ++r) bound += (d + 1) * (r + 1) * std::fabs(wGlobal[static_cast<size_t>(3 * r + j)]);
    bound *= 4 * std::ldexp(1.0, -24);
    CHECK(std::fabs(out[0].value(j) - want) <= bound, "y[%d] = %.9g, x @ W = %.9g", j, out[0].value(j), want);
    CHECK(std::fabs(out[1].value(j) - wantMax) <= 2 * bound, "ymax[%d] = %.9g, expected %.9g", j, out[1].value(j),
          wantMax);
  }
  CHECK(ex.collectiveCounters().collectives == 2, "%lld collectives", (long long)ex.collectiveCounters().collectives);
  CHECK(ex.collectiveCounters().payloadBytes == 24, "%lld bytes", (long long)ex.collectiveCounters().payloadBytes);

  // Replicas: all equal now; then one perturbed replica is named with its group.
  checkReplicas(ex, world, 1);
  const float bOld = ex.data(2)[0];
  if (W == 3) ex.data(2)[0] += 1;
  expectThrows([&] { checkReplicas(ex, world, 2); },
               {"after step 2", "'b'", "over [dp, tp]", "rank(s) 3 differ from rank 0"}, "perturbed b");
  ex.data(2)[0] = bOld;
  const float wOld = ex.data(0)[0];
  if (W == 3) ex.data(0)[0] += 1;
  expectThrows([&] { checkReplicas(ex, world, 3); }, {"'w'", "over [dp] (ranks 1, 3)", "rank(s) 3 differ from rank 1"},
               "perturbed w");
  ex.data(0)[0] = wOld;
  checkReplicas(ex, world, 4);

  // Export: rank 0 gets the global tensors.
  tessel::SafeTensorsFile file = gatherParameters(ex, &world);
  if (W == 0) {
    CHECK(file.tensors.size() == 2, "%zu tensors exported", file.tensors.size());
    CHECK(file.tensors.count("w") && file.tensors.at("w").shape == (std::vector<int64_t>{4, 3}), "w's shape");
    if (file.tensors.count("w")) {
      std::vector<double> v = file.tensors.at("w").toF64();
      for (size_t i = 0; i < 12; ++i) CHECK(v[i] == wGlobal[i], "exported w[%zu] = %g, global %g", i, v[i], wGlobal[i]);
    }
    if (file.tensors.count("b")) {
      std::vector<double> v = file.tensors.at("b").toF64();
      for (size_t i = 0; i < 3; ++i) CHECK(v[i] == bGlobal[i], "exported b[%zu] = %g, global %g", i, v[i], bGlobal[i]);
    }
  }

  // A mesh that is not the program's is refused.
  Program other = p;
  other.mesh.push_back({"pp", 1});
  Executor wrong(other, [](const std::string&) { return nullptr; });
  expectThrows([&] { wrong.setMesh(mesh.get()); }, {"is not the program's mesh"}, "wrong mesh");
}

}  // namespace

int main() { return tessel::test::rankMain("sharded_program_mpi_test", 4, run); }
