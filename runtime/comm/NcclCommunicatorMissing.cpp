// The NCCL backend of a build without the CUDA toolkit's cuda.h or NCCL's nccl.h:
// constructing one fails with that reason (see runtime/CMakeLists.txt).
#include "runtime/comm/NcclCommunicator.h"

namespace tessel::rt {

struct NcclCommunicator::Impl {};

NcclCommunicator::NcclCommunicator(Communicator&, const NcclOptions&) {
  throw CommError("this build has no NCCL communicator: the CUDA headers (cuda.h) or NCCL's nccl.h were not "
                  "found when it was compiled");
}
NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> groupBootstrap, const NcclOptions& options)
    : NcclCommunicator(*groupBootstrap, options) {}
std::unique_ptr<Communicator> NcclCommunicator::subgroup(const std::vector<int>&, const std::string&) { return {}; }
NcclCommunicator::~NcclCommunicator() = default;
int NcclCommunicator::rank() const { return 0; }
int NcclCommunicator::worldSize() const { return 1; }
int NcclCommunicator::device() const { return -1; }
int NcclCommunicator::version() const { return 0; }
void NcclCommunicator::setComputeStream(void*) {}
std::unique_ptr<Work> NcclCommunicator::allReduce(void*, int64_t, DType, ReduceOp, const std::string&) { return {}; }
std::unique_ptr<Work> NcclCommunicator::allGather(const void*, void*, int64_t, DType, const std::string&) { return {}; }
std::unique_ptr<Work> NcclCommunicator::reduceScatter(const void*, void*, int64_t, DType, ReduceOp,
                                                      const std::string&) {
  return {};
}
std::unique_ptr<Work> NcclCommunicator::allToAll(const void*, void*, int64_t, DType, const std::string&) { return {}; }
std::unique_ptr<Work> NcclCommunicator::broadcast(void*, int64_t, DType, int, const std::string&) { return {}; }
std::unique_ptr<Work> NcclCommunicator::send(const void*, int64_t, DType, int, const std::string&) { return {}; }
std::unique_ptr<Work> NcclCommunicator::recv(void*, int64_t, DType, int, const std::string&) { return {}; }
std::unique_ptr<Work> NcclCommunicator::sendRecv(const std::vector<P2pTransfer>&, const std::string&) { return {}; }
void NcclCommunicator::setTimeout(double) {}
void NcclCommunicator::setStep(int64_t) {}
CommStats NcclCommunicator::stats() const { return {}; }

}  // namespace tessel::rt
