// The stand-in NCCL's host collectives; see Collectives.h.
#include "test/standin/nccl/Collectives.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessel::standin::nccl {
namespace {

constexpr uint32_t kHeaderMagic = 0x4e43434c;  // "NCCL"
enum Kind : uint32_t { kAllReduce = 1, kAllGather, kReduceScatter, kBroadcast, kSend, kRecv };
const char* kindName(uint32_t k) {
  switch (k) {
    case kAllReduce: return "ncclAllReduce";
    case kAllGather: return "ncclAllGather";
    case kReduceScatter: return "ncclReduceScatter";
    case kBroadcast: return "ncclBroadcast";
    case kSend: return "ncclSend";
    case kRecv: return "ncclRecv";
  }
  return "an unknown operation";
}

template <class T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

size_t elementBytes(DataType type) { return type == DataType::BF16 ? 2 : 4; }
const char* typeName(DataType type) {
  return type == DataType::F32 ? "f32" : type == DataType::BF16 ? "bf16" : "i32";
}
const char* opName(RedOp op) { return op == RedOp::Sum ? "sum" : op == RedOp::Avg ? "avg" : "max"; }

float bf16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // stays a (quiet) NaN
  u += 0x7fff + ((u >> 16) & 1);                                        // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

void reduceInOrder(void* out, const std::vector<const void*>& inputs, size_t count, DataType type, RedOp op,
                   int ranks) {
  const size_t n = inputs.size();
  if (n == 0) return;
  // Each element reads every input before it is written, so `out` may alias an input.
  switch (type) {
    case DataType::F32: {
      const float scale = op == RedOp::Avg ? 1.0f / static_cast<float>(ranks) : 1.0f;
      for (size_t i = 0; i < count; ++i) {
        float acc = load<float>(inputs[0], i) * scale;
        for (size_t k = 1; k < n; ++k) {
          const float x = load<float>(inputs[k], i);
          acc = op == RedOp::Max ? std::fmax(acc, x) : acc + x * scale;
        }
        store(out, i, acc);
      }
      return;
    }
    case DataType::BF16: {
      // NCCL's premultiplier is a scalar of the reduction's type.
      const float scale = op == RedOp::Avg ? bf16ToFloat(floatToBf16(1.0f / static_cast<float>(ranks))) : 1.0f;
      auto term = [&](size_t k, size_t i) {
        const float x = bf16ToFloat(load<uint16_t>(inputs[k], i));
        return op == RedOp::Avg ? bf16ToFloat(floatToBf16(x * scale)) : x;
      };
      for (size_t i = 0; i < count; ++i) {
        float acc = term(0, i);
        for (size_t k = 1; k < n; ++k)
          acc = op == RedOp::Max ? std::fmax(acc, term(k, i)) : bf16ToFloat(floatToBf16(acc + term(k, i)));
        store(out, i, floatToBf16(acc));
      }
      return;
    }
    case DataType::I32: {
      for (size_t i = 0; i < count; ++i) {
        // Sums wrap in two's complement, as int32 addition does on the GPU.
        uint32_t acc = static_cast<uint32_t>(load<int32_t>(inputs[0], i));
        for (size_t k = 1; k < n; ++k) {
          const int32_t x = load<int32_t>(inputs[k], i);
          acc = op == RedOp::Max ? static_cast<uint32_t>(std::max(static_cast<int32_t>(acc), x))
                                 : acc + static_cast<uint32_t>(x);
        }
        int32_t v = static_cast<int32_t>(acc);
        if (op == RedOp::Avg) v /= ranks;
        store(out, i, v);
      }
      return;
    }
  }
}

bool overlaps(uintptr_t a, size_t aBytes, uintptr_t b, size_t bBytes) {
  return aBytes > 0 && bBytes > 0 && a < b + bBytes && b < a + aBytes;
}

Collectives::Header Collectives::header(uint32_t kind, size_t count, DataType type, RedOp op, int root) const {
  return Header{kHeaderMagic, kind, static_cast<uint32_t>(type), static_cast<uint32_t>(op),
                static_cast<int64_t>(count), root, seq_};
}

void Collectives::agree(const std::vector<int>& peers, const Header& mine, const std::vector<Header>& expected) {
  std::vector<Header> theirs(peers.size());
  std::vector<Transfer> transfers;
  for (size_t k = 0; k < peers.size(); ++k) {
    transfers.push_back({peers[k], true, const_cast<Header*>(&mine), sizeof(Header)});
    transfers.push_back({peers[k], false, &theirs[k], sizeof(Header)});
  }
  t_.exchange(transfers);
  auto describe = [](const Header& h) {
    if (h.magic != kHeaderMagic) return std::string("something that is not a stand-in NCCL operation");
    std::string s = std::string(kindName(h.kind));
    if (h.kind == kAllReduce || h.kind == kReduceScatter) s += std::string(" ") + opName(static_cast<RedOp>(h.op));
    s += " of " + std::to_string(h.count) + " " + typeName(static_cast<DataType>(h.type));
    if (h.kind == kBroadcast) s += " from root " + std::to_string(h.root);
    if (h.kind != kSend && h.kind != kRecv) s += " (collective #" + std::to_string(h.seq) + ")";
    return s;
  };
  for (size_t k = 0; k < peers.size(); ++k)
    if (std::memcmp(&theirs[k], &expected[k], sizeof(Header)) != 0)
      throw TransportError(TransportError::Usage,
                           "rank " + std::to_string(peers[k]) + " called " + describe(theirs[k]) + " where rank " +
                               std::to_string(rank()) + " expected " + describe(expected[k]));
}

std::vector<std::vector<char>> Collectives::gatherAll(const void* send, size_t bytes) {
  std::vector<std::vector<char>> slots(static_cast<size_t>(size()), std::vector<char>(bytes));
  std::memcpy(slots[static_cast<size_t>(rank())].data(), send, bytes);
  std::vector<Transfer> transfers;
  for (int p = 0; p < size(); ++p)
    if (p != rank()) {
      transfers.push_back({p, true, const_cast<void*>(send), bytes});
      transfers.push_back({p, false, slots[static_cast<size_t>(p)].data(), bytes});
    }
  t_.exchange(transfers);
  return slots;
}

namespace {
std::vector<int> othersOf(int rank, int size) {
  std::vector<int> peers;
  for (int p = 0; p < size; ++p)
    if (p != rank) peers.push_back(p);
  return peers;
}
}  // namespace

void Collectives::allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  ++seq_;
  const std::vector<int> peers = othersOf(rank(), size());
  const Header h = header(kAllReduce, count, type, op, 0);
  agree(peers, h, std::vector<Header>(peers.size(), h));
  std::vector<std::vector<char>> slots = gatherAll(send, count * elementBytes(type));
  std::vector<const void*> inputs;
  for (auto& s : slots) inputs.push_back(s.data());
  reduceInOrder(recv, inputs, count, type, op, size());
}

