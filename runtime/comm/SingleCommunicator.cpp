// The world-size-1 communicator (see SingleCommunicator.h).
#include "runtime/comm/SingleCommunicator.h"

#include "runtime/comm/Reduce.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

namespace tessel::rt {
namespace {

/// A Work that is complete from the start.
struct DoneWork final : Work {
  void wait() override {}
  bool test() override { return true; }
};

/// memmove: send and recv may be the same buffer (in-place use).
void copyBytes(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(bytes));
}

}  // namespace

void checkTimeoutSeconds(double seconds) {
  if (!(seconds > 0 && seconds <= kMaxTimeoutSeconds))
    throw CommError(fmt::format("collective timeout must be a number of seconds in (0, {:g}], got {}",
                                kMaxTimeoutSeconds, seconds));
}

std::unique_ptr<Communicator> SingleCommunicator::subgroup(const std::vector<int>& ranks,
                                                           const std::string& label) {
  comm::checkSubgroup(ranks, 0, 1, label);
  auto group = std::make_unique<SingleCommunicator>();
  group->setStep(step_);
  group->setTimeout(timeout_);
  return group;
}

std::unique_ptr<Work> SingleCommunicator::issued(int64_t payloadBytes) {
  collectives_ += 1;
  payloadBytes_ += payloadBytes;
  return std::make_unique<DoneWork>();
}

std::unique_ptr<Work> SingleCommunicator::allReduce(void* data, int64_t count, DType dtype,
                                                    ReduceOp op, const std::string& name) {
  comm::checkCount("all_reduce", name, count, data, data);
  // One rank: the sum and the max are the value itself and Avg divides by 1, exactly, in every
  // dtype.
  return issued(count * dtypeBytes(dtype));
}

std::unique_ptr<Work> SingleCommunicator::allGather(const void* send, void* recv, int64_t n,
                                                    DType dtype, const std::string& name) {
  comm::checkCount("all_gather", name, n, send, recv);
  copyBytes(recv, send, n * dtypeBytes(dtype));
  return issued(n * dtypeBytes(dtype));
}

std::unique_ptr<Work> SingleCommunicator::reduceScatter(const void* send, void* recv, int64_t n,
                                                        DType dtype, ReduceOp op,
                                                        const std::string& name) {
  comm::checkCount("reduce_scatter", name, n, send, recv);
  copyBytes(recv, send, n * dtypeBytes(dtype));
  return issued(n * dtypeBytes(dtype));
}

std::unique_ptr<Work> SingleCommunicator::allToAll(const void* send, void* recv,
                                                   int64_t countPerRank, DType dtype,
                                                   const std::string& name) {
  comm::checkCount("all_to_all", name, countPerRank, send, recv);
  copyBytes(recv, send, countPerRank * dtypeBytes(dtype));
  return issued(countPerRank * dtypeBytes(dtype));
}

std::unique_ptr<Work> SingleCommunicator::broadcast(void* data, int64_t count, DType dtype,
                                                    int root, const std::string& name) {
  comm::checkCount("broadcast", name, count, data, data);
  comm::checkRoot("broadcast", name, root, 1);
  return issued(count * dtypeBytes(dtype));
}

std::unique_ptr<Work> SingleCommunicator::send(const void* data, int64_t count, DType dtype,
                                               int peer, const std::string& name) {
  comm::checkCount("send", name, count, data, data);
  comm::checkPeer("send", name, peer, 0, 1);
  return issued(count * dtypeBytes(dtype));  // unreachable: a group of one has no peer
}

std::unique_ptr<Work> SingleCommunicator::recv(void* data, int64_t count, DType dtype, int peer,
                                               const std::string& name) {
  comm::checkCount("recv", name, count, data, data);
  comm::checkPeer("recv", name, peer, 0, 1);
  return issued(0);  // unreachable
}

void SingleCommunicator::setTimeout(double seconds) {
  checkTimeoutSeconds(seconds);
  timeout_ = seconds;
}

CommStats SingleCommunicator::stats() const {
  return CommStats{collectives_.load(), payloadBytes_.load()};
}

}  // namespace tessel::rt
