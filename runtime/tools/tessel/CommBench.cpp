// One verified, timed collective; see CommBench.h.
#include "runtime/tools/tessel/CommBench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace tessel::cli {
namespace {

constexpr int64_t kElementBytes = 4;  // f32

class HostMemory final : public BenchMemory {
public:
  ~HostMemory() override { release(); }
  void* allocate(int64_t bytes) override {
    void* p = std::malloc(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    if (!p) throw std::bad_alloc();
    buffers_.push_back(p);
    return p;
  }
  void release() override {
    for (void* p : buffers_) std::free(p);
    buffers_.clear();
  }
  void upload(void* device, const void* host, int64_t bytes) override {
    std::memcpy(device, host, static_cast<size_t>(bytes));
  }
  void download(void* host, const void* device, int64_t bytes) override {
    std::memcpy(host, device, static_cast<size_t>(bytes));
  }
  void zero(void* device, int64_t bytes) override { std::memset(device, 0, static_cast<size_t>(bytes)); }

private:
  std::vector<void*> buffers_;
};

/// The buffers of one measurement and how to run the op on them once.
struct Buffers {
  void* a = nullptr;  // data (in place), or send
  void* b = nullptr;  // recv
  int64_t aCount = 0, bCount = 0;
};

std::vector<float> fill(int rank, int64_t first, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = benchValue(rank, first + i);
  return v;
}

/// Issues `op` once on `buf` and waits for it.
void runOnce(rt::Communicator& comm, CommOp op, const CommSize& size, const Buffers& buf) {
  const int rank = comm.rank(), world = comm.worldSize();
  const std::string name = fmt::format("bench {} {} B", commOpName(op), size.bytes);
  switch (op) {
    case CommOp::AllReduce:
      comm.allReduce(buf.a, size.count, rt::DType::F32, rt::ReduceOp::Sum, name)->wait();
      return;
    case CommOp::AllGather: comm.allGather(buf.a, buf.b, size.count, rt::DType::F32, name)->wait(); return;
    case CommOp::ReduceScatter:
      comm.reduceScatter(buf.a, buf.b, size.count, rt::DType::F32, rt::ReduceOp::Sum, name)->wait();
      return;
    case CommOp::AllToAll: comm.allToAll(buf.a, buf.b, size.count / world, rt::DType::F32, name)->wait(); return;
    case CommOp::Broadcast: comm.broadcast(buf.a, size.count, rt::DType::F32, 0, name)->wait(); return;
    case CommOp::SendRecv: {
      // Odd ranks receive first: a ring where every rank sent first could wait on itself
      // when sends complete only once matched.
      const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
      if (rank % 2 == 0) {
        comm.send(buf.a, size.count, rt::DType::F32, next, name)->wait();
        comm.recv(buf.b, size.count, rt::DType::F32, prev, name)->wait();
      } else {
        comm.recv(buf.b, size.count, rt::DType::F32, prev, name)->wait();
        comm.send(buf.a, size.count, rt::DType::F32, next, name)->wait();
      }
      return;
    }
  }
}

/// The expected output element `i` of rank `rank` (see CommBench.h's data definition).
float expected(CommOp op, const CommSize& size, int rank, int world, int64_t i) {
  auto sumOver = [&](int64_t j) {
    float s = 0;
    for (int r = 0; r < world; ++r) s += benchValue(r, j);
    return s;
  };
  switch (op) {
    case CommOp::AllReduce: return sumOver(i);
    case CommOp::AllGather: {
      int owner = 0;  // the rank whose shard holds element i
      while (rt::shardRange(size.count, owner, world).second <= i) ++owner;
      return benchValue(owner, i);
    }
    case CommOp::ReduceScatter: return sumOver(rt::shardRange(size.count, rank, world).first + i);
    case CommOp::AllToAll: {
      const int64_t block = size.count / world;
      return benchValue(static_cast<int>(i / block), rank * block + i % block);
    }
    case CommOp::Broadcast: return benchValue(0, i);
    case CommOp::SendRecv: return benchValue((rank + world - 1) % world, i);
  }
  return 0;
}

}  // namespace

const std::vector<CommOp>& allCommOps() {
  static const std::vector<CommOp> ops = {CommOp::AllReduce, CommOp::AllGather, CommOp::ReduceScatter,
                                          CommOp::AllToAll,  CommOp::Broadcast, CommOp::SendRecv};
  return ops;
}

const char* commOpName(CommOp op) {
  switch (op) {
    case CommOp::AllReduce: return "all_reduce";
    case CommOp::AllGather: return "all_gather";
    case CommOp::ReduceScatter: return "reduce_scatter";
    case CommOp::AllToAll: return "all_to_all";
    case CommOp::Broadcast: return "broadcast";
    case CommOp::SendRecv: return "send_recv";
  }
  return "?";
}

std::optional<CommOp> parseCommOp(const std::string& name) {
  for (CommOp op : allCommOps())
    if (name == commOpName(op)) return op;
  if (name == "sendrecv" || name == "send/recv") return CommOp::SendRecv;
  return std::nullopt;
}

double busBandwidthFactor(CommOp op, int world) {
  const double n = world;
  switch (op) {
    case CommOp::AllReduce: return 2 * (n - 1) / n;
    case CommOp::AllGather:
    case CommOp::ReduceScatter:
    case CommOp::AllToAll: return (n - 1) / n;
    case CommOp::Broadcast:
    case CommOp::SendRecv: return 1;
  }
  return 0;
}

CommSize commSize(CommOp op, int64_t bytes, int world) {
  int64_t count = std::max<int64_t>(bytes / kElementBytes, 1);
  if (op == CommOp::AllToAll) count = std::max<int64_t>(count / world, 1) * world;
  return {count, count * kElementBytes};
}

std::vector<int64_t> sweepSizes(int64_t minBytes, int64_t maxBytes, int64_t stepBytes) {
  if (minBytes > maxBytes)
    throw std::invalid_argument(fmt::format("--min-bytes {} is larger than --max-bytes {}", minBytes, maxBytes));
  std::vector<int64_t> sizes;
  for (int64_t s = minBytes; s < maxBytes;) {
    sizes.push_back(s);
    // Stop before an addition past maxBytes could overflow.
    int64_t step = stepBytes > 0 ? stepBytes : s;
    if (s > maxBytes - step) break;
    s += step;
  }
  sizes.push_back(maxBytes);
  return sizes;
}

std::unique_ptr<BenchMemory> hostMemory() { return std::make_unique<HostMemory>(); }

float benchValue(int rank, int64_t i) {
  // A small integer that depends on both rank and element, so a block from the wrong rank or
  // at the wrong offset shows up.
  return static_cast<float>((i * 3 + static_cast<int64_t>(rank) * 5) % 17 - 8);
}

int64_t bytesNeeded(CommOp op, int64_t bytes, int world) {
  const CommSize size = commSize(op, bytes, world);
  const int64_t shard = (size.count + world - 1) / world * kElementBytes;  // the largest shard
  // The operation's buffers (a: data or send, b: recv), then the host copies the check uses:
  // the input (as a) and the output (as b, or a for an in-place op).
  int64_t a = size.bytes, b = 0;
  switch (op) {
    case CommOp::AllReduce:
    case CommOp::Broadcast: break;
    case CommOp::AllGather: a = shard, b = size.bytes; break;
    case CommOp::ReduceScatter: b = shard; break;
    case CommOp::AllToAll:
    case CommOp::SendRecv: b = size.bytes; break;
  }
  return a + b + a + (b ? b : a);
}

BenchResult measure(rt::Communicator& comm, rt::Communicator& control, BenchMemory& memory, CommOp op,
                    int64_t bytes, const BenchOptions& options) {
  const int rank = comm.rank(), world = comm.worldSize();
  if (op == CommOp::SendRecv && world < 2)
    throw std::invalid_argument("send_recv needs at least 2 ranks (each rank sends to the next)");
  const CommSize size = commSize(op, bytes, world);
  const auto [first, last] = rt::shardRange(size.count, rank, world);
  Buffers buf;
  switch (op) {
    case CommOp::AllReduce:
    case CommOp::Broadcast: buf.aCount = size.count; break;
    case CommOp::AllGather: buf.aCount = last - first, buf.bCount = size.count; break;
    case CommOp::ReduceScatter: buf.aCount = size.count, buf.bCount = last - first; break;
    case CommOp::AllToAll:
    case CommOp::SendRecv: buf.aCount = buf.bCount = size.count; break;
  }
  buf.a = memory.allocate(buf.aCount * kElementBytes);
  if (buf.bCount > 0 || op == CommOp::ReduceScatter) buf.b = memory.allocate(std::max<int64_t>(buf.bCount, 1) * kElementBytes);
  // Inputs; outputs start as NaN, so an element the op never wrote cannot pass.
  std::vector<float> in = op == CommOp::AllGather ? fill(rank, first, buf.aCount) : fill(rank, 0, buf.aCount);
  if (op == CommOp::Broadcast && rank != 0) std::fill(in.begin(), in.end(), std::numeric_limits<float>::quiet_NaN());
  memory.upload(buf.a, in.data(), buf.aCount * kElementBytes);
  std::vector<float> out(static_cast<size_t>(buf.b ? buf.bCount : buf.aCount),
                         std::numeric_limits<float>::quiet_NaN());
  if (buf.b) memory.upload(buf.b, out.data(), buf.bCount * kElementBytes);

  BenchResult result;
  result.op = op;
  result.bytes = size.bytes;
  result.count = size.count;
  runOnce(comm, op, size, buf);
  memory.download(out.data(), buf.b ? buf.b : buf.a, static_cast<int64_t>(out.size()) * kElementBytes);
  int wrong = 0;
  for (size_t i = 0; i < out.size() && !wrong; ++i) {
    const float want = expected(op, size, rank, world, static_cast<int64_t>(i));
    if (!(out[i] == want)) {  // exact: every value and sum is a small integer (CommBench.h)
      wrong = 1;
      result.firstError = fmt::format("rank {}: {} of {} B: element {} is {} but the reference is {}", rank,
                                      commOpName(op), size.bytes, i, out[i], want);
    }
  }

  // Timing on zeroed buffers: sums stay 0 (no overflow, no denormals).
  memory.zero(buf.a, buf.aCount * kElementBytes);
  if (buf.b) memory.zero(buf.b, buf.bCount * kElementBytes);
  for (int64_t i = 0; i < options.warmup; ++i) runOnce(comm, op, size, buf);
  float sync = 0;
  control.allReduce(&sync, 1, rt::DType::F32, rt::ReduceOp::Sum, "bench sync")->wait();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < options.iters; ++i) runOnce(comm, op, size, buf);
  const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                      static_cast<double>(options.iters);
  memory.release();

  // The slowest rank's time, and how many ranks saw a wrong result (host values: `control`).
  float stats[2] = {static_cast<float>(mine), static_cast<float>(wrong)};
  control.allReduce(&stats[0], 1, rt::DType::F32, rt::ReduceOp::Max, "bench time")->wait();
  control.allReduce(&stats[1], 1, rt::DType::F32, rt::ReduceOp::Sum, "bench check")->wait();
  result.seconds = stats[0];
  result.wrongRanks = static_cast<int>(stats[1]);
  result.algbw = result.seconds > 0 ? static_cast<double>(size.bytes) / result.seconds / 1e9 : 0;
  result.busbw = result.algbw * busBandwidthFactor(op, world);
  return result;
}

}  // namespace tessel::cli
