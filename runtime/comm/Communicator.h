// Communicators: the collectives every rank issues, behind one interface with an MPI backend
// (CPU, runtime/comm/MpiCommunicator) and, on GPUs, an NCCL backend that follows the same
// design (a communication stream ordered against the compute stream by events).
//
// Promise:
// - Every collective is nonblocking: it returns a Work handle at once and runs on the
//   backend's own progress thread (MPI) or stream (NCCL), so it overlaps the compute that
//   follows it. Buffers must stay valid and untouched until wait() returns.
// - Collectives complete in the order they were issued on every rank; all ranks (of a group,
//   on a group's communicator) must issue the same sequence (the compiler derives it from the IR, so it is identical by
//   construction). Sizes may be 0 or 1, and lengths need not be multiples of the world size:
//   sharded collectives split a length-n buffer with shardRange (the first n % N ranks hold
//   one element more, as torch.tensor_split).
// - Every collective has a timeout (setTimeout, default 300 s). When it expires, wait()
//   throws CommError whose message names the collective, its size in bytes, the step (see
//   setStep) and the ranks that had not arrived; the trainer then exits non-zero. A
//   collective never hangs.
// - The communicator counts the payload bytes of every collective it issues (stats()): the
//   bytes of the buffer a rank contributes (all_reduce: count * element size; all_gather and
//   reduce_scatter: the full, unsharded length; all_to_all: world * countPerRank * element
//   size; broadcast: count * element size on every rank; send: the message; recv: 0, its
//   sender counts the message). Every issued operation, recv included, counts as one.
#pragma once

#include "runtime/numeric/DType.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

/// How all_reduce and reduce_scatter combine the ranks' values. Avg is Sum divided by the
/// world size (torch.distributed.ReduceOp.AVG), computed in the element type. Max is the
/// elementwise maximum (torch.distributed.ReduceOp.MAX); a NaN on any rank makes the result
/// NaN, as torch.max does. The vocab-parallel cross-entropy needs it across tp.
enum class ReduceOp { Sum, Avg, Max };

/// A collective that did not complete: timeout, a dead peer, or an MPI/NCCL error. The
/// message names the collective, its bytes, the step and the ranks that did not arrive.
struct CommError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The longest collective timeout accepted, in seconds (about 11.6 days). A timeout becomes a
/// std::chrono deadline in nanoseconds (int64, at most about 292 years), so 1e10 s and more
/// would overflow it; 1e6 s is far below that and far above any real collective.
inline constexpr double kMaxTimeoutSeconds = 1e6;

/// Throws CommError unless `seconds` is a collective timeout in (0, kMaxTimeoutSeconds]
/// (NaN and infinities are refused): every backend checks setTimeout and its options with it.
void checkTimeoutSeconds(double seconds);

/// The half-open element range [first, second) of shard `rank` when `n` elements are split
/// over `world` ranks: the first n % world ranks get ceil(n / world) elements, the rest
/// floor(n / world) (torch.tensor_split's rule). Requires n >= 0, 0 <= rank < world.
inline std::pair<int64_t, int64_t> shardRange(int64_t n, int rank, int world) {
  int64_t base = n / world, extra = n % world;
  int64_t first = rank * base + std::min<int64_t>(rank, extra);
  return {first, first + base + (rank < extra ? 1 : 0)};
}

/// The handle of an issued collective.
class Work {
public:
  virtual ~Work() = default;
  /// Blocks until the collective is complete on this rank; throws CommError on timeout or
  /// failure. Calling it again after it returned is a no-op.
  virtual void wait() = 0;
  /// True once the collective has finished, successfully or not (never blocks, never
  /// throws); wait() then returns at once or throws its CommError.
  virtual bool test() = 0;
};

/// One transfer of a grouped point-to-point exchange (Communicator::sendRecv): `count`
/// elements of `dtype` at `data` sent to, or received from, group rank `peer`, issued under
/// `name` (timeouts name it).
struct P2pTransfer {
  bool send = true;
  void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::F32;
  int peer = 0;
  std::string name;
};

/// The Work of several operations issued together: wait() waits for each in order (the first
/// failure's CommError propagates), test() is true once all are finished.
class WorkGroup final : public Work {
public:
  explicit WorkGroup(std::vector<std::unique_ptr<Work>> works) : works_(std::move(works)) {}
  void wait() override {
    for (auto& w : works_) w->wait();
  }
  bool test() override {
    bool done = true;
    for (auto& w : works_) done = w->test() && done;
    return done;
  }

private:
  std::vector<std::unique_ptr<Work>> works_;
};

