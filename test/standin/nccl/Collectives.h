// The stand-in NCCL's collectives on host buffers: the algorithms of the NCCL calls Tessel
// makes (runtime/comm/NcclApi.h), with NCCL's semantics, over a SocketTransport. No CUDA: the
// library (Nccl.cpp) turns device pointers into host views and calls these on a stream's
// worker thread; the MPI unit test calls them directly.
//
// Semantics (NCCL 2.28's documentation, "Collective Operations" and "In-place Operations"):
// - allReduce: recv[i] = op over ranks r of send_r[i], `count` elements.
// - allGather: recv[r * sendcount + i] = send_r[i]; recv holds size * sendcount elements.
//   In place when send == recv + rank * sendcount.
// - reduceScatter: recv[i] = op over r of send_r[rank * recvcount + i]; `recvcount` is the
//   count PER RANK, send holds size * recvcount. In place when recv == send + rank * recvcount.
// - broadcast: recv = root's send on every rank (send is read on the root only).
// - Avg on floating types is NCCL's ncclAvg: each input premultiplied by 1/size, then summed
//   (NCCL's PreMulSum); on int32 the sum divided by size afterwards (NCCL's SumPostDiv,
//   truncating). Max is the elementwise maximum.
// - Reduction order: rank 0, 1, ..., size - 1 for every element, on every rank, so every rank
//   gets the bitwise same result (as NCCL promises for one communicator). f32 and i32 sums
//   are in their own type; bf16 partial sums are rounded to bf16 after each addition (round
//   to nearest even), as NCCL's kernels round the partial sum they pass on.
// - Every operation first exchanges a header (operation, count, type, op, root, sequence)
//   with each peer it talks to, so ranks that call different collectives, counts or types
//   get TransportError (Usage) naming both calls, instead of a hang or a silent mix (NCCL
//   itself would hang or corrupt; the stand-in reports).
#pragma once

#include "test/standin/nccl/Transport.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::standin::nccl {

/// The element types the stand-in implements (ncclFloat32, ncclBfloat16, ncclInt32).
enum class DataType { F32, BF16, I32 };
/// The reductions it implements (ncclSum, ncclAvg, ncclMax).
enum class RedOp { Sum, Avg, Max };

/// Bytes of one element.
size_t elementBytes(DataType type);
/// "f32", "bf16", "i32".
const char* typeName(DataType type);
/// "sum", "avg", "max".
const char* opName(RedOp op);

/// bf16 <-> f32: widening is exact; narrowing rounds to nearest even (NaN stays NaN).
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

/// out[i] = op over k = 0..inputs.size()-1 of inputs[k][i] (in that order), with NCCL's
/// semantics above for a communicator of `ranks` ranks (Avg divides by it). `out` may alias
/// any input.
void reduceInOrder(void* out, const std::vector<const void*>& inputs, size_t count, DataType type, RedOp op,
                   int ranks);

/// Whether [a, a + aBytes) and [b, b + bBytes) overlap (addresses as integers, so device
/// addresses are checked too).
bool overlaps(uintptr_t a, size_t aBytes, uintptr_t b, size_t bBytes);

/// One send or receive of a group (ncclSend / ncclRecv between ncclGroupStart and End).
struct PointToPoint {
  bool send = false;
  int peer = 0;
  void* data = nullptr;  // host view; read for a send, written for a receive
  size_t count = 0;
  DataType type = DataType::F32;
};

/// The collectives of one rank of one communicator. One operation at a time (the library
/// runs a communicator's operations in stream order).
class Collectives {
public:
  explicit Collectives(SocketTransport& transport) : t_(transport) {}

  int rank() const { return t_.rank(); }
  int size() const { return t_.size(); }

  void allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op);
  void allGather(const void* send, void* recv, size_t sendcount, DataType type);
  void reduceScatter(const void* send, void* recv, size_t recvcount, DataType type, RedOp op);
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  /// A group's sends and receives, run together (any order between ranks is fine). A send and
  /// its receive must agree on count and type.
  void pointToPoint(const std::vector<PointToPoint>& ops);

private:
  struct Header {
    uint32_t magic, kind, type, op;
    int64_t count, root, seq;
  };
  /// Sends `mine` to each of `peers` and checks what each sent back equals `expect(peer)`.
  void agree(const std::vector<int>& peers, const Header& mine, const std::vector<Header>& expected);
  Header header(uint32_t kind, size_t count, DataType type, RedOp op, int root) const;
  /// Every rank's `bytes` from `send` into slot r of `slots` (own slot: a copy).
  std::vector<std::vector<char>> gatherAll(const void* send, size_t bytes);

  SocketTransport& t_;
  int64_t seq_ = 0;  // collectives issued on this communicator
};

}  // namespace tessel::standin::nccl
