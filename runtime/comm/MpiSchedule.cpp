// Schedules of the MPI collectives (see MpiOp.h and MpiCommunicator.h).
//
// Ring reduce-scatter over N ranks, chunk c = shardRange(n, c, N), all indices mod N:
//   step s = 0 .. N-2: rank r sends its partial sum of chunk r-s-1 to rank r+1 and receives
//   chunk r-s-2 from rank r-1, which it adds its own contribution to.
// After N-1 rounds rank r holds chunk r summed in the order x[r+1] + x[r+2] + ... + x[r].
// Ring all-gather: step s = 0 .. N-2: rank r sends chunk r-s to rank r+1 and receives chunk
// r-s-1 from rank r-1.
#include "runtime/comm/MpiOp.h"

#include "runtime/comm/Reduce.h"
#include "runtime/numeric/Fnv1a.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace tessel::rt::comm {
namespace {

int mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

std::byte* at(void* base, int64_t elements, int64_t elementBytes) {
  return static_cast<std::byte*>(base) + elements * elementBytes;
}

std::byte* allocate(Op& op, int64_t bytes) {
  op.scratch.push_back(std::make_unique_for_overwrite<std::byte[]>(
      static_cast<size_t>(std::max<int64_t>(bytes, 1))));
  return op.scratch.back().get();
}

/// The reduce-scatter ring over an accumulator `acc` of n elements; rank r ends holding the
/// complete sum of its own chunk.
void ringReduceScatter(Op& op, int r, int N, std::byte* acc, int64_t n) {
  if (N == 1) return;
  const int64_t ab = accumulatorBytes(op.dtype);
  std::byte* tmp = allocate(op, (n / N + 1) * ab);
  for (int s = 0; s + 1 < N; ++s) {
    auto [sendFirst, sendLast] = shardRange(n, mod(r - s - 1, N), N);
    auto [recvFirst, recvLast] = shardRange(n, mod(r - s - 2, N), N);
    Round step;
    step.transfers.push_back({at(acc, sendFirst, ab), (sendLast - sendFirst) * ab, (r + 1) % N, true});
    step.transfers.push_back({tmp, (recvLast - recvFirst) * ab, (r + N - 1) % N, false});
    DType dtype = op.dtype;
    ReduceOp reduce = op.reduce;
    step.after = [=] { accumulate(dtype, reduce, at(acc, recvFirst, ab), tmp, recvLast - recvFirst); };
    op.rounds.push_back(std::move(step));
  }
}

/// The all-gather ring over `buf` (n elements of `elementBytes`); rank r's chunk is in place.
void ringAllGather(Op& op, int r, int N, void* buf, int64_t n, int64_t eb) {
  for (int s = 0; s + 1 < N; ++s) {
    auto [sendFirst, sendLast] = shardRange(n, mod(r - s, N), N);
    auto [recvFirst, recvLast] = shardRange(n, mod(r - s - 1, N), N);
    Round step;
    step.transfers.push_back({at(buf, sendFirst, eb), (sendLast - sendFirst) * eb, (r + 1) % N, true});
    step.transfers.push_back({at(buf, recvFirst, eb), (recvLast - recvFirst) * eb, (r + N - 1) % N, false});
    op.rounds.push_back(std::move(step));
  }
}

Round action(std::function<void()> f) {
  Round s;
  s.after = std::move(f);
  return s;
}

}  // namespace

const char* opKindName(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce: return "all_reduce";
    case OpKind::AllGather: return "all_gather";
    case OpKind::ReduceScatter: return "reduce_scatter";
    case OpKind::AllToAll: return "all_to_all";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Barrier: return "barrier";
    case OpKind::Send: return "send";
    case OpKind::Recv: return "recv";
  }
  return "?";
}

void Op::finish(const std::string& err) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (finished) return;
    finished = true;
    error = err;
  }
  cv.notify_all();
}

uint64_t groupKey(const std::vector<int>& members) {
  return numeric::fnv1a(numeric::kFnv1aOffsetBasis, members.data(), members.size() * sizeof(int));
}

