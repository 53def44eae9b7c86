// The runtime's NCCL backend (runtime/comm/NcclCommunicator.h) on the stand-in CUDA driver and
// NCCL, run by ctest as `mpirun -np N standin_nccl_communicator_test N` (N = 2, 3) with
// TESSEL_CUDA_LIBRARY_PATH set: every Communicator operation on device buffers, against
// closed forms, through the backend's own streams, events and watchdog (hostWait):
// - all_reduce sum/avg/max in f32, sum in i32 and bf16, for sizes 1, 7, 5N+1, 1000;
// - all_gather and reduce_scatter (sum, avg) of lengths the world size does not divide, which
//   run through the backend's padded scratch buffer (runtime/comm/NcclPlan.h) and its device
//   copies, and of lengths it divides;
// - all_to_all (grouped ncclSend/ncclRecv with every peer, oneself included), broadcast from
//   the last rank, send/recv around the ring, and a group communicator (subgroup: even and
//   odd ranks) with its own unique id;
// - a grouped sendRecv (ncclGroupStart, ncclSend / ncclRecv to both neighbours, ncclGroupEnd)
//   that would deadlock ungrouped;
// - a collective only rank 0 issues times out after the communicator's timeout with the
//   backend's message (the watchdog, then ncclCommAbort of the blocked collective).
// Values are small integers, exact in every type, so the sums are exact; avg over 3 ranks is
// within 2 ulps (NCCL premultiplies by the rounded 1/3, then sums).
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/cuda/CudaApi.h"
#include "test/mpi/RankMain.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::rt;

namespace {

const cuda::DriverApi* cu = nullptr;
CUstream compute = nullptr;

void ck(CUresult rc, const char* what) {
  if (rc != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cuda::errorText(*cu, rc));
}

/// A device buffer holding `host` (uploaded after the compute stream drained).
struct Device {
  CUdeviceptr p = 0;
  size_t bytes = 0;
  template <class T>
  explicit Device(const std::vector<T>& host) : bytes(std::max<size_t>(host.size() * sizeof(T), 1)) {
    ck(cu->cuMemAlloc(&p, bytes), "cuMemAlloc");
    ck(cu->cuStreamSynchronize(compute), "cuStreamSynchronize");
    if (!host.empty()) ck(cu->cuMemcpyHtoD(p, host.data(), host.size() * sizeof(T)), "cuMemcpyHtoD");
  }
  ~Device() { cu->cuMemFree(p); }
  void* ptr() const { return reinterpret_cast<void*>(p); }
  template <class T>
  std::vector<T> read(size_t n) const {
    std::vector<T> out(n);
    ck(cu->cuStreamSynchronize(compute), "cuStreamSynchronize");
    if (n) ck(cu->cuMemcpyDtoH(out.data(), p, n * sizeof(T)), "cuMemcpyDtoH");
    return out;
  }
};

uint16_t bf16(float f) {  // exact for the small integers used here
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// v(i): small integers in [-6, 6]; rank r contributes (r + 1) v(i).
double v(int64_t i) { return static_cast<double>(i % 13) - 6; }

void allReduces(Communicator& c) {
  const int N = c.worldSize(), R = c.rank();
  const double ranksSum = N * (N + 1) / 2.0;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{5} * N + 1, int64_t{1000}}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((R + 1) * v(i));
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      Device d(x);
      c.allReduce(d.ptr(), n, DType::F32, op, "x")->wait();
      std::vector<float> got = d.read<float>(n);
      for (int64_t i = 0; i < n; ++i) {
        const double want = op == ReduceOp::Sum ? ranksSum * v(i)
                            : op == ReduceOp::Avg ? ranksSum * v(i) / N
                                                  : (v(i) > 0 ? N * v(i) : v(i));
        // Avg: 2 ulps of |want| <= 6 N (see the file comment); the others exact.
        const double tol = op == ReduceOp::Avg ? 2 * 6.0 * N * std::ldexp(1.0, -23) : 0.0;
        CHECK(std::abs(got[i] - want) <= tol, "all_reduce f32 op %d n %lld [%lld]: %g, want %g", static_cast<int>(op),
              static_cast<long long>(n), static_cast<long long>(i), got[i], want);
      }
    }
    std::vector<int32_t> xi(n);
    std::vector<uint16_t> xb(n);
    for (int64_t i = 0; i < n; ++i) {
      xi[i] = static_cast<int32_t>((R + 1) * v(i));
      xb[i] = bf16(static_cast<float>((R + 1) * v(i)));
    }
    Device di(xi), db(xb);
    c.allReduce(di.ptr(), n, DType::I32, ReduceOp::Sum, "xi")->wait();
    c.allReduce(db.ptr(), n, DType::BF16, ReduceOp::Sum, "xb")->wait();
    std::vector<int32_t> gi = di.read<int32_t>(n);
    std::vector<uint16_t> gb = db.read<uint16_t>(n);
    for (int64_t i = 0; i < n; ++i) {
      CHECK(gi[i] == ranksSum * v(i), "all_reduce i32 n %lld [%lld]: %d", static_cast<long long>(n),
            static_cast<long long>(i), gi[i]);
      CHECK(fromBf16(gb[i]) == ranksSum * v(i), "all_reduce bf16 n %lld [%lld]: %g", static_cast<long long>(n),
            static_cast<long long>(i), fromBf16(gb[i]));
    }
  }
}

