// One issued operation of MpiCommunicator and its schedule (internal to runtime/comm).
//
// A schedule is a list of rounds. A step posts its transfers (nonblocking sends and receives
// of contiguous bytes), waits for all of them, then runs its `after` action (a local copy or
// reduction). Rounds with no transfers only run the action.
#pragma once

#include "runtime/comm/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessel::rt::comm {

enum class OpKind : int32_t { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Barrier,
                              Send, Recv };

/// "all_reduce", "all_gather", ... (the glossary's names).
const char* opKindName(OpKind kind);

struct Transfer {
  void* data = nullptr;
  int64_t bytes = 0;
  int peer = -1;
  bool isSend = false;
};

struct Round {
  std::vector<Transfer> transfers;
  std::function<void()> after;
};

struct Op {
  using Clock = std::chrono::steady_clock;

  // What was issued (immutable after issue).
  OpKind kind = OpKind::Barrier;
  std::string name;
  DType dtype = DType::F32;
  ReduceOp reduce = ReduceOp::Sum;
  int64_t count = 0;     // elements (per rank for all_to_all)
  int root = -1;         // broadcast root, or the peer of send/recv
  int64_t bytes = 0;     // the buffer this rank contributes (for recv: the message)
  int64_t step = 0;      // the training step at issue (setStep)
  double timeout = 0;    // seconds
  int64_t seq = 0;       // collective number #k (1-based); 0 for send/recv
  std::vector<Round> rounds;
  std::vector<std::unique_ptr<std::byte[]>> scratch;  // accumulators owned by the schedule

  // Progress-thread state.
  bool started = false;
  size_t nextRound = 0;
  bool roundPosted = false;
  Clock::time_point startedAt, deadline;

  // Completion, shared with the Work handle.
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  std::string error;  // empty on success

  bool isPointToPoint() const { return kind == OpKind::Send || kind == OpKind::Recv; }
  /// Marks the op finished (error empty = success) and wakes its waiters.
  void finish(const std::string& err);
};

/// "all_reduce 'grad.w' (collective #5, 4004 bytes, step 3)", or for point to point
/// "send 'act' (to rank 2, 400 bytes, step 3)".
std::string describe(const Op& op);

/// Fills op.rounds (and op.scratch) for rank `rank` of `world`. `data` is the in-place buffer
/// (all_reduce, broadcast, send, recv); `send`/`recv` the two buffers of the others.
void buildSchedule(Op& op, int rank, int world, void* data, const void* send, void* recv);

}  // namespace tessel::rt::comm
