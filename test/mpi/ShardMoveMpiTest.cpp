// Multi-rank test of the one-step collectives that move shards (rt::CollectiveStep kinds
// AllGather, ReduceScatter, AllToAll; runtime/exec/Program.h) on a dp=2,tp=2 mesh over
// MpiCommunicator, without the compiler: a hand-written rt::Program with every kind along the
// middle dimension of rank-3 tensors, so the executor's repacking between the communicator's
// contiguous rank blocks and the tensor's slices is exercised. Run by ctest as
// `mpirun -np 4 shard_move_mpi_test`.
//
// Every rank's inputs hold val(rank, index) below (integers: exact in f32 (bf16: valBF16), and
// their sums and quarter-means too), and each output is checked element by element against
// the same function indexed as the op's definition says (TesselGatherScatterOps.td), with a
// group's rank q being world rank dp * 2 + q over tp and q itself over dp,tp (row-major, dp
// outermost: the layout DeviceMesh promises). Exact equality: no rounding can occur.
// Also the per-kind counters, from Communicator.h's payload rule: all_gather the gathered
// bytes, reduce_scatter and all_to_all the input's.
// Exit status 0 only if every rank passed.
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/World.h"
#include "runtime/exec/Collectives.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/Sharding.h"
#include "runtime/numeric/BFloat16.h"
#include "test/support/ShardedPrograms.h"

#include "test/mpi/RankCheck.h"
#include "test/mpi/RankMain.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace tessel::rt;

namespace {

using tessel::test::failures;
using tessel::test::W;
using K = CollectiveStep::Kind;

/// The value of element (a, i, b) of an f32 input of rank `rank` (a distinct small integer).
float val(int rank, int64_t a, int64_t i, int64_t b) { return static_cast<float>(1000 * rank + 100 * a + 10 * i + b); }
/// The same for the bf16 input [2, 1, 2]: below 2^8, so exact in bf16's 8-bit significand.
float valBF16(int rank, int64_t a, int64_t b) { return static_cast<float>(4 * rank + 2 * a + b); }

/// Buffer ids of program().
enum Id { X, X2, X3, XB, G, S1, R, S2, RA, S3, A2A, S4, GB, S5 };

Program program() {
  Program p;
  p.mesh = {{"dp", 2}, {"tp", 2}};
  int64_t offset = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, BufferKind kind, DType dtype = DType::F32) {
    Buffer b = tessel::test::buffer(name, std::move(shape), kind);
    b.dtype = dtype;
    if (kind == BufferKind::Temp) {
      b.offset = offset;
      offset += (b.bytes() + 63) / 64 * 64;
    }
    p.buffers.push_back(b);
  };
  add("step.x", {2, 3, 4}, BufferKind::Input);
  add("step.x2", {2, 4, 3}, BufferKind::Input);
  add("step.x3", {2, 4, 3}, BufferKind::Input);
  add("step.xb", {2, 1, 2}, BufferKind::Input, DType::BF16);
  add("%gathered", {2, 6, 4}, BufferKind::Temp);
  add("%staging1", {48}, BufferKind::Temp);
  add("%scattered", {2, 2, 3}, BufferKind::Temp);
  add("%staging2", {24}, BufferKind::Temp);
  add("%averaged", {2, 1, 3}, BufferKind::Temp);
  add("%staging3", {24}, BufferKind::Temp);
  add("%exchanged", {2, 2, 6}, BufferKind::Temp);
  add("%staging4", {48}, BufferKind::Temp);
  add("%gathered_bf16", {2, 4, 2}, BufferKind::Temp, DType::BF16);
  add("%staging5", {16}, BufferKind::Temp, DType::BF16);
  using tessel::test::shardMove;
  p.functions = {Function{"step",
                          {X, X2, X3, XB},
                          {G, R, RA, A2A, GB},
                          {"gathered", "scattered", "averaged", "exchanged", "gathered_bf16"},
                          {shardMove(K::AllGather, X, G, S1, 1, {"tp"}, 2),
                           shardMove(K::ReduceScatter, X2, R, S2, 1, {"tp"}, 2),
                           shardMove(K::ReduceScatter, X2, RA, S3, 1, {"dp", "tp"}, 4, 0, "avg"),
                           shardMove(K::AllToAll, X3, A2A, S4, 1, {"tp"}, 2, /*concatDim=*/2),
                           shardMove(K::AllGather, XB, GB, S5, 1, {"dp", "tp"}, 4)},
                          offset}};
  return p;
}

/// Fills a [A, n, B] input of this rank with val (valBF16, in bf16, when `bf16`).
void setInput(Executor& ex, size_t index, int64_t A, int64_t n, int64_t B, bool bf16 = false) {
  std::vector<float> v;
  for (int64_t a = 0; a < A; ++a)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t b = 0; b < B; ++b) v.push_back(bf16 ? valBF16(W, a, b) : val(W, a, i, b));
  if (!bf16) {
    ex.setInput("step", index, v.data(), v.size() * sizeof(float));
    return;
  }
  std::vector<uint16_t> h(v.size());
  tessel::numeric::floatToBF16(v.data(), h.data(), static_cast<int64_t>(v.size()));
  ex.setInput("step", index, h.data(), h.size() * sizeof(uint16_t));
}

