// One issued operation of MpiCommunicator and its schedule (internal to runtime/comm).
//
// A schedule is a list of rounds. A step posts its transfers (nonblocking sends and receives
// of contiguous bytes), waits for all of them, then runs its `after` action (a local copy or
// reduction). Rounds with no transfers only run the action.
#pragma once

#include "runtime/comm/Communicator.h"

#include <atomic>
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

/// The ranks a communicator spans: the world, or a group of it (DeviceMesh). Every group runs
/// on the world's progress thread and its duplicated MPI communicators: a schedule is built in
/// group ranks and its peers are then mapped to world ranks, so every message and report
/// names world ranks. Counters are per communicator.
struct Group {
  std::vector<int> members;  // world rank of each group rank, ascending
  int groupRank = 0;         // this rank's position in `members`
  std::string label;         // "" for the world; "tp", "dp,tp" for a group (in messages)
  uint64_t key = 0;          // identifies the member list (compared in the arrival handshake)
  // Caller's side.
  std::atomic<int64_t> seq{0};  // last collective number issued on this communicator
  std::atomic<int64_t> collectives{0}, payloadBytes{0}, currentStep{0};
  std::atomic<double> timeout{300.0};
  int size() const { return static_cast<int>(members.size()); }
};

/// A key of a member list (FNV-1a over the ranks), equal on every rank of the group.
uint64_t groupKey(const std::vector<int>& members);

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
  std::shared_ptr<const Group> group;  // the communicator it was issued on
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
/// "send 'act' (to rank 2, 400 bytes, step 3)"; on a group "all_reduce 'x' (collective #2 of
/// group tp, 16 bytes, step 0)". Ranks are world ranks.
std::string describe(const Op& op);

/// Fills op.rounds (and op.scratch) for rank `rank` of `world`. `data` is the in-place buffer
/// (all_reduce, broadcast, send, recv); `send`/`recv` the two buffers of the others. The
/// transfers' peers are ranks of [0, world).
void buildSchedule(Op& op, int rank, int world, void* data, const void* send, void* recv);

/// buildSchedule for op.group, then every peer mapped to its world rank (the root of a send
/// or recv too, so messages name world ranks).
void buildGroupSchedule(Op& op, void* data, const void* send, void* recv);

}  // namespace tessel::rt::comm
