// The world-size-1 communicator: a plain run without a launcher. No MPI is involved.
//
// Promise: every collective completes at issue (the returned Work is already done) with the
// result a one-rank group defines: all_reduce leaves the data as it is (Sum and Max over one rank;
// Avg divides by 1), all_gather / reduce_scatter / all_to_all copy send to recv, broadcast
// from root 0 is a no-op. The counters count exactly what an MPI run of one rank counts
// (Communicator.h), and bad arguments throw the same CommError messages. send/recv have no
// peer in a group of one and always throw.
#pragma once

#include "runtime/comm/Communicator.h"

#include <atomic>

namespace tessel::rt {

class SingleCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
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
  /// The only group of one rank, {0}: a new SingleCommunicator with this one's step and timeout.
  std::unique_ptr<Communicator> subgroup(const std::vector<int>& ranks,
                                         const std::string& label) override;
  /// Throws CommError unless seconds > 0 (kept for symmetry; nothing here can time out).
  void setTimeout(double seconds) override;
  void setStep(int64_t step) override { step_ = step; }
  CommStats stats() const override;

private:
  std::unique_ptr<Work> issued(int64_t payloadBytes);
  std::atomic<int64_t> collectives_{0}, payloadBytes_{0};
  double timeout_ = 300.0;
  int64_t step_ = 0;
};

}  // namespace tessel::rt
