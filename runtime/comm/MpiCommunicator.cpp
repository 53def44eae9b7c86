// The caller's side of MpiCommunicator: issuing operations and their Work handles (see
// MpiCommunicator.h; the progress thread is in MpiProgress.cpp).
#include "runtime/comm/MpiImpl.h"

#include "runtime/comm/Reduce.h"
#include "runtime/comm/SigtermReport.h"
#include "runtime/comm/World.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <chrono>
#include <future>

#include <cmath>

namespace tessel::rt {
using namespace comm;
namespace {

std::atomic<bool> mpiClaimed{false};  // MPI can be initialised once per process

class MpiWork final : public Work {
public:
  MpiWork(std::shared_ptr<Op> op, MpiCommunicator::Impl* impl) : op_(std::move(op)), impl_(impl) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(op_->mutex);
    while (!op_->finished) {
      op_->cv.wait_for(lock, std::chrono::milliseconds(200));
      if (op_->finished) break;
      double silent = (MpiCommunicator::Impl::nowNs() - impl_->heartbeatNs.load()) * 1e-9;
      if (silent > kStuckSeconds)
        throw CommError(fmt::format(
            "{} did not complete: the communication thread of rank {} has not responded for "
            "{:.0f} s (stuck in an MPI call)",
            describe(*op_), impl_->rank, silent));
    }
    if (!op_->error.empty()) throw CommError(op_->error);
  }
  bool test() override {
    std::lock_guard<std::mutex> lock(op_->mutex);
    return op_->finished;
  }

private:
  std::shared_ptr<Op> op_;
  MpiCommunicator::Impl* impl_;
};

}  // namespace


std::shared_ptr<Op> MpiCommunicator::Impl::issue(const std::shared_ptr<Group>& group, OpKind kind,
                                                 const std::string& name, DType dtype,
                                                 ReduceOp reduce, int64_t count, int root,
                                                 int64_t payload, void* data, const void* send,
                                                 void* recv) {
  auto op = std::make_shared<Op>();
  op->kind = kind;
  op->name = name;
  op->dtype = dtype;
  op->reduce = reduce;
  op->count = count;
  op->root = root;
  op->bytes = kind == OpKind::Recv ? count * dtypeBytes(dtype) : payload;
  op->group = group;
  // The training loop sets the world's step; a group's failure names it too (groups are
  // formed from the world, whose step only grows).
  op->step = std::max(group->currentStep.load(), worldGroup->currentStep.load());
  op->timeout = group->timeout.load();
  if (!op->isPointToPoint()) op->seq = ++group->seq;
  buildGroupSchedule(*op, data, send, recv);
  group->collectives += 1;
  group->payloadBytes += payload;
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(op);
  }
  wake.notify_one();
  return op;
}

MpiCommunicator::MpiCommunicator(const MpiOptions& options) : impl_(std::make_unique<Impl>()) {
  checkTimeoutSeconds(options.timeoutSeconds);
  if (mpiClaimed.exchange(true))
    throw CommError("MPI can be initialised only once per process; an MpiCommunicator already "
                    "exists or existed");
  impl_->options = options;
  impl_->worldGroup->timeout = options.timeoutSeconds;
  std::promise<std::string> ready;
  std::future<std::string> result = ready.get_future();
  Impl* impl = impl_.get();
  impl_->thread = std::thread([impl, &ready] { impl->run(ready); });
  // MPI_Init has no timeout of its own: a rank that never joins (stopped, crashed before
  // MPI_Init, not launched) would hang every other rank here.
  if (result.wait_for(std::chrono::duration<double>(options.timeoutSeconds)) !=
      std::future_status::ready) {
    int rank = 0;
    try {
      rank = detectWorld().rank;
    } catch (const std::exception&) {
    }
    abortJob(rank, fmt::format("MPI did not start within {} s (--comm-timeout): the timeout may be "
                               "too short for this launch, or a rank did not join MPI_Init "
                               "(stopped, crashed or not launched)",
                               options.timeoutSeconds));
  }
  std::string error = result.get();
  if (!error.empty()) {
    impl_->thread.join();
    throw CommError(error);
  }
  for (int r = 0; r < impl_->world; ++r) impl_->worldGroup->members.push_back(r);
  impl_->worldGroup->groupRank = impl_->rank;
  impl_->worldGroup->key = groupKey(impl_->worldGroup->members);
  impl_->worldView = std::make_unique<MpiGroupCommunicator>(impl_.get(), impl_->worldGroup);
  if (options.reportOnSigterm) installSigtermReport();
}