void shardedCollectives(Communicator& c) {
  const int N = c.worldSize(), R = c.rank();
  const double ranksSum = N * (N + 1) / 2.0;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{5} * N + 1, int64_t{4} * N, int64_t{1001}}) {
    auto [first, last] = shardRange(n, R, N);
    // all_gather: every rank's shard of x = 1..n gives x.
    std::vector<float> shard(last - first);
    for (int64_t i = first; i < last; ++i) shard[i - first] = static_cast<float>(i + 1);
    Device send(shard), recv(std::vector<float>(n, -1.0f));
    c.allGather(send.ptr(), recv.ptr(), n, DType::F32, "gather")->wait();
    std::vector<float> all = recv.read<float>(n);
    for (int64_t i = 0; i < n; ++i)
      CHECK(all[i] == i + 1, "all_gather n %lld [%lld]: %g", static_cast<long long>(n), static_cast<long long>(i),
            all[i]);
    // reduce_scatter: rank r sends (r + 1)(i + 1); this rank gets its shard of the sum / mean.
    std::vector<float> mine(n);
    for (int64_t i = 0; i < n; ++i) mine[i] = static_cast<float>((R + 1) * (i + 1));
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      Device in(mine), out(std::vector<float>(last - first, -1.0f));
      c.reduceScatter(in.ptr(), out.ptr(), n, DType::F32, op, "scatter")->wait();
      std::vector<float> got = out.read<float>(last - first);
      for (int64_t i = first; i < last; ++i) {
        const double want = ranksSum * (i + 1) / (op == ReduceOp::Avg ? N : 1);
        const double tol = op == ReduceOp::Avg ? 2 * ranksSum * (n + 1) * std::ldexp(1.0, -24) : 0.0;
        CHECK(std::abs(got[i - first] - want) <= tol, "reduce_scatter op %d n %lld [%lld]: %g, want %g",
              static_cast<int>(op), static_cast<long long>(n), static_cast<long long>(i), got[i - first], want);
      }
    }
  }
}

void pointToPoint(Communicator& c) {
  const int N = c.worldSize(), R = c.rank();
  // all_to_all: block p of rank r holds 100 r + 10 p + k; recv block p comes from rank p.
  const int64_t k = 3;
  std::vector<float> blocks(N * k);
  for (int p = 0; p < N; ++p)
    for (int64_t j = 0; j < k; ++j) blocks[p * k + j] = static_cast<float>(100 * R + 10 * p + j);
  Device send(blocks), recv(std::vector<float>(N * k, -1.0f));
  c.allToAll(send.ptr(), recv.ptr(), k, DType::F32, "a2a")->wait();
  std::vector<float> got = recv.read<float>(N * k);
  for (int p = 0; p < N; ++p)
    for (int64_t j = 0; j < k; ++j)
      CHECK(got[p * k + j] == 100 * p + 10 * R + j, "all_to_all block %d [%lld]: %g", p, static_cast<long long>(j),
            got[p * k + j]);
  // broadcast from the last rank.
  std::vector<int32_t> b(9);
  for (int i = 0; i < 9; ++i) b[i] = 1000 * R + i;
  Device db(b);
  c.broadcast(db.ptr(), 9, DType::I32, N - 1, "bcast")->wait();
  std::vector<int32_t> gb = db.read<int32_t>(9);
  for (int i = 0; i < 9; ++i) CHECK(gb[i] == 1000 * (N - 1) + i, "broadcast [%d]: %d", i, gb[i]);
  // send/recv around the ring; even ranks send first, odd ranks receive first (NCCL's
  // ungrouped send waits for its receive).
  const int next = (R + 1) % N, prev = (R + N - 1) % N;
  std::vector<float> out(5, static_cast<float>(R)), in(5, -1.0f);
  Device ds(out), dr(in);
  if (R % 2 == 0) {
    c.send(ds.ptr(), 5, DType::F32, next, "ring")->wait();
    c.recv(dr.ptr(), 5, DType::F32, prev, "ring")->wait();
  } else {
    c.recv(dr.ptr(), 5, DType::F32, prev, "ring")->wait();
    c.send(ds.ptr(), 5, DType::F32, next, "ring")->wait();
  }
  for (float x : dr.read<float>(5)) CHECK(x == prev, "recv from rank %d: %g", prev, x);
}

