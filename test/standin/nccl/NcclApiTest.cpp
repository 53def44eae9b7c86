// The stand-in NCCL's API (test/standin/nccl/Nccl.cpp) with ranks as threads of one process,
// over a stub driver whose streams run host functions at once (StubDriver.cpp):
// - the calls the runtime makes (runtime/comm/NcclCommunicator.cpp): the unique id, init,
//   all_reduce avg / sum / max, all_gather and reduce_scatter in place, broadcast, and a
//   group of ncclSend / ncclRecv with every peer including oneself (its all_to_all), against
//   closed forms;
// - what NCCL refuses is refused with ncclInvalidArgument and a reason in ncclGetLastError
//   (a data type or reduction the stand-in does not implement, a root or peer outside the
//   communicator, overlapping buffers that are not NCCL's in-place positions, NULL, a buffer
//   that is not device memory);
// - a peer that aborts is an asynchronous ncclRemoteError, and later calls return it.
#include <nccl.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

cudaStream_t kStream = nullptr;  // the stub driver ignores streams

/// Runs `body(rank, comm)` on `n` threads that form one communicator.
void onRanks(int n, const std::function<void(int, ncclComm_t&)>& body) {
  static void* stub = dlopen(TESSEL_STUB_DRIVER, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(stub, nullptr) << dlerror();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
      body(r, comm);
      if (comm) ncclCommDestroy(comm);
    });
  for (auto& t : ranks) t.join();
}

std::string lastError() { return ncclGetLastError(nullptr); }

TEST(StandinNcclApi, VersionIsTheHeadersAndAtLeastTheRuntimesMinimum) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_GE(v, 21000);  // runtime/comm/NcclApi.h kMinVersion (ncclAvg)
}