MpiCommunicator::~MpiCommunicator() {
  if (!impl_->failed) {
    // A barrier with the timeout first: MPI_Finalize synchronises with every rank and has no
    // timeout of its own, so a dead peer must be detected before it.
    try {
      barrier(kFinalizeBarrier)->wait();
    } catch (const CommError& e) {
      abortJob(impl_->rank, e.what());
    }
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_one();
  impl_->thread.join();
  if (impl_->options.reportOnSigterm) removeSigtermReport();
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::worldSize() const { return impl_->world; }
int MpiCommunicator::localRank() const { return impl_->localRank; }
int MpiCommunicator::localSize() const { return impl_->localSize; }

std::unique_ptr<Work> MpiCommunicator::allReduce(void* data, int64_t count, DType dtype,
                                                 ReduceOp op, const std::string& name) {
  return impl_->worldView->allReduce(data, count, dtype, op, name);
}
std::unique_ptr<Work> MpiCommunicator::allGather(const void* send, void* recv, int64_t n,
                                                 DType dtype, const std::string& name) {
  return impl_->worldView->allGather(send, recv, n, dtype, name);
}
std::unique_ptr<Work> MpiCommunicator::reduceScatter(const void* send, void* recv, int64_t n,
                                                     DType dtype, ReduceOp op,
                                                     const std::string& name) {
  return impl_->worldView->reduceScatter(send, recv, n, dtype, op, name);
}
std::unique_ptr<Work> MpiCommunicator::allToAll(const void* send, void* recv, int64_t countPerRank,
                                                DType dtype, const std::string& name) {
  return impl_->worldView->allToAll(send, recv, countPerRank, dtype, name);
}
std::unique_ptr<Work> MpiCommunicator::broadcast(void* data, int64_t count, DType dtype, int root,
                                                 const std::string& name) {
  return impl_->worldView->broadcast(data, count, dtype, root, name);
}
std::unique_ptr<Work> MpiCommunicator::send(const void* data, int64_t count, DType dtype, int peer,
                                            const std::string& name) {
  return impl_->worldView->send(data, count, dtype, peer, name);
}
std::unique_ptr<Work> MpiCommunicator::recv(void* data, int64_t count, DType dtype, int peer,
                                            const std::string& name) {
  return impl_->worldView->recv(data, count, dtype, peer, name);
}
void MpiCommunicator::setTimeout(double seconds) { impl_->worldView->setTimeout(seconds); }
void MpiCommunicator::setStep(int64_t step) { impl_->worldView->setStep(step); }
CommStats MpiCommunicator::stats() const { return impl_->worldView->stats(); }

std::unique_ptr<Work> MpiCommunicator::barrier(const std::string& name) {
  return std::make_unique<MpiWork>(impl_->issue(impl_->worldGroup, OpKind::Barrier, name,
                                                DType::F32, ReduceOp::Sum, 0, -1, 0, nullptr,
                                                nullptr, nullptr),
                                   impl_.get());
}

std::unique_ptr<Communicator> MpiCommunicator::subgroup(const std::vector<int>& ranks,
                                                        const std::string& label) {
  checkSubgroup(ranks, impl_->rank, impl_->world, label);
  auto group = std::make_shared<Group>();
  group->members = ranks;
  group->groupRank = static_cast<int>(std::find(ranks.begin(), ranks.end(), impl_->rank) - ranks.begin());
  group->label = label;
  group->key = groupKey(ranks);
  group->timeout = impl_->worldGroup->timeout.load();
  group->currentStep = impl_->worldGroup->currentStep.load();
  // Every rank must describe the same partition: each member of this rank's group must have
  // formed the same group (same members). One world all_gather of the keys checks it, with
  // the world's timeout, before any group collective can hang on a wrong peer.
  std::vector<uint64_t> keys(static_cast<size_t>(impl_->world));
  keys[static_cast<size_t>(impl_->rank)] = group->key;
  allGather(&keys[static_cast<size_t>(impl_->rank)], keys.data(), impl_->world * 2, DType::I32,
            "group " + label)
      ->wait();
  for (int m : ranks)
    if (keys[static_cast<size_t>(m)] != group->key)
      throw CommError(fmt::format("group {} on rank {} lists ranks {} but rank {} formed a different "
                                  "group: every rank must form its groups in the same order",
                                  label, impl_->rank, fmt::join(ranks, ", "), m));
  return std::make_unique<MpiGroupCommunicator>(impl_.get(), std::move(group));
}

std::unique_ptr<Work> MpiGroupCommunicator::issue(OpKind kind, const std::string& name, DType dtype,
                                                  ReduceOp reduce, int64_t count, int root,
                                                  int64_t payload, void* data, const void* send,
                                                  void* recv) {
  return std::make_unique<MpiWork>(
      impl_->issue(group_, kind, name, dtype, reduce, count, root, payload, data, send, recv), impl_);
}

std::unique_ptr<Work> MpiGroupCommunicator::allReduce(void* data, int64_t count, DType dtype,
                                                      ReduceOp op, const std::string& name) {
  checkCount("all_reduce", name, count, data, data);
  return issue(OpKind::AllReduce, name, dtype, op, count, -1, count * dtypeBytes(dtype), data,
               nullptr, nullptr);
}

std::unique_ptr<Work> MpiGroupCommunicator::allGather(const void* send, void* recv, int64_t n,
                                                      DType dtype, const std::string& name) {
  checkCount("all_gather", name, n, send, recv);
  return issue(OpKind::AllGather, name, dtype, ReduceOp::Sum, n, -1, n * dtypeBytes(dtype),
               nullptr, send, recv);
}

std::unique_ptr<Work> MpiGroupCommunicator::reduceScatter(const void* send, void* recv, int64_t n,
                                                          DType dtype, ReduceOp op,
                                                          const std::string& name) {
  checkCount("reduce_scatter", name, n, send, recv);
  return issue(OpKind::ReduceScatter, name, dtype, op, n, -1, n * dtypeBytes(dtype), nullptr,
               send, recv);
}

std::unique_ptr<Work> MpiGroupCommunicator::allToAll(const void* send, void* recv,
                                                     int64_t countPerRank, DType dtype,
                                                     const std::string& name) {
  checkCount("all_to_all", name, countPerRank, send, recv);
  return issue(OpKind::AllToAll, name, dtype, ReduceOp::Sum, countPerRank, -1,
               countPerRank * group_->size() * dtypeBytes(dtype), nullptr, send, recv);
}

std::unique_ptr<Work> MpiGroupCommunicator::broadcast(void* data, int64_t count, DType dtype,
                                                      int root, const std::string& name) {
  checkCount("broadcast", name, count, data, data);
  checkRoot("broadcast", name, root, group_->size());
  return issue(OpKind::Broadcast, name, dtype, ReduceOp::Sum, count, root,
               count * dtypeBytes(dtype), data, nullptr, nullptr);
}

std::unique_ptr<Work> MpiGroupCommunicator::send(const void* data, int64_t count, DType dtype,
                                                 int peer, const std::string& name) {
  checkCount("send", name, count, data, data);
  checkPeer("send", name, peer, group_->groupRank, group_->size());
  return issue(OpKind::Send, name, dtype, ReduceOp::Sum, count, peer, count * dtypeBytes(dtype),
               const_cast<void*>(data), nullptr, nullptr);
}

std::unique_ptr<Work> MpiGroupCommunicator::recv(void* data, int64_t count, DType dtype, int peer,
                                                 const std::string& name) {
  checkCount("recv", name, count, data, data);
  checkPeer("recv", name, peer, group_->groupRank, group_->size());
  return issue(OpKind::Recv, name, dtype, ReduceOp::Sum, count, peer, 0, data, nullptr, nullptr);
}

void MpiGroupCommunicator::setTimeout(double seconds) {
  checkTimeoutSeconds(seconds);
  group_->timeout = seconds;
}

void MpiGroupCommunicator::setStep(int64_t step) { group_->currentStep = step; }

CommStats MpiGroupCommunicator::stats() const {
  return CommStats{group_->collectives.load(), group_->payloadBytes.load()};
}

}  // namespace tessel::rt
