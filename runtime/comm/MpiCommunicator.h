// The MPI backend of Communicator (CPU collectives over OpenMPI).
//
// Promise (beyond Communicator.h):
// - One progress thread owned by the communicator makes every MPI call, from MPI_Init_thread
//   (MPI_THREAD_FUNNELED) to MPI_Finalize. Issuing a collective only enqueues it; the thread
//   runs the collectives one after another in issue order with nonblocking point-to-point
//   messages polled by MPI_Test, so the calling thread computes while they run.
// - Arrival handshake: when a rank starts collective #k it announces (#k, kind, name, dtype,
//   count, op, root) to every peer; the data exchange starts only once every peer announced
//   the same #k. A peer that announced a different collective fails the collective at once
//   ("does not match"); a peer whose announcement is missing when the timeout expires is named
//   in the timeout message ("rank(s) that did not arrive: 1, 3").
// - Fixed reduction order: all_reduce is a ring reduce-scatter followed by a ring all-gather
//   (Patarasuk & Yuan 2009); reduce_scatter is the first half. Chunk c (shardRange(n, c, N)) is
//   summed in the order x[c+1] + x[c+2] + ... + x[c] (ranks mod N) by the ranks in turn and
//   then copied, so the order never depends on message arrival and every rank ends with the
//   same bits. Partial sums travel in the accumulator type (f32 for f32/bf16, int64 for i32;
//   see Reduce.h), so bf16 is rounded once per element, after the Avg division. Max runs
//   through the same ring, keeping the larger value instead of adding.
// - broadcast: the root sends to every rank; all_to_all: every pair exchanges its block.
// - Failures (timeout, mismatch, an MPI error) make wait() throw CommError and leave the
//   communicator failed: every later collective fails at once with the first message. The
//   process must then exit non-zero without MPI_Finalize (see abortJob in World.h); buffers
//   of a failed collective may still be written by late messages until it does.
// - A launcher that ends the job because one rank died (OpenMPI's mpirun sends the other
//   ranks SIGTERM, then SIGKILL; srun does the same) would otherwise kill the survivors
//   before their timeouts expire. With reportOnSigterm, a SIGTERM makes this rank print, to
//   stderr, the collective it was waiting for with its bytes, step and the ranks that had not
//   arrived, then die of SIGTERM as before. Installed only where SIGTERM has its default
//   action (a program's own handler is left alone).
// - Groups (subgroup, DeviceMesh) are ranks of this world sharing its progress thread and
//   MPI communicators rather than MPI_Comm_split communicators: MPI_Comm_split is a blocking
//   collective without a timeout, and one queue per rank keeps the issue-order promise across
//   groups. Messages of different groups between the same two ranks cannot be confused:
//   both ranks post them in the same (issue) order and MPI does not reorder messages with the
//   same source, tag and communicator.
// - Destruction runs a "finalize" barrier (with the timeout) before MPI_Finalize, so a dead
//   peer cannot hang MPI_Finalize; if that barrier fails the message is printed and the
//   process exits with status 1 (abortJob). MPI is initialised once per process: a second
//   MpiCommunicator throws CommError.
#pragma once

#include "runtime/comm/Communicator.h"

#include <memory>
#include <vector>

namespace tessel::rt {

struct MpiOptions {
  double timeoutSeconds = 300.0;  // per collective, from the moment this rank starts it
  bool reportOnSigterm = true;    // see the promise above
};

class MpiCommunicator final : public Communicator {
public:
  /// Starts the progress thread and initialises MPI on it. Throws CommError if MPI was
  /// initialised before in this process or does not provide MPI_THREAD_FUNNELED.
  explicit MpiCommunicator(const MpiOptions& options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override;
  int worldSize() const override;
  /// This rank's index among the ranks on its host (MPI_COMM_TYPE_SHARED), and their count.
  int localRank() const;
  int localSize() const;

  std::unique_ptr<Work> allReduce(void* data, int64_t count, DType dtype, ReduceOp op,
                                  const std::string& name) override;
  std::unique_ptr<Work> allGather(const void* send, void* recv, int64_t n, DType dtype,
                                  const std::string& name) override;
  std::unique_ptr<Work> reduceScatter(const void* send, void* recv, int64_t n, DType dtype,
                                      ReduceOp op, const std::string& name) override;
  std::unique_ptr<Work> allToAll(const void* send, void* recv, int64_t countPerRank, DType dtype,
                                 const std::string& name) override;
  std::unique_ptr<Work> broadcast(void* data, int64_t count, DType dtype, int root,
                                  const std::string& name) override;
  std::unique_ptr<Work> send(const void* data, int64_t count, DType dtype, int peer,
                             const std::string& name) override;
  std::unique_ptr<Work> recv(void* data, int64_t count, DType dtype, int peer,
                             const std::string& name) override;
  /// A group communicator (see Communicator::subgroup) that runs on this communicator's
  /// progress thread and MPI communicators, in the one issue order of this rank (a group's
  /// collective waits for the collectives issued before it on any communicator of this rank),
  /// with the same arrival handshake among the group's members, timeouts and failure reports;
  /// every rank is named by its world rank. Any failure fails this communicator and all its
  /// groups. Forming a group runs one world all_gather (named "group <label>") that checks that
  /// the members agree on it.
  std::unique_ptr<Communicator> subgroup(const std::vector<int>& ranks,
                                         const std::string& label) override;
  /// Blocks every rank until all arrived (the arrival handshake alone); counted as a
  /// collective with 0 payload bytes.
  std::unique_ptr<Work> barrier(const std::string& name);

  void setTimeout(double seconds) override;
  void setStep(int64_t step) override;
  CommStats stats() const override;

  /// The state shared with the progress thread (MpiImpl.h, internal).
  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::rt
