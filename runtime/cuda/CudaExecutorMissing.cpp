// The GPU executor of a build without the CUDA toolkit's headers: constructing one fails
// with that reason (see runtime/CMakeLists.txt); everything else is unreachable.
#include "runtime/cuda/CudaExecutor.h"

#include <stdexcept>

namespace tessel::rt {

struct CudaExecutor::State {};

CudaExecutor::CudaExecutor(Program, const CudaBinary&, CudaExecutorOptions) {
  throw std::runtime_error("this build has no GPU executor: the CUDA headers (cuda.h, cublasLt.h) were not found "
                           "when it was compiled");
}
CudaExecutor::~CudaExecutor() = default;
std::string CudaExecutor::deviceName() const { return "none"; }
void CudaExecutor::initParameters(uint64_t) {}
void CudaExecutor::setInput(const std::string&, size_t, const void*, size_t) {}
void CudaExecutor::run(const std::string&) {}
std::vector<OutputView> CudaExecutor::outputs(const std::string&) const { return {}; }
void CudaExecutor::readBuffer(int, void*) const {}
void CudaExecutor::writeBuffer(int, const void*) {}
void CudaExecutor::synchronize() const {}
double CudaExecutor::deviceMilliseconds(const std::string&) const { return 0; }
CudaMemoryReport CudaExecutor::memory() const { return {}; }
bool CudaExecutor::usingGraphs() const { return false; }
void CudaExecutor::setCommunicator(Communicator*) {}
void CudaExecutor::setMesh(DeviceMesh*) {}
const CollectiveCounters& CudaExecutor::collectiveCounters() const {
  static const CollectiveCounters none;
  return none;
}

}  // namespace tessel::rt