/// A collective that rank 0 issues alone: its wait() throws CommError naming the timeout
/// after about the 2 s given (the watchdog's deadline, then ncclCommAbort, which ends the
/// stand-in's blocked collective); nobody hangs, and the destructors return.
void timeout(MpiCommunicator& world) {
  auto comm = std::make_unique<NcclCommunicator>(world, NcclOptions{.timeoutSeconds = 2, .hostWait = true});
  comm->setComputeStream(compute);
  if (world.rank() == 0) {
    Device d(std::vector<float>(8, 1.0f));
    const auto start = std::chrono::steady_clock::now();
    std::string error;
    try {
      comm->allReduce(d.ptr(), 8, DType::F32, ReduceOp::Sum, "alone")->wait();
    } catch (const CommError& e) {
      error = e.what();
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(error.find("all_reduce 'alone'") != std::string::npos && error.find("timed out after 2 s") != std::string::npos,
          "the error names the collective and the timeout: '%s'", error.c_str());
    CHECK(waited >= 1.9 && waited < 30, "waited %.1f s for a 2 s timeout", waited);
  }
  world.allReduce(nullptr, 0, DType::F32, ReduceOp::Sum, "after the timeout")->wait();
  comm.reset();
}

/// Communicator::sendRecv (pipeline parallelism's send_recv step): in ONE group every rank
/// sends A to the next rank and B to the previous, and receives from both, all before waiting;
/// ungrouped, every rank's first ncclSend would wait for a receive its peer has not posted.
/// Received: from the previous rank its A, from the next its B (FIFO per channel, also when
/// next and previous are the same rank).
void groupedSendRecv(Communicator& c) {
  const int N = c.worldSize(), R = c.rank();
  const int next = (R + 1) % N, prev = (R + N - 1) % N;
  const int64_t n = 1000;
  auto values = [&](int rank, int which) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(10000 * rank + 5000 * which + i);
    return v;
  };
  Device a(values(R, 0)), b(values(R, 1)), x(std::vector<float>(n, -1.0f)), y(std::vector<float>(n, -1.0f));
  std::vector<P2pTransfer> transfers = {{true, a.ptr(), n, DType::F32, next, "A"},
                                        {true, b.ptr(), n, DType::F32, prev, "B"},
                                        {false, x.ptr(), n, DType::F32, prev, "X"},
                                        {false, y.ptr(), n, DType::F32, next, "Y"}};
  const CommStats before = c.stats();
  c.sendRecv(transfers, "grouped")->wait();
  const std::vector<float> gx = x.read<float>(n), gy = y.read<float>(n), wx = values(prev, 0), wy = values(next, 1);
  CHECK(gx == wx, "send_recv: the values from rank %d differ", prev);
  CHECK(gy == wy, "send_recv: the values from rank %d differ", next);
  const CommStats after = c.stats();
  CHECK(after.payloadBytes - before.payloadBytes == 2 * n * 4, "send_recv counted %lld payload bytes",
        static_cast<long long>(after.payloadBytes - before.payloadBytes));
}

void run(MpiCommunicator& world) {
  NcclCommunicator nccl(world, NcclOptions{.timeoutSeconds = 60, .hostWait = true});
  cu = &cuda::driverApi();
  ck(cu->cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  nccl.setComputeStream(compute);
  allReduces(nccl);
  shardedCollectives(nccl);
  pointToPoint(nccl);
  groupedSendRecv(nccl);
  // Even and odd ranks: each group forms its own NCCL communicator.
  std::vector<int> group;
  for (int r = world.rank() % 2; r < world.worldSize(); r += 2) group.push_back(r);
  std::unique_ptr<Communicator> half = nccl.subgroup(group, "parity");
  allReduces(*half);
  shardedCollectives(*half);
  half.reset();
  if (world.worldSize() > 1) timeout(world);
  ck(cu->cuStreamSynchronize(compute), "cuStreamSynchronize");
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
  return test::rankMain("standin_nccl_communicator_test", ranks, run);
}
