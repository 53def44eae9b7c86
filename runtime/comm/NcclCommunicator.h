// The NCCL backend of Communicator: collectives on GPU memory of one device per rank.
//
// Promise (as designed and reviewed against the NCCL 2.28 and CUDA 13 documentation; it has
// NOT been run on a GPU: the machines it was developed on have none. See docs/gpu.md for what
// is tested without one):
// - NCCL is opened with dlopen (runtime/comm/NcclApi.h, libnccl.so.2, 2.10 or newer), the
//   CUDA driver through the GPU executor's table (runtime/cuda/CudaApi.h); nothing is linked.
// - Construction, on every rank of `bootstrap` (a host communicator, normally MPI): local
//   setup (driver, the device of this rank: options.device, else the local rank as in
//   runtime/cuda/CudaPlan.h selectCudaDevice, its primary context, NCCL; rank 0 also calls
//   ncclGetUniqueId), then ONE all-gather over `bootstrap` of every rank's outcome, device
//   and rank 0's unique id (runtime/comm/NcclPlan.h). If any rank failed, EVERY rank throws
//   CommError naming each failed rank and its reason, so no rank waits for a peer that will
//   never join. Then ncclCommInitRank on the device. (A rank that fails inside
//   ncclCommInitRank itself leaves its peers inside that call; it exits non-zero and the
//   launcher ends the job.)
// - Streams: collectives run on the communicator's own stream (cuStreamCreate, non-blocking).
//   At issue an event is recorded on the compute stream (setComputeStream) and the
//   communication stream waits for it (cuStreamWaitEvent), so the collective reads the
//   buffers the compute stream produced; after the collective an event `done` is recorded on
//   the communication stream. Work::wait() makes the compute stream wait for `done`; with
//   options.hostWait it also blocks the host until `done` completes.
// - Collectives: all_reduce (ncclAllReduce; Avg is ncclAvg, Max ncclMax, which is fmaxf in
//   NCCL's kernels: a NaN loses against a number, unlike Communicator.h's NaN-propagating Max
//   and the MPI backend), all_gather / reduce_scatter
//   (ncclAllGather / ncclReduceScatter; lengths not divisible by the world size through a
//   padded scratch buffer, NcclPlan.h), all_to_all (grouped ncclSend/ncclRecv, one pair per
//   peer), broadcast (ncclBroadcast in place), send/recv (ncclSend/ncclRecv), sendRecv (a group of
//   them in one ncclGroupStart/ncclGroupEnd). Sizes of 0 issue
//   nothing on NCCL (every rank sees the same count) but still count and order. Buffers are
//   device pointers of this device. Dtypes f32, bf16, i32 (ncclFloat32, ncclBfloat16,
//   ncclInt32). Reduction order is NCCL's, fixed by its algorithm choice, the same on every
//   rank for one collective size (bitwise identical results, as NCCL documents for
//   ncclAllReduce on one communicator).
// - Timeouts (setTimeout, default 300 s from the issue) and asynchronous NCCL errors: a
//   watchdog thread polls every in-flight collective (cuEventQuery on `done`,
//   ncclCommGetAsyncError) every 50 ms; a host wait() polls the same way. On expiry or error
//   the communicator is failed: every later collective throws CommError with the first
//   message. With hostWait it calls ncclCommAbort (so the GPU kernels stop) and wait() throws.
//   Without hostWait nobody is blocked where it could be thrown (the host may be inside a
//   stream synchronisation that waits for the collective), so the watchdog ends the process:
//   "tessel: rank R: <message>" on stderr and exit status 1 (rt::abortJob), on every surviving
//   rank (each one's own collective times out or fails); the process exit tears down NCCL's
//   kernels, and ncclCommAbort, which can block on a kernel waiting for a dead peer, is not
//   called. The message has the MPI
//   backend's format: the collective, its bytes, the step and "rank(s) that did not arrive:
//   unknown (NCCL does not report which rank is missing)".
// - Payload counters as Communicator.h defines them.
// Not thread-safe: issue and wait from one thread (the watchdog is internal).
#pragma once

#include "runtime/comm/StreamCommunicator.h"

#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

struct NcclOptions {
  double timeoutSeconds = 300.0;  // per collective, from its issue
  int device = -1;                // CUDA device ordinal; -1: by local rank (selectCudaDevice)
  bool hostWait = true;           // wait() also blocks the host (see the promise)
};

class NcclCommunicator final : public StreamCommunicator {
public:
  /// Collective over every rank of `bootstrap` (used only during construction). Throws
  /// CommError, on every rank, when a rank cannot start (no driver, no device, no NCCL, ...),
  /// naming the ranks and causes.
  explicit NcclCommunicator(Communicator& bootstrap, const NcclOptions& options = {});
  /// Waits (with the timeout) for in-flight collectives, then ncclCommDestroy; after a
  /// failure only releases what is left (the communicator was aborted).
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int worldSize() const override;
  int device() const override;
  /// NCCL_VERSION_CODE of the loaded library (e.g. 22809 for 2.28.9).
  int version() const;
  void setComputeStream(void* stream) override;

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
  /// The transfers in one ncclGroupStart / ncclGroupEnd, one operation on the communication
  /// stream (its description names the group; each NCCL call's error names its transfer).
  std::unique_ptr<Work> sendRecv(const std::vector<P2pTransfer>& transfers, const std::string& name) override;

  /// A group communicator (Communicator::subgroup; DeviceMesh's groups): the group forms on
  /// the bootstrap communicator (its subgroup, which checks that the members agree), then a
  /// new NCCL communicator starts over that host group exactly as the constructor does: the
  /// group's rank 0 draws a unique id and the group all-gathers it with every member's
  /// outcome, so a member that cannot start makes every member throw. Same device, timeout,
  /// step and hostWait as this one. ncclCommSplit is not used: it needs NCCL 2.18, and the
  /// backend accepts 2.10. The bootstrap passed to the constructor must outlive this
  /// communicator when groups are formed. Ranks in the group's messages are group ranks.
  std::unique_ptr<Communicator> subgroup(const std::vector<int>& ranks,
                                         const std::string& label) override;
  void setTimeout(double seconds) override;
  void setStep(int64_t step) override;
  CommStats stats() const override;

  struct Impl;  // internal

private:
  /// A group's communicator over its own host communicator, which it keeps alive.
  NcclCommunicator(std::unique_ptr<Communicator> groupBootstrap, const NcclOptions& options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::rt
