// The NCCL backend's decisions that need no GPU, kept apart so they are unit-tested on any
// machine (like runtime/cuda/CudaPlan.h): the padded layout of uneven sharded collectives,
// the bootstrap record the ranks exchange over MPI before NCCL starts, and the texts of its
// errors. No CUDA or NCCL header.
//
// Uneven all_gather / reduce_scatter. NCCL's ncclAllGather and ncclReduceScatter move the
// same count per rank, while Communicator.h shards a length-n buffer by shardRange (the
// first n % N ranks hold one element more). When N does not divide n, the backend runs them
// on a scratch buffer of N blocks of `block` = ceil(n / N) elements (block r at r * block):
//   all_gather:     pack    this rank's shard -> block `rank` of the scratch,
//                   ncclAllGather in place (sendbuff = scratch + rank * block, count block),
//                   unpack  block r [0, len_r) -> recv[first_r, first_r + len_r) for every r;
//   reduce_scatter: pack    send[first_r, first_r + len_r) -> block r for every r,
//                   ncclReduceScatter in place (recvbuff = scratch + rank * block),
//                   unpack  block `rank` [0, len_rank) -> recv.
// The tail of a short block is never read back, so its contents (whatever the scratch held)
// do not matter. The copies are device-to-device on the communication stream. Chosen over
// grouped send/recv because it keeps NCCL's ring/tree algorithms and their fixed reduction
// order; the cost is at most N - 1 padding elements and two extra copies.
#pragma once

#include "runtime/comm/Communicator.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt::nccl {

/// One contiguous copy of `count` elements from element offset `src` to `dst`.
struct Copy {
  int64_t src = 0, dst = 0, count = 0;
  bool operator==(const Copy&) const = default;
};

/// The scratch layout of an uneven sharded collective of n elements over `world` ranks.
struct PaddedLayout {
  int64_t n = 0;
  int world = 1;
  int64_t block = 0;  // ceil(n / world): elements per rank in the scratch (0 when n == 0)
  /// False when world divides n: NCCL then runs on the caller's buffers, without scratch.
  bool padded() const { return block * world != n; }
  /// Elements of the scratch buffer: world * block.
  int64_t scratchElements() const { return block * world; }
};

/// The layout of n >= 0 elements over world >= 1 ranks.
PaddedLayout paddedLayout(int64_t n, int world);

/// all_gather: this rank's send[0, len) into its block (at most one copy; none if empty).
std::vector<Copy> allGatherPack(const PaddedLayout& l, int rank);
/// all_gather: every rank's block into recv at its shard (one copy per non-empty shard).
std::vector<Copy> allGatherUnpack(const PaddedLayout& l);
/// reduce_scatter: every shard of send into its rank's block.
std::vector<Copy> reduceScatterPack(const PaddedLayout& l);
/// reduce_scatter: this rank's block [0, len) into recv (at most one copy).
std::vector<Copy> reduceScatterUnpack(const PaddedLayout& l, int rank);

/// What each rank tells the others before NCCL starts (all-gathered over the bootstrap
/// communicator): whether its local setup (driver, device, NCCL library; on rank 0 also
/// ncclGetUniqueId) succeeded, the CUDA device it uses, rank 0's NCCL unique id, and the
/// reason of a failure (truncated to kReasonBytes - 1 bytes).
struct BootstrapRecord {
  static constexpr int kIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES (nccl.h)
  static constexpr int kReasonBytes = 384;
  bool ok = false;
  int32_t device = -1;
  int32_t ncclVersion = 0;  // NCCL_VERSION_CODE of the library this rank loaded
  std::array<char, kIdBytes> uniqueId{};
  std::string reason;
};

/// int32 words of one encoded record.
constexpr int kBootstrapWords =
    3 + (BootstrapRecord::kIdBytes + BootstrapRecord::kReasonBytes) / 4;

/// Encodes `r` into kBootstrapWords words (the reason truncated, NUL-terminated).
std::vector<int32_t> encodeBootstrap(const BootstrapRecord& r);
/// Decodes kBootstrapWords words.
BootstrapRecord decodeBootstrap(const int32_t* words);

/// All-gathers every rank's record over `bootstrap` (a host communicator: MPI, or a test's
/// in-process one) and returns them in rank order. Throws CommError if the bootstrap fails.
std::vector<BootstrapRecord> exchangeBootstrap(Communicator& bootstrap, const BootstrapRecord& mine);

/// Throws CommError on every rank when some rank's setup failed, naming each failed rank and
/// its reason ("the NCCL communicator cannot start: rank 1: <reason>; rank 3: <reason>"), or
/// when the ranks loaded NCCL libraries of different versions (NCCL requires one version).
void requireAllReady(const std::vector<BootstrapRecord>& records);

/// The op's description in the MPI backend's format (runtime/comm/MpiOp.h describe):
/// "all_reduce 'grad.w' (collective #5, 4004 bytes, step 3)", or for point to point
/// "send 'act' (to rank 2, 400 bytes, step 3)", for a grouped send_recv "send_recv '<name>' (400
/// bytes, step 3)". `kind` is the glossary name ("all_reduce",
/// "send", ...); `peer` is used for send/recv only.
std::string describeOp(const std::string& kind, const std::string& name, int64_t seq, int64_t bytes,
                       int64_t step, int peer);

/// The timeout message, as the MPI backend's: "<describe> timed out after <s> s on rank R of
/// N; rank(s) that did not arrive: unknown (NCCL does not report which rank is missing)".
std::string timeoutMessage(const std::string& description, double timeoutSeconds, int rank, int world);

}  // namespace tessel::rt::nccl
