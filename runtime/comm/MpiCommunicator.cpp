// The caller's side of MpiCommunicator: issuing operations and their Work handles (see
// MpiCommunicator.h; the progress thread is in MpiProgress.cpp).
#include "runtime/comm/MpiImpl.h"

#include "runtime/comm/Reduce.h"
#include "runtime/comm/SigtermReport.h"
#include "runtime/comm/World.h"

#include <fmt/format.h>

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


std::shared_ptr<Op> MpiCommunicator::Impl::issue(OpKind kind, const std::string& name,
                                                 DType dtype, ReduceOp reduce, int64_t count,
                                                 int root, int64_t payload, void* data,
                                                 const void* send, void* recv) {
  auto op = std::make_shared<Op>();
  op->kind = kind;
  op->name = name;
  op->dtype = dtype;
  op->reduce = reduce;
  op->count = count;
  op->root = root;
  op->bytes = kind == OpKind::Recv ? count * dtypeBytes(dtype) : payload;
  op->step = currentStep.load();
  op->timeout = timeout.load();
  if (!op->isPointToPoint()) op->seq = ++seq;
  buildSchedule(*op, rank, world, data, send, recv);
  collectives += 1;
  payloadBytes += payload;
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
  impl_->timeout = options.timeoutSeconds;
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
  checkCount("all_reduce", name, count, data, data);
  return std::make_unique<MpiWork>(
      impl_->issue(OpKind::AllReduce, name, dtype, op, count, -1, count * dtypeBytes(dtype), data,
                   nullptr, nullptr),
      impl_.get());
}

std::unique_ptr<Work> MpiCommunicator::allGather(const void* send, void* recv, int64_t n,
                                                 DType dtype, const std::string& name) {
  checkCount("all_gather", name, n, send, recv);
  return std::make_unique<MpiWork>(
      impl_->issue(OpKind::AllGather, name, dtype, ReduceOp::Sum, n, -1, n * dtypeBytes(dtype),
                   nullptr, send, recv),
      impl_.get());
}

std::unique_ptr<Work> MpiCommunicator::reduceScatter(const void* send, void* recv, int64_t n,
                                                     DType dtype, ReduceOp op,
                                                     const std::string& name) {
  checkCount("reduce_scatter", name, n, send, recv);
  return std::make_unique<MpiWork>(
      impl_->issue(OpKind::ReduceScatter, name, dtype, op, n, -1, n * dtypeBytes(dtype), nullptr,
                   send, recv),
      impl_.get());
}

std::unique_ptr<Work> MpiCommunicator::allToAll(const void* send, void* recv, int64_t countPerRank,
                                                DType dtype, const std::string& name) {
  checkCount("all_to_all", name, countPerRank, send, recv);
  return std::make_unique<MpiWork>(
      impl_->issue(OpKind::AllToAll, name, dtype, ReduceOp::Sum, countPerRank, -1,
                   countPerRank * impl_->world * dtypeBytes(dtype), nullptr, send, recv),
      impl_.get());
}

std::unique_ptr<Work> MpiCommunicator::broadcast(void* data, int64_t count, DType dtype, int root,
                                                 const std::string& name) {
  checkCount("broadcast", name, count, data, data);
  checkRoot("broadcast", name, root, impl_->world);
  return std::make_unique<MpiWork>(
      impl_->issue(OpKind::Broadcast, name, dtype, ReduceOp::Sum, count, root,
                   count * dtypeBytes(dtype), data, nullptr, nullptr),
      impl_.get());
}

std::unique_ptr<Work> MpiCommunicator::send(const void* data, int64_t count, DType dtype, int peer,
                                            const std::string& name) {
  checkCount("send", name, count, data, data);
  checkPeer("send", name, peer, impl_->rank, impl_->world);
  return std::make_unique<MpiWork>(
      impl_->issue(OpKind::Send, name, dtype, ReduceOp::Sum, count, peer,
                   count * dtypeBytes(dtype), const_cast<void*>(data), nullptr, nullptr),
      impl_.get());
}

std::unique_ptr<Work> MpiCommunicator::recv(void* data, int64_t count, DType dtype, int peer,
                                            const std::string& name) {
  checkCount("recv", name, count, data, data);
  checkPeer("recv", name, peer, impl_->rank, impl_->world);
  return std::make_unique<MpiWork>(impl_->issue(OpKind::Recv, name, dtype, ReduceOp::Sum, count,
                                                peer, 0, data, nullptr, nullptr),
                                   impl_.get());
}

std::unique_ptr<Work> MpiCommunicator::barrier(const std::string& name) {
  return std::make_unique<MpiWork>(impl_->issue(OpKind::Barrier, name, DType::F32, ReduceOp::Sum,
                                                0, -1, 0, nullptr, nullptr, nullptr),
                                   impl_.get());
}

void MpiCommunicator::setTimeout(double seconds) {
  checkTimeoutSeconds(seconds);
  impl_->timeout = seconds;
}

void MpiCommunicator::setStep(int64_t step) { impl_->currentStep = step; }

CommStats MpiCommunicator::stats() const {
  return CommStats{impl_->collectives.load(), impl_->payloadBytes.load()};
}

}  // namespace tessel::rt
