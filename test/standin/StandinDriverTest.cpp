// The stand-in CUDA driver, called through the runtime's own driver table (runtime/cuda/
// CudaApi.h; ctest points TESSEL_CUDA_LIBRARY_PATH at the stand-ins): device memory is not
// host memory, copies are bounds-checked, a buffer freed before its last use is a device
// fault, streams run concurrently and in order, event waits order them (and a removed wait
// shows as a wrong result), synchronisation waits, graphs replay what was captured, and
// kernels run their CUDA source on the SIMT harness with names and parameters checked.
#include "codegen/Nvrtc.h"
#include "runtime/ToolkitLibrary.h"
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/Driver.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

namespace tessel {
namespace {

using rt::cuda::DriverApi;

/// The driver with a current context and one stream, as the executor sets it up.
struct Device {
  const DriverApi& api = rt::cuda::driverApi();
  // Not in the runtime's table (the executor queues no host functions): from the same library.
  decltype(&::cuLaunchHostFunc) launchHostFunc = reinterpret_cast<decltype(&::cuLaunchHostFunc)>(
      dlsym(dlopen(api.library.c_str(), RTLD_NOW | RTLD_NOLOAD), "cuLaunchHostFunc"));
  CUcontext context = nullptr;
  Device() {
    EXPECT_NE(launchHostFunc, nullptr);
    EXPECT_EQ(api.cuInit(0), CUDA_SUCCESS) << api.library;
    EXPECT_EQ(api.cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    EXPECT_EQ(api.cuCtxSetCurrent(context), CUDA_SUCCESS);
  }
  CUstream stream() {
    CUstream s = nullptr;
    EXPECT_EQ(api.cuStreamCreate(&s, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    return s;
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(api.cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    return p;
  }
  /// Queues `f` on `s` as a host function.
  void host(CUstream s, std::function<void()>* f) {
    ASSERT_EQ(launchHostFunc(s, [](void* p) { (*static_cast<std::function<void()>*>(p))(); }, f), CUDA_SUCCESS);
  }
};

TEST(StandinMemory, TheRuntimeOpensTheStandinFromTheLibraryPath) {
  Device d;
  EXPECT_NE(d.api.library.find("standin/lib/libcuda.so.1"), std::string::npos) << d.api.library;
  char name[64] = {};
  ASSERT_EQ(d.api.cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
  EXPECT_STREQ(name, "Tessel stand-in (CPU)");
}

TEST(StandinMemory, DeviceMemoryIsNotHostMemory) {
  Device d;
  CUdeviceptr p = d.alloc(64);
  float v[16] = {1, 2, 3};
  ASSERT_EQ(d.api.cuMemcpyHtoD(p, v, sizeof v), CUDA_SUCCESS);
  float back[16] = {};
  ASSERT_EQ(d.api.cuMemcpyDtoH(back, p, sizeof back), CUDA_SUCCESS);
  EXPECT_EQ(back[2], 3.0f);
  // A host dereference of a device pointer faults, as on a GPU, instead of reading data.
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the stand-in's stream threads are running
  EXPECT_DEATH((void)*reinterpret_cast<volatile float*>(p), "");
}

TEST(StandinMemory, CallsNeedACurrentContext) {
  Device d;  // this thread has one; a new thread has none until it sets it, as in CUDA
  CUresult without = CUDA_SUCCESS, with = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    CUdeviceptr p = 0;
    without = d.api.cuMemAlloc(&p, 16);
    d.api.cuCtxSetCurrent(d.context);
    with = d.api.cuMemAlloc(&p, 16);
  }).join();
  EXPECT_EQ(without, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(with, CUDA_SUCCESS);
}

TEST(StandinMemory, EveryCopyIsBoundsChecked) {
  Device d;
  CUstream s = d.stream();
  CUdeviceptr a = d.alloc(1000), b = d.alloc(1000);
  std::vector<char> host(1001, 7);
  EXPECT_EQ(d.api.cuMemcpyHtoD(a, host.data(), 1001), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d.api.cuMemcpyDtoH(host.data(), a + 1, 1000), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d.api.cuMemcpyDtoDAsync(b, a + 500, 501, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d.api.cuMemsetD8Async(b + 999, 0, 2, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d.api.cuMemcpyHtoDAsync(a + 1000, host.data(), 1, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d.api.cuMemcpyDtoDAsync(b, a + 500, 500, s), CUDA_SUCCESS);  // the exact end is fine
  EXPECT_EQ(d.api.cuStreamSynchronize(s), CUDA_SUCCESS);
}

TEST(StandinMemory, NewAndFreedMemoryReadsAsNaN) {
  Device d;
  CUdeviceptr p = d.alloc(16);
  float v[4];
  ASSERT_EQ(d.api.cuMemcpyDtoH(v, p, sizeof v), CUDA_SUCCESS);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[3])) << "never written memory is poisoned";
  ASSERT_EQ(d.api.cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(d.api.cuMemcpyDtoH(v, p, sizeof v), CUDA_ERROR_INVALID_VALUE) << "freed memory is refused";
  EXPECT_EQ(d.api.cuMemFree(p), CUDA_ERROR_INVALID_VALUE) << "a double free";
}

TEST(StandinMemory, ABufferFreedBeforeItsLastUseIsADeviceFault) {
  // Planted fault: the copy that last reads `a` is queued behind slow work, and `a` is freed
  // before the stream gets there (a missing synchronisation before a free).
  Device d;
  CUstream s = d.stream();
  CUdeviceptr a = d.alloc(256), b = d.alloc(256);
  std::function<void()> slow = [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); };
  d.host(s, &slow);
  ASSERT_EQ(d.api.cuMemcpyDtoDAsync(b, a, 256, s), CUDA_SUCCESS);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(d.api.cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(d.api.cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cuMemcpyDtoDAsync source"), std::string::npos) << err;
  EXPECT_NE(err.find("was freed"), std::string::npos) << err;
  // As on a GPU, the fault is sticky.
  EXPECT_EQ(d.api.cuMemAlloc(&b, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST(StandinStreams, StreamsRunConcurrently) {
  // Work on s1 waits for work on s2, queued later: only concurrent streams finish it.
  Device d;
  CUstream s1 = d.stream(), s2 = d.stream();
  std::promise<void> signal;
  std::future<void> signalled = signal.get_future();
  std::atomic<bool> met{false};
  std::function<void()> wait = [&] { met = signalled.wait_for(std::chrono::seconds(10)) == std::future_status::ready; };
  std::function<void()> fire = [&] { signal.set_value(); };
  d.host(s1, &wait);
  d.host(s2, &fire);
  ASSERT_EQ(d.api.cuStreamSynchronize(s1), CUDA_SUCCESS);
  EXPECT_TRUE(met);
}

/// Writes 42 into `buffer` on `producer` after 100 ms, then copies it to `out` on `consumer`,
/// ordered by an event unless `withWait` is false; returns what `out` holds.
int32_t produceAndConsume(Device& d, bool withWait) {
  CUstream producer = d.stream(), consumer = d.stream();
  CUdeviceptr buffer = d.alloc(4), out = d.alloc(4);
  EXPECT_EQ(d.api.cuMemsetD8Async(buffer, 0, 4, producer), CUDA_SUCCESS);
  EXPECT_EQ(d.api.cuStreamSynchronize(producer), CUDA_SUCCESS);
  std::function<void()> slow = [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); };
  d.host(producer, &slow);
  int32_t value = 42;
  EXPECT_EQ(d.api.cuMemcpyHtoDAsync(buffer, &value, 4, producer), CUDA_SUCCESS);
  CUevent ready = nullptr;
  EXPECT_EQ(d.api.cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  EXPECT_EQ(d.api.cuEventRecord(ready, producer), CUDA_SUCCESS);
  if (withWait) {
    EXPECT_EQ(d.api.cuStreamWaitEvent(consumer, ready, 0), CUDA_SUCCESS);
  }
  EXPECT_EQ(d.api.cuMemcpyDtoDAsync(out, buffer, 4, consumer), CUDA_SUCCESS);
  EXPECT_EQ(d.api.cuStreamSynchronize(consumer), CUDA_SUCCESS);
  int32_t got = -1;
  EXPECT_EQ(d.api.cuMemcpyDtoH(&got, out, 4), CUDA_SUCCESS);
  return got;
}

TEST(StandinStreams, AnEventWaitOrdersTwoStreams) {
  Device d;
  EXPECT_EQ(produceAndConsume(d, true), 42);
}

TEST(StandinStreams, ARemovedEventWaitIsAWrongResult) {
  // Planted fault: the wait between the producing and the consuming stream is removed. The
  // streams really run concurrently, so the consumer copies the buffer before it is written.
  Device d;
  EXPECT_EQ(produceAndConsume(d, false), 0);
}

TEST(StandinStreams, SynchronisationWaitsAndEventsTime) {
  Device d;
  CUstream s = d.stream();
  CUevent start = nullptr, stop = nullptr;
  ASSERT_EQ(d.api.cuEventCreate(&start, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(d.api.cuEventCreate(&stop, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  std::atomic<bool> done{false};
  std::function<void()> slow = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    done = true;
  };
  ASSERT_EQ(d.api.cuEventRecord(start, s), CUDA_SUCCESS);
  d.host(s, &slow);
  ASSERT_EQ(d.api.cuEventRecord(stop, s), CUDA_SUCCESS);
  ASSERT_EQ(d.api.cuEventSynchronize(stop), CUDA_SUCCESS);
  EXPECT_TRUE(done);
  float ms = 0;
  ASSERT_EQ(d.api.cuEventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
  EXPECT_GE(ms, 50.0f);  // the host function slept 50 ms between the two records
}

TEST(StandinGraphs, CaptureRecordsAndReplayRuns) {
  Device d;
  CUstream s = d.stream();
  std::atomic<int> runs{0};
  std::function<void()> count = [&] { ++runs; };
  ASSERT_EQ(d.api.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  d.host(s, &count);
  CUgraph graph = nullptr;
  ASSERT_EQ(d.api.cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
  ASSERT_EQ(d.api.cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(runs, 0) << "captured work must not run";
  CUgraphExec exec = nullptr;
  ASSERT_EQ(d.api.cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(d.api.cuGraphLaunch(exec, s), CUDA_SUCCESS);
  ASSERT_EQ(d.api.cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(d.api.cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(d.api.cuGraphDestroy(graph), CUDA_SUCCESS);
}

TEST(StandinGraphs, SynchronisingDuringACaptureInvalidatesIt) {
  Device d;
  CUstream s = d.stream();
  ASSERT_EQ(d.api.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(d.api.cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph = nullptr;
  EXPECT_EQ(d.api.cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(graph, nullptr);
}

/// A module of two kernels, compiled by NVRTC into the cubin cache (where the stand-in finds
/// the source).
CUmodule loadKernels(Device& d) {
  const std::string source = R"(
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] += a * x[i];
}
extern "C" __global__ void block_sum(float* out, const float* in) {
  __shared__ float part[64];
  part[threadIdx.x] = in[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  for (int s = 32; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
)";
  CudaModule m = compileCuda(source);
  CUmodule module = nullptr;
  EXPECT_EQ(d.api.cuModuleLoadData(&module, m.cubin.data()), CUDA_SUCCESS);
  return module;
}

TEST(StandinKernels, KernelsRunTheirSourceWithTheirGridAndBlock) {
  Device d;
  CUmodule module = loadKernels(d);
  ASSERT_NE(module, nullptr);
  CUfunction axpy = nullptr, sum = nullptr;
  ASSERT_EQ(d.api.cuModuleGetFunction(&axpy, module, "axpy"), CUDA_SUCCESS);
  ASSERT_EQ(d.api.cuModuleGetFunction(&sum, module, "block_sum"), CUDA_SUCCESS);
  CUstream s = d.stream();
  const int n = 3 * 64;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 7), y[i] = 1.0f;
  CUdeviceptr dx = d.alloc(n * 4), dy = d.alloc(n * 4), dout = d.alloc(3 * 4);
  ASSERT_EQ(d.api.cuMemcpyHtoD(dx, x.data(), n * 4), CUDA_SUCCESS);
  ASSERT_EQ(d.api.cuMemcpyHtoD(dy, y.data(), n * 4), CUDA_SUCCESS);
  float a = 2.0f;
  void* axpyArgs[] = {&dy, &dx, &a, const_cast<int*>(&n)};
  ASSERT_EQ(d.api.cuLaunchKernel(axpy, 2, 1, 1, 32, 1, 1, 0, s, axpyArgs, nullptr), CUDA_SUCCESS);
  void* sumArgs[] = {&dout, &dy};
  ASSERT_EQ(d.api.cuLaunchKernel(sum, 3, 1, 1, 64, 1, 1, 0, s, sumArgs, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(d.api.cuStreamSynchronize(s), CUDA_SUCCESS);
  float out[3];
  ASSERT_EQ(d.api.cuMemcpyDtoH(out, dout, sizeof out), CUDA_SUCCESS);
  for (int b = 0; b < 3; ++b) {
    float want = 0;  // small integers: every sum is exact in f32
    for (int i = 0; i < 64; ++i) want += 1.0f + 2.0f * x[b * 64 + i];
    EXPECT_EQ(out[b], want) << "block " << b;
  }
}

TEST(StandinKernels, NamesAndParameterCountsAreChecked) {
  Device d;
  CUmodule module = loadKernels(d);
  ASSERT_NE(module, nullptr);
  CUfunction f = nullptr;
  EXPECT_EQ(d.api.cuModuleGetFunction(&f, module, "axpy_typo"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(d.api.cuModuleGetFunction(&f, module, "axpy"), CUDA_SUCCESS);
  size_t offset = 0, size = 0, count = 0;
  while (d.api.cuFuncGetParamInfo(f, count, &offset, &size) == CUDA_SUCCESS) ++count;
  EXPECT_EQ(count, 4u);
  EXPECT_EQ(d.api.cuFuncGetParamInfo(f, 2, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(offset, 16u);  // two pointers, then the float
  EXPECT_EQ(size, 4u);
}

TEST(StandinKernels, APointerArgumentOutsideAnyAllocationIsADeviceFault) {
  Device d;
  CUmodule module = loadKernels(d);
  CUfunction sum = nullptr;
  ASSERT_EQ(d.api.cuModuleGetFunction(&sum, module, "block_sum"), CUDA_SUCCESS);
  CUstream s = d.stream();
  CUdeviceptr out = d.alloc(4);
  float host[64] = {};
  void* hostPointer = host;  // a host address passed where a device pointer belongs
  void* args[] = {&out, &hostPointer};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(d.api.cuLaunchKernel(sum, 1, 1, 1, 64, 1, 1, 0, s, args, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(d.api.cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("argument 1 of kernel block_sum"), std::string::npos) << err;
}

TEST(StandinLibraryPath, AFolderWithoutTheLibrariesIsAnErrorNotAFallback) {
  // The real cuBLASLt of the toolkit may be installed: naming a folder must not fall back to it.
  ::setenv("TESSEL_CUDA_LIBRARY_PATH", "/nonexistent-standin-folder", 1);
  const rt::CudaDriverStatus& driver = rt::probeCudaDriver();
  EXPECT_FALSE(driver.loaded);
  EXPECT_NE(driver.why.find("/nonexistent-standin-folder/libcuda.so.1 (from $TESSEL_CUDA_LIBRARY_PATH)"),
            std::string::npos)
      << driver.why;
  try {
    rt::openToolkitLibrary("cuBLASLt", "libcublasLt.so.13", "TESSEL_STANDIN_TEST_UNSET");
    ADD_FAILURE() << "opened a cuBLASLt outside the named folder";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/nonexistent-standin-folder/libcublasLt.so.13"), std::string::npos) << what;
    EXPECT_EQ(what.find("/usr/local/cuda"), std::string::npos) << what;
  }
}

TEST(StandinLibraryPath, UnsetTheDriverProbeIsUnchanged) {
  // Without the variable the probe opens libcuda.so.1 by its soname, as before: on a machine
  // without a driver it refuses with the same words (tools/device.test checks the CLI's).
  ::unsetenv("TESSEL_CUDA_LIBRARY_PATH");
  EXPECT_EQ(rt::cudaLibraryPath("libcuda.so.1"), "libcuda.so.1");
  const rt::CudaDriverStatus& driver = rt::probeCudaDriver();
  if (driver.loaded) GTEST_SKIP() << "this machine has a CUDA driver";
  EXPECT_EQ(driver.why.rfind("the CUDA driver libcuda.so.1 cannot be loaded (", 0), 0u) << driver.why;
  EXPECT_NE(driver.why.find("); this machine has no NVIDIA driver"), std::string::npos) << driver.why;
}

}  // namespace
}  // namespace tessel