void run(MpiCommunicator& world) {
  Executor ex(program(), [](const std::string&) { return nullptr; });
  ex.setCommunicator(&world);
  std::unique_ptr<DeviceMesh> mesh = deviceMeshFor(ex.program(), world);
  ex.setMesh(mesh.get());
  const int d = mesh->coordinate("dp"), t = mesh->coordinate("tp");
  auto tpRank = [&](int q) { return 2 * d + q; };  // world rank of tp index q in this dp row
  setInput(ex, 0, 2, 3, 4);
  setInput(ex, 1, 2, 4, 3);
  setInput(ex, 2, 2, 4, 3);
  setInput(ex, 3, 2, 1, 2, /*bf16=*/true);
  ex.run("step");
  std::vector<OutputView> out = ex.outputs("step");

  // all_gather over tp along dim 1: [2, 3, 4] -> [2, 6, 4], rows q * 3 .. q * 3 + 2 from tp index q.
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t b = 0; b < 4; ++b) {
        float want = val(tpRank(static_cast<int>(i / 3)), a, i % 3, b), got = out[0].value((a * 6 + i) * 4 + b);
        CHECK(got == want, "gathered[%lld][%lld][%lld] = %g, expected %g", (long long)a, (long long)i, (long long)b,
              got, want);
      }
  // reduce_scatter sum over tp along dim 1: [2, 4, 3] -> [2, 2, 3], slice t of the sum.
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t b = 0; b < 3; ++b) {
        float want = val(tpRank(0), a, 2 * t + i, b) + val(tpRank(1), a, 2 * t + i, b);
        float got = out[1].value((a * 2 + i) * 3 + b);
        CHECK(got == want, "scattered[%lld][%lld][%lld] = %g, expected %g", (long long)a, (long long)i, (long long)b,
              got, want);
      }
  // reduce_scatter avg over dp,tp along dim 1: [2, 4, 3] -> [2, 1, 3], row W of the mean.
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b) {
      float want = (val(0, a, W, b) + val(1, a, W, b) + val(2, a, W, b) + val(3, a, W, b)) / 4;
      float got = out[2].value(a * 3 + b);
      CHECK(got == want, "averaged[%lld][0][%lld] = %g, expected %g", (long long)a, (long long)b, got, want);
    }
  // all_to_all over tp, split dim 1, concat dim 2: [2, 4, 3] -> [2, 2, 6]; columns q * 3 ..
  // come from tp index q, which sent its rows 2 t .. 2 t + 1.
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t c = 0; c < 6; ++c) {
        float want = val(tpRank(static_cast<int>(c / 3)), a, 2 * t + i, c % 3), got = out[3].value((a * 2 + i) * 6 + c);
        CHECK(got == want, "exchanged[%lld][%lld][%lld] = %g, expected %g", (long long)a, (long long)i, (long long)c,
              got, want);
      }
  // bf16 all_gather over dp,tp along dim 1: [2, 1, 2] -> [2, 4, 2], row r from world rank r.
  for (int64_t a = 0; a < 2; ++a)
    for (int r = 0; r < 4; ++r)
      for (int64_t b = 0; b < 2; ++b) {
        float want = valBF16(r, a, b), got = out[4].value((a * 4 + r) * 2 + b);
        CHECK(got == want, "gathered_bf16[%lld][%d][%lld] = %g, expected %g", (long long)a, r, (long long)b, got,
              want);
      }

  // Counters per kind (Communicator.h's payload): all_gather 48 f32 + 16 bf16 gathered
  // elements; reduce_scatter twice a 24-element f32 input; all_to_all one.
  const CollectiveCounters& c = ex.collectiveCounters();
  const std::array<int64_t, kCollectiveKinds> wantCount{0, 2, 2, 1};
  const std::array<int64_t, kCollectiveKinds> wantBytes{0, 48 * 4 + 16 * 2, 2 * 24 * 4, 24 * 4};
  for (int k = 0; k < kCollectiveKinds; ++k) {
    CHECK(c.kindCollectives[k] == wantCount[k], "%s: %lld collectives, expected %lld", collectiveKindName(k),
          (long long)c.kindCollectives[k], (long long)wantCount[k]);
    CHECK(c.kindPayloadBytes[k] == wantBytes[k], "%s: %lld bytes, expected %lld", collectiveKindName(k),
          (long long)c.kindPayloadBytes[k], (long long)wantBytes[k]);
  }
  CHECK(c.collectives == 5 && c.payloadBytes == 224 + 192 + 96, "totals %lld collectives %lld bytes",
        (long long)c.collectives, (long long)c.payloadBytes);
  // The program's own count (--explain) agrees with what ran.
  CollectiveBytes planned = collectiveBytes(ex.program(), "step");
  CHECK(planned.kindPayloadBytes == c.kindPayloadBytes, "--explain's bytes per kind differ from the counters");
  std::string line = communicationByKind(c, 1);
  CHECK(line.find("all_gather 2.0/step 224 bytes/step, reduce_scatter 2.0/step 192 bytes/step, all_to_all 1.0/step "
                  "96 bytes/step") != std::string::npos,
        "communication by kind: %s", line.c_str());
}

}  // namespace

int main() { return tessel::test::rankMain("shard_move_mpi_test", 4, run); }
