// The NCCL backend without a GPU:
// - the padded layout of uneven all_gather / reduce_scatter (runtime/comm/NcclPlan.h), run on
//   host arrays with a simulated NCCL (equal-count in-place collectives) for many (n, world)
//   and compared with the definitions: all_gather of the shards of x gives x back, and
//   reduce_scatter gives each rank its shard of the elementwise sum (closed form);
// - the bootstrap agreement: ranks exchange their setup outcome over an in-process
//   communicator, and when one failed, every rank throws naming it and its reason;
// - the error texts (the MPI backend's format);
// - the repacking around all_gather / reduce_scatter / all_to_all steps (runtime/exec/
//   BlockLayout.h shardMovePlan, which the CUDA executor enqueues around NCCL's contiguous
//   collectives), run on host arrays with simulated collectives for every dimension of
//   rank-1 to rank-3 tensors and groups of 1 to 4, against the ops' definitions indexed
//   element by element;
// - with nccl.h: every NCCL function the backend uses resolves in libnccl.so.2, and without a
//   usable driver the communicator fails on every rank with the driver's reason.
#include "runtime/comm/NcclPlan.h"
#include "runtime/comm/SingleCommunicator.h"
#include "runtime/exec/BlockLayout.h"
#include "test/unit/ThreadCommunicator.h"