void Collectives::allGather(const void* send, void* recv, size_t sendcount, DataType type) {
  ++seq_;
  const std::vector<int> peers = othersOf(rank(), size());
  const Header h = header(kAllGather, sendcount, type, RedOp::Sum, 0);
  agree(peers, h, std::vector<Header>(peers.size(), h));
  const size_t bytes = sendcount * elementBytes(type);
  std::vector<char> mine(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
  std::vector<Transfer> transfers;
  for (int p : peers) {
    transfers.push_back({p, true, mine.data(), bytes});
    transfers.push_back({p, false, static_cast<char*>(recv) + static_cast<size_t>(p) * bytes, bytes});
  }
  t_.exchange(transfers);
  std::memcpy(static_cast<char*>(recv) + static_cast<size_t>(rank()) * bytes, mine.data(), bytes);
}

void Collectives::reduceScatter(const void* send, void* recv, size_t recvcount, DataType type, RedOp op) {
  ++seq_;
  const std::vector<int> peers = othersOf(rank(), size());
  const Header h = header(kReduceScatter, recvcount, type, op, 0);
  agree(peers, h, std::vector<Header>(peers.size(), h));
  const size_t bytes = recvcount * elementBytes(type);
  const char* in = static_cast<const char*>(send);
  std::vector<std::vector<char>> slots(static_cast<size_t>(size()), std::vector<char>(bytes));
  std::memcpy(slots[static_cast<size_t>(rank())].data(), in + static_cast<size_t>(rank()) * bytes, bytes);
  std::vector<Transfer> transfers;
  for (int p : peers) {
    transfers.push_back({p, true, const_cast<char*>(in) + static_cast<size_t>(p) * bytes, bytes});
    transfers.push_back({p, false, slots[static_cast<size_t>(p)].data(), bytes});
  }
  t_.exchange(transfers);
  std::vector<const void*> inputs;
  for (auto& s : slots) inputs.push_back(s.data());
  reduceInOrder(recv, inputs, recvcount, type, op, size());
}

void Collectives::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  ++seq_;
  const std::vector<int> peers = othersOf(rank(), size());
  const Header h = header(kBroadcast, count, type, RedOp::Sum, root);
  agree(peers, h, std::vector<Header>(peers.size(), h));
  const size_t bytes = count * elementBytes(type);
  std::vector<Transfer> transfers;
  if (rank() == root) {
    std::vector<char> data(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
    for (int p : peers) transfers.push_back({p, true, data.data(), bytes});
    t_.exchange(transfers);
    std::memcpy(recv, data.data(), bytes);
  } else {
    transfers.push_back({root, false, recv, bytes});
    t_.exchange(transfers);
  }
}

void Collectives::pointToPoint(const std::vector<PointToPoint>& ops) {
  // 1. A handshake both ways for every operation: a send and its receive exchange their
  //    headers, so a send cannot complete before the receive runs (NCCL's ncclSend blocks
  //    until its ncclRecv progresses; only a group lets both run together), and both ranks
  //    check count and type. To each peer go the headers of this rank's sends to it, then of
  //    its receives from it; from each peer come the headers of its sends (matching this
  //    rank's receives, in order), then of its receives (matching this rank's sends).
  // 2. The data: the k-th send to a peer is the k-th receive there.
  for (const PointToPoint& o : ops)
    if (o.peer < 0 || o.peer >= size())
      throw TransportError(TransportError::Usage, "peer " + std::to_string(o.peer) + " outside the communicator");
  std::vector<Header> mine(ops.size()), theirs(ops.size());
  std::vector<Transfer> headers, data;
  for (int p = 0; p < size(); ++p) {
    for (bool sends : {true, false})
      for (size_t k = 0; k < ops.size(); ++k)
        if (ops[k].peer == p && ops[k].send == sends) {
          mine[k] = header(sends ? kSend : kRecv, ops[k].count, ops[k].type, RedOp::Sum, 0);
          mine[k].seq = 0;  // point to point does not count as a collective
          headers.push_back({p, true, &mine[k], sizeof(Header)});
        }
    for (bool sends : {false, true})  // the peer's sends first: they match this rank's receives
      for (size_t k = 0; k < ops.size(); ++k)
        if (ops[k].peer == p && ops[k].send == sends) headers.push_back({p, false, &theirs[k], sizeof(Header)});
  }
  t_.exchange(headers);
  for (size_t k = 0; k < ops.size(); ++k) {
    const PointToPoint& o = ops[k];
    Header want = mine[k];
    want.kind = o.send ? kRecv : kSend;
    if (std::memcmp(&theirs[k], &want, sizeof(Header)) != 0)
      throw TransportError(TransportError::Usage,
                           std::string(o.send ? "ncclSend" : "ncclRecv") + " of " + std::to_string(o.count) + " " +
                               typeName(o.type) + (o.send ? " to" : " from") + " rank " + std::to_string(o.peer) +
                               " on rank " + std::to_string(rank()) + " met " +
                               (theirs[k].kind == kSend ? "an ncclSend" : theirs[k].kind == kRecv ? "an ncclRecv"
                                                                                                 : "another operation") +
                               " of " + std::to_string(theirs[k].count) + " " +
                               typeName(static_cast<DataType>(theirs[k].type)) + " (count and type must match)");
    data.push_back({o.peer, o.send, o.data, o.count * elementBytes(o.type)});
  }
  t_.exchange(data);
}

}  // namespace tessel::standin::nccl