/// Byte counters of everything this communicator issued (see the promise above).
struct CommStats {
  int64_t collectives = 0;   // collectives issued
  int64_t payloadBytes = 0;  // sum of their payload bytes
};

/// The collectives of one process group: the world, or a group of it (subgroup, DeviceMesh).
/// rank() and worldSize() are this rank's position in the group and the group's size; roots
/// and peers are group ranks.
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;

  /// In place: data[0:count) becomes the elementwise Sum, Avg or Max over ranks. Every rank ends
  /// with bitwise identical values (the reduction order is fixed by the backend, not by
  /// arrival).
  virtual std::unique_ptr<Work> allReduce(void* data, int64_t count, DType dtype, ReduceOp op,
                                          const std::string& name) = 0;
  /// recv[0:n) = the concatenation of every rank's shard; rank r contributes `send`, holding
  /// the shardRange(n, r, world) elements.
  virtual std::unique_ptr<Work> allGather(const void* send, void* recv, int64_t n, DType dtype,
                                          const std::string& name) = 0;
  /// recv = shard shardRange(n, rank, world) of the elementwise reduction of every rank's
  /// send[0:n).
  virtual std::unique_ptr<Work> reduceScatter(const void* send, void* recv, int64_t n,
                                              DType dtype, ReduceOp op,
                                              const std::string& name) = 0;
  /// send holds world blocks of `countPerRank` elements; block j goes to rank j, and recv's
  /// block j comes from rank j.
  virtual std::unique_ptr<Work> allToAll(const void* send, void* recv, int64_t countPerRank,
                                         DType dtype, const std::string& name) = 0;
  /// data[0:count) on every rank becomes root's.
  virtual std::unique_ptr<Work> broadcast(void* data, int64_t count, DType dtype, int root,
                                          const std::string& name) = 0;
  /// Point to point; a send matches the recv of the same peer pair in issue order.
  virtual std::unique_ptr<Work> send(const void* data, int64_t count, DType dtype, int peer,
                                     const std::string& name) = 0;
  virtual std::unique_ptr<Work> recv(void* data, int64_t count, DType dtype, int peer,
                                     const std::string& name) = 0;
  /// A group of sends and receives that progress together (pipeline parallelism's
  /// send_recv step): every transfer is posted before any is waited for, so a rank may send to
  /// and receive from the same peer in one group even when messages are too large to be
  /// buffered (rendezvous). Each transfer matches the peer's in issue order, as send/recv do.
  /// The default posts each through send/recv, which are nonblocking (MPI: Isend/Irecv on the
  /// progress thread); a backend whose sends may block until matched overrides it (NCCL: one
  /// ncclGroupStart ... ncclGroupEnd). `name` names the group; each transfer keeps its own.
  virtual std::unique_ptr<Work> sendRecv(const std::vector<P2pTransfer>& transfers, const std::string& name) {
    (void)name;
    std::vector<std::unique_ptr<Work>> works;
    works.reserve(transfers.size());
    for (const P2pTransfer& t : transfers)
      works.push_back(t.send ? send(t.data, t.count, t.dtype, t.peer, t.name)
                             : recv(t.data, t.count, t.dtype, t.peer, t.name));
    return std::make_unique<WorkGroup>(std::move(works));
  }

  /// A communicator over some of this one's ranks (DeviceMesh's groups): `ranks` are ranks of
  /// this communicator, ascending, and include rank(); this rank becomes rank `i` of the group
  /// where ranks[i] == rank(). Collective: every rank calls it in the same order, and the
  /// groups the ranks pass partition the ranks (each member of a group passes the same list);
  /// a rank whose group disagrees with a member's gets CommError. `label` names the group in
  /// messages ("tp", "dp,tp"). The group inherits the timeout and step; it must not outlive
  /// this communicator. Communicators that cannot form groups (a group's own, test doubles) throw
  /// CommError saying so.
  /// (Defined here, not in a backend's file, so that the interface stays header-only and
  /// test doubles link without a backend.)
  virtual std::unique_ptr<Communicator> subgroup(const std::vector<int>& ranks,
                                                 const std::string& label) {
    (void)ranks;
    throw CommError("group " + label + ": this communicator cannot form groups (form them from the world "
                    "communicator of an MPI, NCCL or single-rank backend)");
  }

  /// Seconds a collective may take before wait() throws (> 0).
  virtual void setTimeout(double seconds) = 0;
  /// The training step named in error messages.
  virtual void setStep(int64_t step) = 0;
  virtual CommStats stats() const = 0;
};

}  // namespace tessel::rt
