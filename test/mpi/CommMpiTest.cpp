// Multi-rank test of MpiCommunicator, run by ctest as `mpirun -np N comm_mpi_test` for N in
// 1..4. Every collective, every dtype, sizes 0, 1, 7, 1000, 1001 and 5N+1, Sum, Avg and Max, checked
// against closed forms; bitwise identity across ranks; the payload counters; overlap of a
// collective with compute on the calling thread. Exit status 0 only if every rank passed
// (the failure counts are summed over the ranks at the end).
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/World.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace tessel::rt;

namespace {

int failures = 0;
int R = 0, N = 1;
CommStats expected;

#define CHECK(cond, ...)                                           \
  do {                                                             \
    if (!(cond)) {                                                 \
      ++failures;                                                  \
      if (failures < 20) {                                         \
        std::fprintf(stderr, "rank %d: FAILED %s: ", R, #cond);    \
        std::fprintf(stderr, __VA_ARGS__);                         \
        std::fprintf(stderr, "\n");                                \
      }                                                            \
    }                                                              \
  } while (0)

const char* name(DType d) { return d == DType::F32 ? "f32" : d == DType::I32 ? "i32" : "bf16"; }

/// Test-side bf16 helpers, independent of runtime/comm/Reduce.h: an exactly representable
/// value is the upper half of its f32; the nearest bf16 of a double is found by comparing the
/// two neighbours (ties to the even bit pattern).
uint16_t exactBf16(double v) {
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0xffffu) != 0 || static_cast<double>(f) != v) {
    std::fprintf(stderr, "test bug: %g is not a bf16 value\n", v);
    std::abort();
  }
  return static_cast<uint16_t>(u >> 16);
}
double bf16Value(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t nearestBf16(double v) {  // positive finite v
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t lo = static_cast<uint16_t>(u >> 16), hi = static_cast<uint16_t>(lo + 1);
  while (bf16Value(lo) > v) { hi = lo; --lo; }
  while (bf16Value(hi) < v) { lo = hi; ++hi; }
  double dl = v - bf16Value(lo), dh = bf16Value(hi) - v;
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

/// A typed buffer of n elements.
struct Buf {
  DType dtype;
  std::vector<unsigned char> bytes;
  Buf(DType d, int64_t n) : dtype(d), bytes(static_cast<size_t>(n * dtypeBytes(d)) + 1, 0xAB) {}
  void* data() { return bytes.data(); }
  void set(int64_t i, double v) {  // v exact in the dtype
    if (dtype == DType::F32) { float f = static_cast<float>(v); std::memcpy(&bytes[i * 4], &f, 4); }
    else if (dtype == DType::I32) { int32_t x = static_cast<int32_t>(v); std::memcpy(&bytes[i * 4], &x, 4); }
    else { uint16_t h = exactBf16(v); std::memcpy(&bytes[i * 2], &h, 2); }
  }
  uint32_t bits(int64_t i) const {
    uint32_t u = 0;
    std::memcpy(&u, &bytes[i * dtypeBytes(dtype)], static_cast<size_t>(dtypeBytes(dtype)));
    return u;
  }
};

/// Expected bits of an element whose exact value is v (rounded like the backend promises).
uint32_t expectBits(DType d, double v, ReduceOp op, int64_t intSum = 0) {
  if (d == DType::F32) {
    // f32 sums of these small multiples of 1/4 are exact; Avg is one f32 division.
    float f = op == ReduceOp::Avg ? static_cast<float>(v) / static_cast<float>(N) : static_cast<float>(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  }
  if (d == DType::I32) {
    int64_t r = op == ReduceOp::Avg ? intSum / N : intSum;
    return static_cast<uint32_t>(static_cast<uint64_t>(r));
  }
  // bf16: the exact sum (or mean) rounded once. For N = 3 the mean's f32 intermediate cannot
  // land on a bf16 tie (k/3 has a repeating binary expansion), so double rounding is moot.
  return op == ReduceOp::Avg ? nearestBf16(v / N) : nearestBf16(v);
}

/// Rank r's contribution to reductions and its exact sum over the ranks.
double f(DType d, int r, int64_t i) {
  if (d == DType::I32) return (i % 13 == 0) ? 2147483647.0 - r : (r + 1) * (i % 7) - 3.0 * r;
  if (d == DType::F32) return (r + 1) * ((i % 5) + 1) * 0.25;  // exact sums
  // bf16: integers below 256 (exact), whose sums lie in [303, 700) where bf16 steps by 2 or 4:
  // about half of the sums and means must be rounded (to nearest even).
  return 150 + 3 * r + (i % 11) * (r + 1);
}
double sumF(DType d, int64_t i) {
  double s = 0;
  for (int r = 0; r < N; ++r) s += f(d, r, i);
  return s;
}
/// A per-element value exact in every dtype (all_gather, broadcast, send).
double h(DType d, int64_t i) { return d == DType::I32 ? i * 7.0 - 5 : (i % 200) * (d == DType::F32 ? 0.5 : 1.0); }

void testReductions(MpiCommunicator& comm, DType d, int64_t n, ReduceOp op) {
  const char* opName = op == ReduceOp::Sum ? "sum" : "avg";
  // all_reduce
  Buf buf(d, n);
  for (int64_t i = 0; i < n; ++i) buf.set(i, f(d, R, i));
  comm.allReduce(buf.data(), n, d, op, "ar")->wait();
  ++expected.collectives;
  expected.payloadBytes += n * dtypeBytes(d);
  for (int64_t i = 0; i < n; ++i) {
    int64_t is = 0;
    for (int r = 0; r < N; ++r) is += static_cast<int64_t>(f(d, r, i));
    CHECK(buf.bits(i) == expectBits(d, sumF(d, i), op, is), "all_reduce %s %s n=%lld i=%lld",
          name(d), opName, (long long)n, (long long)i);
  }
  CHECK(buf.bytes.back() == 0xAB, "all_reduce wrote past the end (%s n=%lld)", name(d), (long long)n);
  // reduce_scatter
  Buf send(d, n);
  for (int64_t i = 0; i < n; ++i) send.set(i, f(d, R, i));
  auto [lo, hi] = shardRange(n, R, N);
  Buf recv(d, hi - lo);
  comm.reduceScatter(send.data(), recv.data(), n, d, op, "rs")->wait();
  ++expected.collectives;
  expected.payloadBytes += n * dtypeBytes(d);
  for (int64_t i = lo; i < hi; ++i) {
    int64_t is = 0;
    for (int r = 0; r < N; ++r) is += static_cast<int64_t>(f(d, r, i));
    CHECK(recv.bits(i - lo) == expectBits(d, sumF(d, i), op, is), "reduce_scatter %s %s n=%lld i=%lld",
          name(d), opName, (long long)n, (long long)i);
  }
  CHECK(recv.bytes.back() == 0xAB, "reduce_scatter wrote past its shard");
}

/// Max: all_reduce and reduce_scatter against the maximum of f over the ranks, taken here in
/// double (every f is exact in its dtype, so the max is too and must match bit for bit).
void testMax(MpiCommunicator& comm, DType d, int64_t n) {
  auto maxF = [&](int64_t i) {
    double m = f(d, 0, i);
    for (int r = 1; r < N; ++r) m = std::max(m, f(d, r, i));
    return m;
  };
  Buf buf(d, n), send(d, n), want(d, n);
  for (int64_t i = 0; i < n; ++i) {
    buf.set(i, f(d, R, i));
    send.set(i, f(d, R, i));
    want.set(i, maxF(i));
  }
  comm.allReduce(buf.data(), n, d, ReduceOp::Max, "ar_max")->wait();
  for (int64_t i = 0; i < n; ++i)
    CHECK(buf.bits(i) == want.bits(i), "all_reduce %s max n=%lld i=%lld", name(d), (long long)n, (long long)i);
  auto [lo, hi] = shardRange(n, R, N);
  Buf recv(d, hi - lo);
  comm.reduceScatter(send.data(), recv.data(), n, d, ReduceOp::Max, "rs_max")->wait();
  for (int64_t i = lo; i < hi; ++i)
    CHECK(recv.bits(i - lo) == want.bits(i), "reduce_scatter %s max n=%lld i=%lld", name(d),
          (long long)n, (long long)i);
  CHECK(recv.bytes.back() == 0xAB, "reduce_scatter max wrote past its shard");
  expected.collectives += 2;
  expected.payloadBytes += 2 * n * dtypeBytes(d);
}

/// A NaN on the last rank only makes the f32 max NaN on every rank (torch.max propagates NaN),
/// whichever position the NaN takes in the ring's order.
void testMaxNaN(MpiCommunicator& comm) {
  std::vector<float> x(static_cast<size_t>(N) + 1);
  for (size_t i = 0; i < x.size(); ++i) x[i] = R == N - 1 ? std::nanf("") : static_cast<float>(R);
  comm.allReduce(x.data(), static_cast<int64_t>(x.size()), DType::F32, ReduceOp::Max, "nan_max")->wait();
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::isnan(x[i]), "max of a NaN, element %zu is %g", i, x[i]);
  expected.collectives += 1;
  expected.payloadBytes += static_cast<int64_t>(x.size()) * 4;
}

void testMovement(MpiCommunicator& comm, DType d, int64_t n) {
  // all_gather: rank r holds the values h(i) of its shard.
  auto [lo, hi] = shardRange(n, R, N);
  Buf shard(d, hi - lo), all(d, n), ref(d, n);
  for (int64_t i = lo; i < hi; ++i) shard.set(i - lo, h(d, i));
  for (int64_t i = 0; i < n; ++i) ref.set(i, h(d, i));
  comm.allGather(shard.data(), all.data(), n, d, "ag")->wait();
  for (int64_t i = 0; i < n; ++i)
    CHECK(all.bits(i) == ref.bits(i), "all_gather %s n=%lld i=%lld", name(d), (long long)n, (long long)i);
  // broadcast from root n % N; the others start from a different value.
  int root = static_cast<int>(n % N);
  Buf b(d, n);
  for (int64_t i = 0; i < n; ++i) b.set(i, R == root ? h(d, i) : 3.0);
  comm.broadcast(b.data(), n, d, root, "bc")->wait();
  for (int64_t i = 0; i < n; ++i)
    CHECK(b.bits(i) == ref.bits(i), "broadcast %s n=%lld root=%d i=%lld", name(d), (long long)n, root, (long long)i);
  // all_to_all: block j of rank r holds code(r, j, e); rank r receives code(j, r, e) in block j.
  auto code = [](int from, int to, int64_t e) { return from * 64.0 + to * 16.0 + static_cast<double>(e % 16); };
  Buf s(d, n * N), t(d, n * N);
  for (int j = 0; j < N; ++j)
    for (int64_t e = 0; e < n; ++e) s.set(j * n + e, code(R, j, e));
  comm.allToAll(s.data(), t.data(), n, d, "a2a")->wait();
  Buf want(d, n * N);
  for (int j = 0; j < N; ++j)
    for (int64_t e = 0; e < n; ++e) want.set(j * n + e, code(j, R, e));
  for (int64_t i = 0; i < n * N; ++i)
    CHECK(t.bits(i) == want.bits(i), "all_to_all %s n=%lld i=%lld", name(d), (long long)n, (long long)i);
  expected.collectives += 3;
  expected.payloadBytes += (n + n + n * N) * dtypeBytes(d);
  // send/recv around the ring, two messages per pair (matched in issue order).
  if (N > 1) {
    int next = (R + 1) % N, prev = (R + N - 1) % N;
    Buf m1(d, n), m2(d, n), r1(d, n), r2(d, n);
    for (int64_t i = 0; i < n; ++i) { m1.set(i, code(R, 1, i)); m2.set(i, code(R, 2, i)); }
    auto w1 = comm.send(m1.data(), n, d, next, "s1");
    auto w2 = comm.send(m2.data(), n, d, next, "s2");
    auto w3 = comm.recv(r1.data(), n, d, prev, "r1");
    auto w4 = comm.recv(r2.data(), n, d, prev, "r2");
    w1->wait(); w2->wait(); w3->wait(); w4->wait();
    Buf e1(d, n), e2(d, n);
    for (int64_t i = 0; i < n; ++i) { e1.set(i, code(prev, 1, i)); e2.set(i, code(prev, 2, i)); }
    for (int64_t i = 0; i < n; ++i) {
      CHECK(r1.bits(i) == e1.bits(i), "recv 1 %s n=%lld i=%lld", name(d), (long long)n, (long long)i);
      CHECK(r2.bits(i) == e2.bits(i), "recv 2 %s n=%lld i=%lld", name(d), (long long)n, (long long)i);
    }
    expected.collectives += 4;
    expected.payloadBytes += 2 * n * dtypeBytes(d);  // recv counts 0 bytes
  }
}

/// bf16 sums accumulate in f32 and round once: 256 + 1 + ... + 1 keeps every 1.
void testBf16Accumulation(MpiCommunicator& comm) {
  Buf b(DType::BF16, 3);
  for (int64_t i = 0; i < 3; ++i) b.set(i, R == 0 ? 256.0 : 1.0);
  comm.allReduce(b.data(), 3, DType::BF16, ReduceOp::Sum, "bf16acc")->wait();
  ++expected.collectives;
  expected.payloadBytes += 6;
  for (int64_t i = 0; i < 3; ++i)
    CHECK(b.bits(i) == nearestBf16(256.0 + (N - 1)), "bf16 accumulation: got %g, want %g",
          bf16Value(static_cast<uint16_t>(b.bits(i))), bf16Value(nearestBf16(256.0 + (N - 1))));
}

/// Inexact f32 sums: every rank must hold the same bits (all-gather a hash of them), and the
/// sum must be within the recursive-summation bound (N-1) u sum|x| (Higham, Accuracy and
/// Stability, eq. 4.4; u = 2^-24) of the double sum.
void testBitwiseIdentity(MpiCommunicator& comm) {
  const int64_t n = 100003;
  std::vector<float> x(n);
  std::mt19937 rng(1234 + R);
  for (auto& v : x) v = static_cast<float>(rng()) / 4294967296.0f - 0.3f;
  std::vector<float> y = x;
  comm.allReduce(y.data(), n, DType::F32, ReduceOp::Sum, "identity")->wait();
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the result bytes
  for (unsigned char c : std::vector<unsigned char>(reinterpret_cast<unsigned char*>(y.data()),
                                                    reinterpret_cast<unsigned char*>(y.data() + n)))
    hash = (hash ^ c) * 1099511628211ull;
  int32_t mine[2] = {static_cast<int32_t>(hash & 0xffffffffu), static_cast<int32_t>(hash >> 32)};
  std::vector<int32_t> all(2 * N);
  comm.allGather(mine, all.data(), 2 * N, DType::I32, "hashes")->wait();
  for (int r = 0; r < N; ++r)
    CHECK(all[2 * r] == mine[0] && all[2 * r + 1] == mine[1], "rank %d's all_reduce bits differ from rank %d's", r, R);
  // Every rank's x is reproducible here, so the exact (double) sum is known locally.
  std::vector<double> exact(n, 0.0), absSum(n, 0.0);
  for (int r = 0; r < N; ++r) {
    std::mt19937 g(1234 + r);
    for (int64_t i = 0; i < n; ++i) {
      float v = static_cast<float>(g()) / 4294967296.0f - 0.3f;
      exact[i] += v;
      absSum[i] += std::fabs(v);
    }
  }
  for (int64_t i = 0; i < n; ++i)
    CHECK(std::fabs(y[i] - exact[i]) <= (N - 1) * std::ldexp(1.0, -24) * absSum[i] * 1.0001,
          "inexact sum %lld off by %g", (long long)i, std::fabs(y[i] - exact[i]));
  expected.collectives += 2;
  expected.payloadBytes += n * 4 + 2 * N * 4;
}

/// A collective completes while this thread computes and never calls into the communicator
/// except test(); wait() then returns at once.
void testOverlap(MpiCommunicator& comm) {
  const int64_t n = 1 << 20;
  std::vector<float> x(n, static_cast<float>(R + 1));
  auto work = comm.allReduce(x.data(), n, DType::F32, ReduceOp::Sum, "overlap");
  double acc = 0;
  int64_t iterations = 0;
  // Guard against a progress thread that never progresses: give up after 2^24 rounds of 1024
  // square roots (tens of seconds), far beyond the milliseconds the exchange takes.
  while (!work->test() && iterations < (int64_t{1} << 24)) {
    for (int k = 0; k < 1024; ++k) acc += std::sqrt(static_cast<double>(k + iterations));
    ++iterations;
  }
  CHECK(work->test(), "the collective did not complete while the caller computed");
  work->wait();
  work->wait();  // a second wait is a no-op
  float want = static_cast<float>(N * (N + 1) / 2);
  bool ok = true;
  for (float v : x) ok &= v == want;
  CHECK(ok, "overlapped all_reduce result (acc %g)", acc);
  expected.collectives += 1;
  expected.payloadBytes += n * 4;
}

}  // namespace

int main() {
  WorldInfo env = detectWorld();
  MpiCommunicator comm(MpiOptions{60.0, true});
  R = comm.rank();
  N = comm.worldSize();
  CHECK(env.launched() && env.size == N && env.rank == R, "detectWorld: %s rank %d of %d, MPI: %d of %d",
        env.launcher.c_str(), env.rank, env.size, R, N);
  CHECK(comm.localRank() >= 0 && comm.localRank() < comm.localSize(), "local rank %d of %d",
        comm.localRank(), comm.localSize());
  for (DType d : {DType::F32, DType::I32, DType::BF16}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{1001}, int64_t{5 * N + 1}}) {
      comm.setStep(n);
      testReductions(comm, d, n, ReduceOp::Sum);
      testReductions(comm, d, n, ReduceOp::Avg);
      testMax(comm, d, n);
      testMovement(comm, d, n);
    }
  }
  testBf16Accumulation(comm);
  testMaxNaN(comm);
  testBitwiseIdentity(comm);
  testOverlap(comm);
  CommStats s = comm.stats();
  CHECK(s.collectives == expected.collectives && s.payloadBytes == expected.payloadBytes,
        "stats: %lld collectives, %lld bytes; expected %lld, %lld", (long long)s.collectives,
        (long long)s.payloadBytes, (long long)expected.collectives, (long long)expected.payloadBytes);
  int32_t total = failures;
  comm.allReduce(&total, 1, DType::I32, ReduceOp::Sum, "failures")->wait();
  if (R == 0) std::printf("comm_mpi_test: %d ranks, %d failures\n", N, total);
  return total == 0 ? 0 : 1;
}
