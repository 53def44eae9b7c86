// The state of MpiCommunicator shared by its two source files (internal to runtime/comm):
// MpiCommunicator.cpp (the caller's side: issuing, Work handles) and MpiProgress.cpp (the
// progress thread). See MpiCommunicator.h for the promise.
#pragma once

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/MpiOp.h"

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::rt {
namespace comm {

constexpr int64_t kMaxMessage = int64_t{1} << 30;  // bytes per MPI message (int counts)
constexpr int kAnnounceTag = 1;
constexpr double kStuckSeconds = 10.0;  // wait() gives up on a silent progress thread

/// What a rank announces when it starts collective #seq (fixed size, sent as bytes).
struct Announce {
  int64_t seq = 0, count = 0, bytes = 0;
  uint64_t groupKey = 0;
  int32_t kind = 0, dtype = 0, reduce = 0, root = 0;
  char name[96] = {};
  char group[32] = {};  // the group's label ("" for the world)
};

inline Announce announceOf(const Op& op) {
  Announce a;
  a.seq = op.seq;
  a.count = op.count;
  a.bytes = op.bytes;
  a.kind = static_cast<int32_t>(op.kind);
  a.dtype = static_cast<int32_t>(op.dtype);
  a.reduce = static_cast<int32_t>(op.reduce);
  a.root = op.root;
  a.groupKey = op.group->key;
  std::strncpy(a.name, op.name.c_str(), sizeof(a.name) - 1);
  std::strncpy(a.group, op.group->label.c_str(), sizeof(a.group) - 1);
  return a;
}

/// The name of the barrier every rank's communicator runs on destruction, before MPI_Finalize:
/// a rank that issues it has ended (finished, or left after an error it reported).
inline constexpr const char* kFinalizeBarrier = "finalize";

inline bool isFinalizeBarrier(const Announce& a) {
  return static_cast<OpKind>(a.kind) == OpKind::Barrier && std::strcmp(a.name, kFinalizeBarrier) == 0;
}

inline bool sameCollective(const Announce& a, const Announce& b) {
  return a.seq == b.seq && a.groupKey == b.groupKey && a.count == b.count && a.kind == b.kind &&
         a.dtype == b.dtype &&
         a.reduce == b.reduce && a.root == b.root && std::strcmp(a.name, b.name) == 0;
}

/// The posted requests of one round of one op.
struct Running {
  std::shared_ptr<Op> op;
  std::vector<MPI_Request> requests;
  std::vector<int> expected;  // bytes a receive must get; -1 for sends
};

}  // namespace comm

struct MpiCommunicator::Impl {
  using Op = comm::Op;
  using Running = comm::Running;
  using Announce = comm::Announce;
  using Round = comm::Round;
  using OpKind = comm::OpKind;
  MpiOptions options;
  int rank = 0, world = 1, localRank = 0, localSize = 1;
  std::thread thread;

  // Shared between the caller and the progress thread.
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<std::shared_ptr<Op>> queue;
  bool stopping = false;
  std::atomic<bool> failed{false};
  std::atomic<int64_t> heartbeatNs{0};
  std::shared_ptr<comm::Group> worldGroup = std::make_shared<comm::Group>();
  std::unique_ptr<Communicator> worldView;  // the world's collectives (MpiGroupCommunicator)

  // Progress thread only.
  MPI_Comm dataComm = MPI_COMM_NULL, controlComm = MPI_COMM_NULL, p2pComm = MPI_COMM_NULL;
  std::deque<std::shared_ptr<Op>> fifo;
  Running front;  // the posted round of fifo.front()
  std::vector<bool> peerArrived;
  std::list<Running> p2p;
  std::vector<Announce> announceSlot;
  std::vector<MPI_Request> announceRecv;
  std::vector<std::deque<Announce>> announced;  // per peer, in order
  std::list<std::pair<std::unique_ptr<Announce>, MPI_Request>> announceSends;
  std::string firstError;
  int64_t completed = 0;  // collectives completed

  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void run(std::promise<std::string>& ready);
  std::string initialise();
  void finalise();
  bool pollAnnouncements();
  bool advanceFront();
  bool advanceP2p();
  void checkDeadlines();
  void fail(std::shared_ptr<Op> op, const std::string& message);  // by value: it clears the lists
  std::string post(Running& running, const Round& round, MPI_Comm comm, int tag);
  /// Tests the posted requests: 1 done, 0 pending, -1 failed (message in `error`).
  int test(Running& running, std::string& error);
  void updateStatus();
  /// Queues an operation of `group` for the progress thread (counted in the group's stats).
  std::shared_ptr<Op> issue(const std::shared_ptr<comm::Group>& group, OpKind kind,
                            const std::string& name, DType dtype, ReduceOp reduce, int64_t count,
                            int root, int64_t payload, void* data, const void* send, void* recv);
};

namespace comm {

/// The collectives of one Group on the world communicator's progress thread: the world's own
/// (MpiCommunicator forwards to it) and each group communicator of a DeviceMesh. Ranks,
/// roots and peers are group ranks; messages name world ranks. It must not outlive the
/// MpiCommunicator it came from.
class MpiGroupCommunicator final : public Communicator {
public:
  MpiGroupCommunicator(MpiCommunicator::Impl* impl, std::shared_ptr<Group> group)
      : impl_(impl), group_(std::move(group)) {}
  int rank() const override { return group_->groupRank; }
  int worldSize() const override { return group_->size(); }
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
  void setTimeout(double seconds) override;
  void setStep(int64_t step) override;
  CommStats stats() const override;

private:
  std::unique_ptr<Work> issue(OpKind kind, const std::string& name, DType dtype, ReduceOp reduce,
                              int64_t count, int root, int64_t payload, void* data,
                              const void* send, void* recv);
  MpiCommunicator::Impl* impl_;
  std::shared_ptr<Group> group_;
};

}  // namespace comm


}  // namespace tessel::rt