std::string describe(const Op& op) {
  std::string group =
      op.group && !op.group->label.empty() ? fmt::format(" of group {}", op.group->label) : "";
  if (op.kind == OpKind::Send || op.kind == OpKind::Recv)
    return fmt::format("{} '{}' ({} rank {}{}, {} bytes, step {})", opKindName(op.kind), op.name,
                       op.kind == OpKind::Send ? "to" : "from", op.root, group, op.bytes, op.step);
  return fmt::format("{} '{}' (collective #{}{}, {} bytes, step {})", opKindName(op.kind), op.name,
                     op.seq, group, op.bytes, op.step);
}

void buildGroupSchedule(Op& op, void* data, const void* send, void* recv) {
  const Group& g = *op.group;
  buildSchedule(op, g.groupRank, g.size(), data, send, recv);
  for (Round& round : op.rounds)
    for (Transfer& t : round.transfers) t.peer = g.members[static_cast<size_t>(t.peer)];
  if (op.isPointToPoint()) op.root = g.members[static_cast<size_t>(op.root)];
}

void buildSchedule(Op& op, int r, int N, void* data, const void* send, void* recv) {
  const int64_t eb = dtypeBytes(op.dtype), ab = accumulatorBytes(op.dtype);
  const int64_t n = op.count;
  const DType dtype = op.dtype;
  const ReduceOp reduce = op.reduce;
  auto [ownFirst, ownLast] = shardRange(n, r, N);
  switch (op.kind) {
    case OpKind::AllReduce: {
      std::byte* acc = allocate(op, n * ab);
      op.rounds.push_back(action([=] { widen(dtype, data, acc, n); }));
      ringReduceScatter(op, r, N, acc, n);
      op.rounds.push_back(action([=] {
        narrow(dtype, reduce, N, at(acc, ownFirst, ab), at(data, ownFirst, eb), ownLast - ownFirst);
      }));
      ringAllGather(op, r, N, data, n, eb);
      return;
    }
    case OpKind::ReduceScatter: {
      std::byte* acc = allocate(op, n * ab);
      op.rounds.push_back(action([=] { widen(dtype, send, acc, n); }));
      ringReduceScatter(op, r, N, acc, n);
      op.rounds.push_back(action(
          [=] { narrow(dtype, reduce, N, at(acc, ownFirst, ab), recv, ownLast - ownFirst); }));
      return;
    }
    case OpKind::AllGather: {
      std::byte* own = at(recv, ownFirst, eb);
      const int64_t bytes = (ownLast - ownFirst) * eb;
      op.rounds.push_back(action([=] {
        if (bytes > 0 && own != send) std::memmove(own, send, static_cast<size_t>(bytes));
      }));
      ringAllGather(op, r, N, recv, n, eb);
      return;
    }
    case OpKind::AllToAll: {
      const int64_t block = n * eb, total = block * N;
      const auto* s = static_cast<const std::byte*>(send);
      auto* d = static_cast<std::byte*>(recv);
      // In-place or overlapping buffers: exchange from a snapshot of send.
      if (total > 0 && s < d + total && d < s + total) {
        std::byte* copy = allocate(op, total);
        op.rounds.push_back(action([=] { std::memcpy(copy, s, static_cast<size_t>(total)); }));
        s = copy;
      }
      op.rounds.push_back(action([=] {
        if (block > 0) std::memmove(d + r * block, s + r * block, static_cast<size_t>(block));
      }));
      Round exchange;
      for (int j = 0; j < N; ++j) {
        if (j == r) continue;
        exchange.transfers.push_back({const_cast<std::byte*>(s) + j * block, block, j, true});
        exchange.transfers.push_back({d + j * block, block, j, false});
      }
      op.rounds.push_back(std::move(exchange));
      return;
    }
    case OpKind::Broadcast: {
      Round step;
      const int64_t bytes = n * eb;
      if (r == op.root) {
        for (int j = 0; j < N; ++j)
          if (j != r) step.transfers.push_back({data, bytes, j, true});
      } else {
        step.transfers.push_back({data, bytes, op.root, false});
      }
      op.rounds.push_back(std::move(step));
      return;
    }
    case OpKind::Barrier:
      return;  // the arrival handshake is the barrier
    case OpKind::Send:
    case OpKind::Recv: {
      Round step;
      step.transfers.push_back({data, n * eb, op.root, op.kind == OpKind::Send});
      op.rounds.push_back(std::move(step));
      return;
    }
  }
}

}  // namespace tessel::rt::comm