#ifdef TESSEL_TEST_NCCL_API
#include "runtime/comm/NcclApi.h"
#include "runtime/comm/NcclCommunicator.h"
#endif

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace tessel::rt {
namespace {

using nccl::Copy;

void apply(const std::vector<Copy>& plan, const std::vector<float>& src, std::vector<float>& dst) {
  for (const Copy& c : plan)
    for (int64_t i = 0; i < c.count; ++i)
      dst.at(static_cast<size_t>(c.dst + i)) = src.at(static_cast<size_t>(c.src + i));
}

/// Runs the strided copies of a shard move on host arrays.
void apply(const std::vector<StridedCopy>& plan, const std::vector<float>& src, std::vector<float>& dst) {
  for (const StridedCopy& c : plan)
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t i = 0; i < c.width; ++i)
        dst.at(static_cast<size_t>(c.dst + r * c.dstPitch + i)) =
            src.at(static_cast<size_t>(c.src + r * c.srcPitch + i));
}

/// Element (rank, flat index) of a rank's input: distinct, exact small integers.
float element(int rank, int64_t i) { return static_cast<float>(1000 * rank + i); }

/// The row-major multi-index of flat index `i` in `shape`.
std::vector<int64_t> unflatten(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t flatten(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + idx[d];
  return i;
}

/// A one-step program for `kind` with input `in`: output shape by the ops' shape rules.
Program shardMoveProgram(CollectiveStep::Kind kind, std::vector<int64_t> in, int64_t dim, int64_t concatDim,
                         int64_t group) {
  std::vector<int64_t> out = in;
  if (kind == CollectiveStep::Kind::AllGather) out[static_cast<size_t>(dim)] *= group;
  if (kind != CollectiveStep::Kind::AllGather) out[static_cast<size_t>(dim)] /= group;
  if (kind == CollectiveStep::Kind::AllToAll) out[static_cast<size_t>(concatDim)] *= group;
  Program p;
  for (auto shape : {in, out}) {
    Buffer b;
    b.shape = shape;
    p.buffers.push_back(b);
  }
  return p;
}

// For each kind, every dim of shapes [6], [4, 6], [2, 6, 4] and groups 1, 2, 3 (where they
// divide): pack, the communicator's contiguous collective simulated on P host ranks, unpack;
// each output element is compared with the op's definition (TesselGatherScatterOps.td):
// all_gather out[.., q n + i, ..] = in_q[.., i, ..]; reduce_scatter out_r[.., i, ..] =
// sum_q in_q[.., r m + i, ..]; all_to_all out_r[.. (concat) q k + j ..] = in_q with the split
// dimension's index r m + i.
TEST(NcclPlan, ShardMoveRepackingMatchesTheOpsDefinitions) {
  using K = CollectiveStep::Kind;
  const std::vector<std::vector<int64_t>> shapes{{6}, {4, 6}, {2, 6, 4}};
  int checked = 0;
  for (const auto& shape : shapes)
    for (int64_t group = 1; group <= 3; ++group)
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim)
        for (int64_t cat = 0; cat < static_cast<int64_t>(shape.size()); ++cat)
          for (K kind : {K::AllGather, K::ReduceScatter, K::AllToAll}) {
            if (kind != K::AllToAll && cat > 0) continue;
            if (kind != K::AllGather && shape[static_cast<size_t>(dim)] % group != 0) continue;
            Program p = shardMoveProgram(kind, shape, dim, cat, group);
            CollectiveStep c;
            c.kind = kind;
            c.tensors = {0, 1};
            c.dim = dim;
            c.concatDim = cat;
            c.group = group;
            const ShardMovePlan plan = shardMovePlan(p, c);
            const Buffer& inB = p.buffers[0];
            const Buffer& outB = p.buffers[1];
            const auto P = static_cast<int>(group);
            const int64_t n = inB.numel();
            std::vector<std::vector<float>> in(P), staging(P), out(P);
            for (int r = 0; r < P; ++r) {
              for (int64_t i = 0; i < n; ++i) in[r].push_back(element(r, i));
              staging[r].assign(static_cast<size_t>(kind == K::AllGather ? n * P : kind == K::AllToAll ? 2 * n : n), 0);
              out[r].assign(static_cast<size_t>(outB.numel()), 0);
              apply(plan.pack, in[r], staging[r]);
            }
            // The communicators' contiguous collectives (Communicator.h).
            for (int r = 0; r < P; ++r) {
              if (kind == K::AllGather) {
                ASSERT_EQ(plan.count, n * P);
                for (int q = 0; q < P; ++q)
                  std::copy(in[q].begin(), in[q].end(), staging[r].begin() + q * n);
              } else if (kind == K::ReduceScatter) {
                ASSERT_EQ(plan.count, n);
                const int64_t m = n / P;
                for (int64_t i = 0; i < m; ++i) {
                  float sum = 0;
                  for (int q = 0; q < P; ++q) sum += staging[q][static_cast<size_t>(r * m + i)];
                  out[r][static_cast<size_t>(i)] = sum;
                }
              } else {
                ASSERT_EQ(plan.count, n / P);
                for (int q = 0; q < P; ++q)
                  for (int64_t i = 0; i < plan.count; ++i)
                    staging[r][static_cast<size_t>(plan.recvOffset + q * plan.count + i)] =
                        staging[q][static_cast<size_t>(r * plan.count + i)];
              }
            }
            for (int r = 0; r < P; ++r) {
              apply(plan.unpack, staging[r], out[r]);
              for (int64_t o = 0; o < outB.numel(); ++o) {
                std::vector<int64_t> idx = unflatten(o, outB.shape);
                float want = 0;
                const auto d = static_cast<size_t>(dim);
                if (kind == K::AllGather) {
                  const int64_t len = shape[d];
                  const int q = static_cast<int>(idx[d] / len);
                  idx[d] %= len;
                  want = element(q, flatten(idx, shape));
                } else if (kind == K::ReduceScatter) {
                  idx[d] += r * (shape[d] / P);
                  for (int q = 0; q < P; ++q) want += element(q, flatten(idx, shape));
                } else {
                  const auto cd = static_cast<size_t>(cat);
                  const int64_t k = outB.shape[cd] / P;  // the concatenated dim's block
                  const int q = static_cast<int>(idx[cd] / k);
                  idx[cd] %= k;
                  idx[d] += r * (shape[d] / P);
                  want = element(q, flatten(idx, shape));
                }
                ASSERT_EQ(out[r][static_cast<size_t>(o)], want)
                    << "kind " << static_cast<int>(kind) << " rank " << r << " of " << P << ", dim " << dim
                    << ", concat " << cat << ", output element " << o;
              }
            }
            ++checked;
          }
  EXPECT_GT(checked, 40);  // the loops really ran over the cases
}

TEST(NcclPlan, BlockIsTheCeilingAndPaddingOnlyWhenUneven) {
  // Closed form: ceil(10 / 4) = 3 (shards 3, 3, 2, 2), 8 / 4 = 2, ceil(1 / 2) = 1.
  EXPECT_EQ(nccl::paddedLayout(10, 4).block, 3);
  EXPECT_TRUE(nccl::paddedLayout(10, 4).padded());
  EXPECT_EQ(nccl::paddedLayout(8, 4).block, 2);
  EXPECT_FALSE(nccl::paddedLayout(8, 4).padded());
  EXPECT_EQ(nccl::paddedLayout(1, 2).block, 1);
  EXPECT_TRUE(nccl::paddedLayout(1, 2).padded());
  EXPECT_EQ(nccl::paddedLayout(0, 3).block, 0);
  EXPECT_FALSE(nccl::paddedLayout(0, 3).padded());
  // n = 10 over 4: rank 2 holds x[6, 8), so its block (at 2 * 3) gets 2 elements.
  EXPECT_EQ(nccl::allGatherPack(nccl::paddedLayout(10, 4), 2), (std::vector<Copy>{{0, 6, 2}}));
  EXPECT_EQ(nccl::reduceScatterUnpack(nccl::paddedLayout(10, 4), 3), (std::vector<Copy>{{9, 0, 2}}));
  EXPECT_TRUE(nccl::allGatherPack(nccl::paddedLayout(1, 2), 1).empty());  // rank 1 holds nothing
}

// all_gather through the padded scratch: every rank ends with x, for n = 0..17, world 1..6.
TEST(NcclPlan, PaddedAllGatherReassemblesTheVector) {
  for (int world = 1; world <= 6; ++world)
    for (int64_t n = 0; n <= 17; ++n) {
      const nccl::PaddedLayout l = nccl::paddedLayout(n, world);
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(100 + i);
      const float sentinel = -7.0f;  // never a value of x: a wrong copy shows
      std::vector<std::vector<float>> scratch(static_cast<size_t>(world),
                                              std::vector<float>(static_cast<size_t>(l.scratchElements()), sentinel));
      for (int r = 0; r < world; ++r) {
        auto [first, last] = shardRange(n, r, world);
        std::vector<float> send(x.begin() + first, x.begin() + last);
        apply(nccl::allGatherPack(l, r), send, scratch[static_cast<size_t>(r)]);
      }
      // ncclAllGather in place: block r of every rank's scratch becomes rank r's block.
      std::vector<std::vector<float>> gathered = scratch;
      for (int p = 0; p < world; ++p)
        for (int r = 0; r < world; ++r)
          for (int64_t i = 0; i < l.block; ++i)
            gathered[static_cast<size_t>(p)][static_cast<size_t>(r * l.block + i)] =
                scratch[static_cast<size_t>(r)][static_cast<size_t>(r * l.block + i)];
      for (int p = 0; p < world; ++p) {
        std::vector<float> recv(static_cast<size_t>(n), sentinel);
        apply(nccl::allGatherUnpack(l), gathered[static_cast<size_t>(p)], recv);
        EXPECT_EQ(recv, x) << "n " << n << " world " << world << " rank " << p;
      }
    }
}

// reduce_scatter through the padded scratch: rank p gets its shard of the reduction over r of
// v_r[i] = 1000 (r + 1) + i: the sum is 500 W (W + 1) + W i, the max 1000 W + i (both exact in
// f32 here). The scratch starts at `sentinel`; for Max it is larger than every value, so a
// padding element read back would show.
void checkPaddedReduceScatter(ReduceOp op, float sentinel) {
  for (int world = 1; world <= 6; ++world)
    for (int64_t n = 0; n <= 17; ++n) {
      const nccl::PaddedLayout l = nccl::paddedLayout(n, world);
      std::vector<std::vector<float>> scratch(static_cast<size_t>(world),
                                              std::vector<float>(static_cast<size_t>(l.scratchElements()), sentinel));
      for (int r = 0; r < world; ++r) {
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(1000 * (r + 1) + i);
        apply(nccl::reduceScatterPack(l), v, scratch[static_cast<size_t>(r)]);
      }
      for (int p = 0; p < world; ++p) {
        // ncclReduceScatter in place: rank p's block becomes the reduction of every rank's block p.
        std::vector<float> reduced = scratch[static_cast<size_t>(p)];
        for (int64_t i = 0; i < l.block; ++i) {
          float acc = scratch[0][static_cast<size_t>(p * l.block + i)];
          for (int r = 1; r < world; ++r) {
            float x = scratch[static_cast<size_t>(r)][static_cast<size_t>(p * l.block + i)];
            acc = op == ReduceOp::Max ? std::max(acc, x) : acc + x;
          }
          reduced[static_cast<size_t>(p * l.block + i)] = acc;
        }
        auto [first, last] = shardRange(n, p, world);
        std::vector<float> recv(static_cast<size_t>(last - first), -7.0f), expected;
        apply(nccl::reduceScatterUnpack(l, p), reduced, recv);
        for (int64_t i = first; i < last; ++i)
          expected.push_back(op == ReduceOp::Max ? static_cast<float>(1000 * world + i)
                                                 : static_cast<float>(500 * world * (world + 1) + world * i));
        EXPECT_EQ(recv, expected) << "n " << n << " world " << world << " rank " << p;
      }
    }
}

TEST(NcclPlan, PaddedReduceScatterGivesEachRankItsShardOfTheSum) {
  checkPaddedReduceScatter(ReduceOp::Sum, -7.0f);
}

TEST(NcclPlan, PaddedReduceScatterGivesEachRankItsShardOfTheMax) {
  checkPaddedReduceScatter(ReduceOp::Max, 1e9f);
}

TEST(NcclPlan, BootstrapRecordRoundTripsAndTruncatesTheReason) {
  nccl::BootstrapRecord r;
  r.ok = true;
  r.device = 3;
  r.ncclVersion = 22809;
  for (int i = 0; i < nccl::BootstrapRecord::kIdBytes; ++i) r.uniqueId[static_cast<size_t>(i)] = static_cast<char>(i * 7);
  r.reason = std::string(1000, 'x');
  std::vector<int32_t> words = nccl::encodeBootstrap(r);
  ASSERT_EQ(static_cast<int>(words.size()), nccl::kBootstrapWords);
  nccl::BootstrapRecord back = nccl::decodeBootstrap(words.data());
  EXPECT_TRUE(back.ok);
  EXPECT_EQ(back.device, 3);
  EXPECT_EQ(back.ncclVersion, 22809);
  EXPECT_EQ(back.uniqueId, r.uniqueId);
  EXPECT_EQ(back.reason, std::string(nccl::BootstrapRecord::kReasonBytes - 1, 'x'));
}

/// Runs exchangeBootstrap + requireAllReady on `world` threads; returns each rank's error ("" if none).
std::vector<std::string> agree(const std::vector<nccl::BootstrapRecord>& mine,
                               std::vector<std::vector<nccl::BootstrapRecord>>* seen = nullptr) {
  const int world = static_cast<int>(mine.size());
  test::ThreadGroup group(world);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::vector<nccl::BootstrapRecord>> got(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      test::ThreadCommunicator comm(group, r);
      try {
        got[static_cast<size_t>(r)] = nccl::exchangeBootstrap(comm, mine[static_cast<size_t>(r)]);
        nccl::requireAllReady(got[static_cast<size_t>(r)]);
      } catch (const CommError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  if (seen) *seen = got;
  return errors;
}

TEST(NcclPlan, EveryRankLearnsRankZerosIdWhenAllAreReady) {
  std::vector<nccl::BootstrapRecord> mine(3);
  for (int r = 0; r < 3; ++r) {
    mine[static_cast<size_t>(r)].ok = true;
    mine[static_cast<size_t>(r)].device = r;
    mine[static_cast<size_t>(r)].ncclVersion = 22809;
  }
  mine[0].uniqueId.fill('u');
  std::vector<std::vector<nccl::BootstrapRecord>> seen;
  std::vector<std::string> errors = agree(mine, &seen);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "");
    ASSERT_EQ(seen[static_cast<size_t>(r)].size(), 3u);
    EXPECT_EQ(seen[static_cast<size_t>(r)][0].uniqueId, mine[0].uniqueId);
    EXPECT_EQ(seen[static_cast<size_t>(r)][2].device, 2);
  }
}

TEST(NcclPlan, OneFailedRankMakesEveryRankFailNamingIt) {
  std::vector<nccl::BootstrapRecord> mine(3);
  for (auto& m : mine) {
    m.ok = true;
    m.ncclVersion = 22809;
  }
  mine[1].ok = false;
  mine[1].reason = "the CUDA driver libcuda.so.1 cannot be loaded";
  for (const std::string& e : agree(mine))
    EXPECT_EQ(e, "the NCCL communicator cannot start: rank 1: the CUDA driver libcuda.so.1 cannot be loaded");
  mine[1].ok = true;
  mine[2].ncclVersion = 22703;  // another NCCL on rank 2
  for (const std::string& e : agree(mine)) {
    EXPECT_NE(e.find("different NCCL versions"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 2 has 22703"), std::string::npos) << e;
  }
}

TEST(NcclPlan, MessagesHaveTheMpiBackendsFormat) {
  // The MPI backend's texts (runtime/comm/MpiOp.h, MpiProgress.cpp), written out by hand.
  EXPECT_EQ(nccl::describeOp("all_reduce", "bucket 0 of @train_step", 5, 4004, 3, -1),
            "all_reduce 'bucket 0 of @train_step' (collective #5, 4004 bytes, step 3)");
  EXPECT_EQ(nccl::describeOp("send", "act", 0, 400, 3, 2), "send 'act' (to rank 2, 400 bytes, step 3)");
  EXPECT_EQ(nccl::describeOp("recv", "act", 0, 400, 3, 0), "recv 'act' (from rank 0, 400 bytes, step 3)");
  EXPECT_EQ(nccl::timeoutMessage("all_gather 'x' (collective #2, 8 bytes, step 1)", 300.0, 1, 2),
            "all_gather 'x' (collective #2, 8 bytes, step 1) timed out after 300 s on rank 1 of 2; rank(s) that "
            "did not arrive: unknown (NCCL does not report which rank is missing)");
}

#ifdef TESSEL_TEST_NCCL_API
namespace fs = std::filesystem;

TEST(NcclApi, EveryNcclFunctionResolvesInLibnccl) {
  if (!fs::exists("/usr/local/cuda/lib64/libnccl.so.2") && !std::getenv("TESSEL_LIBNCCL"))
    GTEST_SKIP() << "no libnccl.so.2 here";
  const nccl::NcclApi& api = nccl::ncclApi();  // throws naming a missing function
#define TESSEL_EXPECT_RESOLVED(name) EXPECT_NE(api.name, nullptr) << #name;
  TESSEL_NCCL_FUNCTIONS(TESSEL_EXPECT_RESOLVED)
#undef TESSEL_EXPECT_RESOLVED
  EXPECT_GE(api.version, nccl::kMinVersion);  // ncclGetVersion needs no GPU
  EXPECT_EQ(nccl::versionText(22809), "2.28.9");
  EXPECT_EQ(nccl::versionText(2804), "2.8.4");  // NCCL's encoding before 2.9
}

TEST(NcclApi, WithoutADriverEveryRankFailsNamingWhy) {
  ::setenv("TESSEL_LIBCUDA", "libcuda-that-does-not-exist.so.1", 1);
  SingleCommunicator one;
  try {
    NcclCommunicator comm(one);
    FAIL() << "constructed without a driver";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("the NCCL communicator cannot start: rank 0: the CUDA driver "
                                         "libcuda-that-does-not-exist.so.1 cannot be loaded"),
              std::string::npos)
        << e.what();
  }
  // Two ranks (threads): both fail, and each names both ranks.
  test::ThreadGroup group(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      test::ThreadCommunicator boot(group, r);
      try {
        NcclCommunicator comm(boot);
      } catch (const CommError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("rank 0: the CUDA driver"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1: the CUDA driver"), std::string::npos) << e;
  }
}

TEST(NcclApi, WithTheToolkitsStubDriverItStopsAtCuInit) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!fs::exists(stub)) GTEST_SKIP() << stub << " is not here";
  ::setenv("TESSEL_LIBCUDA", stub, 1);
  SingleCommunicator one;
  try {
    NcclCommunicator comm(one);
    FAIL() << "constructed on the stub driver";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0: cuInit"), std::string::npos) << e.what();
  }
}

TEST(NcclApi, ABadTimeoutIsRefusedBeforeAnythingStarts) {
  SingleCommunicator one;
  EXPECT_THROW(NcclCommunicator(one, NcclOptions{.timeoutSeconds = 0}), CommError);
}
#endif  // TESSEL_TEST_NCCL_API

}  // namespace
}  // namespace tessel::rt
