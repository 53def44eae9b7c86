// Device memory for `tessel bench-comm --device cuda` (CommBench.h's BenchMemory): buffers on
// one GPU through the driver table the GPU executor uses (runtime/cuda/CudaApi.h), in the
// device's primary context, the one the NCCL communicator works in. Built only with the CUDA
// headers; without them every construction throws saying so.
#include "runtime/tools/tessel/CommBench.h"

#ifdef TESSEL_CLI_HAVE_CUDA
#include "runtime/cuda/CudaApi.h"
#endif

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace tessel::cli {

#ifdef TESSEL_CLI_HAVE_CUDA
namespace {

class CudaMemory final : public BenchMemory {
public:
  explicit CudaMemory(int ordinal) : api_(rt::cuda::driverApi()) {
    rt::cuda::check(api_, api_.cuInit(0), "cuInit");
    rt::cuda::check(api_, api_.cuDeviceGet(&device_, ordinal), fmt::format("cuDeviceGet({})", ordinal));
    rt::cuda::check(api_, api_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
    rt::cuda::check(api_, api_.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  }
  ~CudaMemory() override {
    release();
    api_.cuDevicePrimaryCtxRelease(device_);
  }
  void* allocate(int64_t bytes) override {
    CUdeviceptr p = 0;
    rt::cuda::check(api_, api_.cuMemAlloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))),
                    fmt::format("cuMemAlloc of {} bytes", bytes));
    buffers_.push_back(p);
    return reinterpret_cast<void*>(p);
  }
  void release() override {
    for (CUdeviceptr p : buffers_) api_.cuMemFree(p);
    buffers_.clear();
  }
  void upload(void* device, const void* host, int64_t bytes) override {
    if (bytes > 0)
      rt::cuda::check(api_, api_.cuMemcpyHtoD(ptr(device), host, static_cast<size_t>(bytes)), "cuMemcpyHtoD");
  }
  void download(void* host, const void* device, int64_t bytes) override {
    if (bytes > 0)
      rt::cuda::check(api_, api_.cuMemcpyDtoH(host, ptr(device), static_cast<size_t>(bytes)), "cuMemcpyDtoH");
  }
  void zero(void* device, int64_t bytes) override {
    if (bytes <= 0) return;
    rt::cuda::check(api_, api_.cuMemsetD8Async(ptr(device), 0, static_cast<size_t>(bytes), nullptr), "cuMemsetD8Async");
    rt::cuda::check(api_, api_.cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  }

private:
  static CUdeviceptr ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }
  const rt::cuda::DriverApi& api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::vector<CUdeviceptr> buffers_;
};

}  // namespace

std::unique_ptr<BenchMemory> cudaMemory(int device) { return std::make_unique<CudaMemory>(device); }
#else
std::unique_ptr<BenchMemory> cudaMemory(int) {
  throw std::runtime_error("--device cuda: this build has no GPU path (cuda.h and cublasLt.h were not found when it "
                           "was built); use --device cpu");
}
#endif

}  // namespace tessel::cli
