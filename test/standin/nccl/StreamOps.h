// The stand-in NCCL's communicators and how their operations reach a stream (internal to
// the library, test/standin/nccl). Tests only.
//
// Promise:
// - An NCCL call checks its arguments at once (the caller gets ncclInvalidArgument and the
//   reason in ncclGetLastError), its buffers too when the driver offers
//   tesselStandinTryHostAddress (every byte NCCL would touch must lie in one live device
//   allocation), then becomes an Op on device addresses. Outside a group it
//   is queued at once; inside ncclGroupStart/End, at the outermost ncclGroupEnd, one batch
//   per communicator (its collectives in call order, then its sends and receives together).
// - A batch is queued with the stand-in driver's cuLaunchHostFunc on the caller's stream, so
//   it runs on that stream's worker thread in stream order, after the events the stream
//   waits for. It turns each device range into a host view with tesselStandinHostAddress
//   when it runs (the driver aborts on a freed or out-of-bounds range), and runs the
//   collectives of test/standin/nccl/Collectives.h. Captured into a CUDA graph (the driver's
//   cuStreamIsCapturing says so, or the driver lacks that call), the batch is kept until
//   ncclCommDestroy, so replays rerun it.
// - A batch that fails (a peer ended, ranks disagree) records the communicator's
//   asynchronous error (ncclCommGetAsyncError: ncclRemoteError, ncclInvalidUsage or
//   ncclSystemError) with its text (ncclGetLastError), and aborts the transport so every
//   peer fails too instead of waiting; later batches of that communicator do nothing.
// - Planted faults, for the tests that must catch them (TESSEL_STANDIN_NCCL_FAULT, read at
//   ncclCommInitRank; never set outside those tests):
//     no-compute-wait: a batch starts when it is issued, on a thread of its own, as if the
//       communication stream did not wait for the event recorded on the compute stream;
//       the stream's host function only waits for it to finish;
//     no-done-wait: the stream's host function hands the batch to that thread and returns,
//       so work that waits for the collective's completion event (the compute stream's
//       cuStreamWaitEvent) goes on before the collective ran, as if that wait were removed.
//       The thread sleeps 50 ms first, so the reordering happens on every run.
//     peer-exits: rank 1 of every communicator ends its process (exit status 9, no cleanup) as
//       its second batch starts, so its peers' batch fails with ncclRemoteError.
#pragma once

#include "test/standin/nccl/Collectives.h"

#include <cuda.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::standin::nccl {

/// Sets the process's last error text (ncclGetLastError) and returns `rc`.
ncclResult_t fail(ncclResult_t rc, const std::string& text);
/// The last error text.
std::string lastError();

/// One NCCL call on device addresses.
struct Op {
  enum Kind { AllReduce, AllGather, ReduceScatter, Broadcast, Send, Recv } kind = AllReduce;
  CUdeviceptr send = 0, recv = 0;  // Send/Recv use `send` / `recv` only
  size_t count = 0;                // elements, as passed to the call
  DataType type = DataType::F32;
  RedOp op = RedOp::Sum;
  int peer = 0;  // root of a broadcast, peer of a send/receive
};

enum class Fault { None, NoComputeWait, NoDoneWait, PeerExits };

/// One rank of one communicator.
struct CommState {
  std::unique_ptr<SocketTransport> transport;
  std::unique_ptr<Collectives> core;
  int rank = 0, size = 1;
  Fault fault = Fault::None;
  std::mutex run;  // one batch at a time
  std::atomic<int> asyncError{ncclSuccess};
  std::atomic<bool> destroyed{false};
  int batches = 0;  // batches run (guarded by `run`)
  std::mutex keptMutex;
  std::vector<std::shared_ptr<void>> kept;  // batches captured into graphs (ncclCommDestroy clears)

  // The planted faults' thread: runs handed-over batches in order.
  std::mutex lateMutex;
  std::condition_variable lateCv;
  std::deque<std::function<void()>> late;
  bool lateStop = false;
  std::thread lateThread;

  ~CommState();
  /// Runs `f` on the planted faults' thread (started on first use), after the earlier ones.
  void runLate(std::function<void()> f);
};

/// A queued group of Ops of one communicator.
struct Batch {
  std::shared_ptr<CommState> comm;
  std::vector<Op> ops;
  /// Runs the ops (see the promise); records a failure as the asynchronous error.
  void run();
};

/// Queues `ops` of `comm` on `stream` (or keeps them for ncclGroupEnd inside a group).
ncclResult_t enqueue(const std::shared_ptr<CommState>& comm, CUstream stream, const Op& op);
/// ncclGroupStart / ncclGroupEnd of this thread.
ncclResult_t groupStart();
ncclResult_t groupEnd();

}  // namespace tessel::standin::nccl

/// The handle NCCL's API passes around (nccl.h declares struct ncclComm).
struct ncclComm {
  std::shared_ptr<tessel::standin::nccl::CommState> state;
};
