// The measurements of `tessel bench-comm`: one collective at one size through a
// Communicator (the trainer's own: MPI on CPU, NCCL on GPU), verified against a locally
// computed reference and timed, with nccl-tests' bandwidth definitions.
//
// Definitions (nccl-tests, doc/PERFORMANCE.md): S is the size of the whole tensor in bytes
// (all_reduce and broadcast: the buffer; all_gather: the gathered result; reduce_scatter: the
// input that is reduced; all_to_all: what one rank sends to all; send/recv: the message), t
// the time of one operation, n the world size.
//   algbw = S / t
//   busbw = algbw * factor(op, n): 2(n-1)/n for all_reduce; (n-1)/n for all_gather,
//           reduce_scatter and all_to_all; 1 for broadcast and send/recv.
// busbw is what each rank's link carried, so it compares with the hardware's bandwidth
// whatever n is (a world of 1 moves nothing: its factor is 0, except for broadcast).
//
// Data: f32 elements. Rank r's element i is value(r, i), a small integer (|v| <= 8), so every
// sum over up to 2^20 ranks is exact in f32 whatever order the backend adds in, and the
// reference (computed on every rank for its own output) must match bit for bit.
// Timing: after `warmup` untimed runs, the ranks synchronise (a 1-element all_reduce) and each
// times `iters` runs of issue + wait; t is the largest mean over the ranks (the slowest rank
// decides how long a step waits).
#pragma once

#include "runtime/comm/Communicator.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::cli {

/// The operations bench-comm measures.
enum class CommOp { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, SendRecv };

/// Every operation, in the order they are measured and listed.
const std::vector<CommOp>& allCommOps();
/// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv".
const char* commOpName(CommOp op);
/// The operation a name means (commOpName's spelling; "sendrecv" and "send/recv" are also
/// accepted for send_recv); nullopt for anything else.
std::optional<CommOp> parseCommOp(const std::string& name);

/// The busbw factor of `op` on `world` ranks (see the definitions above). Requires world >= 1.
double busBandwidthFactor(CommOp op, int world);

/// The elements of one measurement of `op` with about `bytes` bytes on `world` ranks, and the
/// S it moves: every op uses bytes / 4 elements (at least 1), except all_to_all, whose size
/// must be world blocks of equal length, which rounds down to a multiple of world (at least
/// one element per rank).
struct CommSize {
  int64_t count = 0;  // elements of the whole tensor (S / 4)
  int64_t bytes = 0;  // S
};
CommSize commSize(CommOp op, int64_t bytes, int world);

/// The sizes of a sweep from `minBytes` to `maxBytes` (inclusive, both >= 1): doubling from
/// minBytes (nccl-tests -f 2) when stepBytes is 0, else minBytes, minBytes + stepBytes, ...;
/// maxBytes is always the last one. Throws std::invalid_argument if minBytes > maxBytes.
std::vector<int64_t> sweepSizes(int64_t minBytes, int64_t maxBytes, int64_t stepBytes);

/// Where a measurement's buffers live: host memory (MPI) or device memory (NCCL), with copies
/// to and from the host for the reference check.
class BenchMemory {
public:
  virtual ~BenchMemory() = default;
  /// A buffer of `bytes` bytes (>= 1), valid until the BenchMemory is destroyed or release().
  virtual void* allocate(int64_t bytes) = 0;
  /// Frees every buffer allocate() returned.
  virtual void release() = 0;
  virtual void upload(void* device, const void* host, int64_t bytes) = 0;
  virtual void download(void* host, const void* device, int64_t bytes) = 0;
  /// Sets `bytes` bytes at `device` to zero.
  virtual void zero(void* device, int64_t bytes) = 0;
};

/// Host memory: plain allocations; copies are memcpy.
std::unique_ptr<BenchMemory> hostMemory();
/// Memory on CUDA device `device` (its primary context, made current on this thread), through
/// the driver table of runtime/cuda/CudaApi.h (CudaBenchMemory.cpp). Throws
/// std::runtime_error when the driver or the device cannot be used, or the build has no CUDA
/// headers.
std::unique_ptr<BenchMemory> cudaMemory(int device);

/// Iterations of one measurement.
struct BenchOptions {
  int64_t warmup = 5;
  int64_t iters = 20;
};

/// One row of bench-comm's output.
struct BenchResult {
  CommOp op{};
  int64_t bytes = 0;   // S
  int64_t count = 0;   // elements of the whole tensor
  double seconds = 0;  // t: the slowest rank's mean time of one operation
  double algbw = 0;    // S / t, in GB/s (1e9 bytes per second, as nccl-tests)
  double busbw = 0;    // algbw * busBandwidthFactor
  int wrongRanks = 0;  // ranks whose result differed from the reference (0: verified)
  std::string firstError;  // this rank's first wrong element, when it had one
};

/// value(r, i) of the data definition above.
float benchValue(int rank, int64_t i);

/// Measures `op` at `bytes` on every rank of `comm` (collective: every rank calls it with the
/// same arguments), whose buffers are `memory`'s; `control` is a host communicator over the
/// same ranks (the same object on CPU, the MPI world beside NCCL) for the synchronisation and
/// the reductions of the results. Fills the inputs with benchValue, runs the op once and compares every
/// output element with the reference, then zeroes the buffers (so repeated sums neither
/// overflow nor slow down) and times warmup + iters runs. Returns the same result on every rank
/// (the time and the count of wrong ranks are reduced over the ranks). send_recv needs a
/// world of at least 2 (each rank sends to rank + 1 and receives from rank - 1, as nccl-tests'
/// sendrecv); throws std::invalid_argument for it on one rank.
BenchResult measure(rt::Communicator& comm, rt::Communicator& control, BenchMemory& memory, CommOp op,
                    int64_t bytes, const BenchOptions& options);

/// The bytes of memory one rank allocates to measure `op` at size S on `world` ranks: the
/// operation's buffers and the host copies of its input and output for the check (the caller
/// refuses a sweep that does not fit in memory before it starts).
int64_t bytesNeeded(CommOp op, int64_t bytes, int world);

}  // namespace tessel::cli