TEST(StandinNcclApi, CollectivesTheRuntimeCalls) {
  const int n = 3;
  onRanks(n, [&](int r, ncclComm_t& comm) {
    // all_reduce avg in place: mean of (r + 1) * 3 over ranks 0..2 = 6.
    std::vector<float> x(5, (r + 1) * 3.0f);
    ASSERT_EQ(ncclAllReduce(x.data(), x.data(), 5, ncclFloat32, ncclAvg, comm, kStream), ncclSuccess);
    for (float v : x) EXPECT_EQ(v, 6.0f);
    std::vector<int32_t> m{r, -r};
    ASSERT_EQ(ncclAllReduce(m.data(), m.data(), 2, ncclInt32, ncclMax, comm, kStream), ncclSuccess);
    EXPECT_EQ(m, (std::vector<int32_t>{n - 1, 0}));
    // all_gather in place: block r at r * 2.
    std::vector<float> g(2 * n, -1.0f);
    g[2 * r] = static_cast<float>(r);
    g[2 * r + 1] = static_cast<float>(10 * r);
    ASSERT_EQ(ncclAllGather(g.data() + 2 * r, g.data(), 2, ncclFloat32, comm, kStream), ncclSuccess);
    for (int p = 0; p < n; ++p) EXPECT_EQ(g[2 * p + 1], 10.0f * p);
    // reduce_scatter sum, recvcount 1 per rank, in place: element p of every rank is p + rank.
    std::vector<float> s(n);
    for (int p = 0; p < n; ++p) s[p] = static_cast<float>(p + r);
    ASSERT_EQ(ncclReduceScatter(s.data(), s.data() + r, 1, ncclFloat32, ncclSum, comm, kStream), ncclSuccess);
    EXPECT_EQ(s[r], static_cast<float>(n * r + n * (n - 1) / 2));
    // broadcast from rank 2 in place.
    std::vector<float> b(3, static_cast<float>(r));
    ASSERT_EQ(ncclBroadcast(b.data(), b.data(), 3, ncclFloat32, 2, comm, kStream), ncclSuccess);
    EXPECT_EQ(b, (std::vector<float>(3, 2.0f)));
    // all_to_all as grouped send/recv with every peer, oneself included.
    std::vector<float> out(n), in(n, -1.0f);
    for (int p = 0; p < n; ++p) out[p] = static_cast<float>(100 * r + p);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int p = 0; p < n; ++p) {
      ASSERT_EQ(ncclSend(&out[p], 1, ncclFloat32, p, comm, kStream), ncclSuccess);
      ASSERT_EQ(ncclRecv(&in[p], 1, ncclFloat32, p, comm, kStream), ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
    for (int p = 0; p < n; ++p) EXPECT_EQ(in[p], static_cast<float>(100 * p + r));
  });
}

TEST(StandinNcclApi, WhatTheStandinDoesNotImplementIsRefusedWithAReason) {
  // The last error is one text for the process (as ncclGetLastError reads it), so the ranks
  // make their refused calls one at a time: otherwise one rank's error can replace the
  // other's between its call and its check.
  std::mutex refusals;
  onRanks(2, [&](int r, ncclComm_t& comm) {
    std::vector<float> x(8, 1.0f);
    std::unique_lock<std::mutex> one(refusals);
    EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 4, ncclFloat16, ncclSum, comm, kStream), ncclInvalidArgument);
    EXPECT_NE(lastError().find("data type ncclFloat16"), std::string::npos) << lastError();
    EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 4, ncclFloat32, ncclMin, comm, kStream), ncclInvalidArgument);
    EXPECT_NE(lastError().find("reduction 3 is not implemented"), std::string::npos) << lastError();
    EXPECT_EQ(ncclReduceScatter(x.data(), x.data(), 2, ncclFloat64, ncclSum, comm, kStream), ncclInvalidArgument);
    EXPECT_EQ(ncclBroadcast(x.data(), x.data(), 4, ncclFloat32, 2, comm, kStream), ncclInvalidArgument);
    EXPECT_NE(lastError().find("root 2 outside"), std::string::npos) << lastError();
    EXPECT_EQ(ncclSend(x.data(), 4, ncclFloat32, -1, comm, kStream), ncclInvalidArgument);
    EXPECT_EQ(ncclAllReduce(x.data(), x.data() + 1, 4, ncclFloat32, ncclSum, comm, kStream), ncclInvalidArgument);
    EXPECT_NE(lastError().find("overlap"), std::string::npos) << lastError();
    // all_gather's in-place position is recvbuff + rank * sendcount; rank 1 at offset 0 is not.
    if (r == 1) {
      EXPECT_EQ(ncclAllGather(x.data(), x.data(), 2, ncclFloat32, comm, kStream), ncclInvalidArgument);
    }
    EXPECT_EQ(ncclAllReduce(nullptr, x.data(), 4, ncclFloat32, ncclSum, comm, kStream), ncclInvalidArgument);
    // A buffer the driver does not know is refused at the call, naming the argument.
    EXPECT_EQ(ncclAllGather(x.data(), reinterpret_cast<void*>(64), 2, ncclFloat32, comm, kStream),
              ncclInvalidArgument);
    EXPECT_NE(lastError().find("ncclAllGather recvbuff of 4 f32: not a device address"), std::string::npos)
        << lastError();
    EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 4, ncclFloat32, ncclSum, nullptr, kStream), ncclInvalidArgument);
    one.unlock();
    // Nothing was queued by the refused calls: a valid collective still pairs up.
    ASSERT_EQ(ncclAllReduce(x.data(), x.data(), 8, ncclFloat32, ncclSum, comm, kStream), ncclSuccess);
    EXPECT_EQ(x[7], 2.0f);
  });
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // without ncclGroupStart
}

TEST(StandinNcclApi, AnAbortedPeerIsAnAsynchronousRemoteError) {
  onRanks(2, [&](int r, ncclComm_t& comm) {
    std::vector<float> x(4, 1.0f);
    if (r == 1) {
      ncclCommAbort(comm);  // also frees it
      comm = nullptr;
      return;
    }
    ASSERT_EQ(ncclAllReduce(x.data(), x.data(), 4, ncclFloat32, ncclSum, comm, kStream), ncclSuccess);
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclRemoteError);
    EXPECT_NE(lastError().find("closed its connection"), std::string::npos) << lastError();
    EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 4, ncclFloat32, ncclSum, comm, kStream), ncclRemoteError);
  });
}

}  // namespace
