// The stand-in's device, context and error calls, and its sticky fault state.
//
// The device: $TESSEL_STANDIN_DEVICES devices (default 1, at most 8), each "Tessel stand-in
// (CPU)", compute capability 9.0 (the cubins Tessel builds by default are sm_90), 16 GiB
// shared by all of them. Attributes Tessel does not ask for are refused, not guessed.
#include "test/standin/Standin.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

struct CUctx_st {
  int device = 0;
  int retained = 0;
};

namespace tessel::standin {
namespace {

std::atomic<bool> gInitialised{false};
std::atomic<bool> gFaulted{false};
std::mutex gFaultMutex;

constexpr int kMaxDevices = 8;
CUctx_st gContexts[kMaxDevices];
thread_local CUctx_st* tCurrent = nullptr;

int deviceCount() {
  static const int count = [] {
    const char* v = std::getenv("TESSEL_STANDIN_DEVICES");
    int n = v && *v ? std::atoi(v) : 1;
    return n < 1 ? 1 : n > kMaxDevices ? kMaxDevices : n;
  }();
  return count;
}

}  // namespace

CUresult fail(CUresult rc, const std::string& call, const std::string& reason) {
  std::fprintf(stderr, "tessel stand-in: %s: %s\n", call.c_str(), reason.c_str());
  return rc;
}

void fault(const std::string& what) {
  std::lock_guard<std::mutex> lock(gFaultMutex);
  if (!gFaulted.exchange(true))
    std::fprintf(stderr, "tessel stand-in: device fault in %s; every later call fails\n", what.c_str());
}

CUresult status() {
  if (!gInitialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (gFaulted) return CUDA_ERROR_ILLEGAL_ADDRESS;
  if (inHostFunction())
    return fail(CUDA_ERROR_NOT_PERMITTED, "a host function", "host functions must not call the CUDA API");
  return CUDA_SUCCESS;
}

CUresult contextStatus(const char* call) {
  if (CUresult rc = status()) return rc;
  return tCurrent ? CUDA_SUCCESS
                  : fail(CUDA_ERROR_INVALID_CONTEXT, call, "no current context on this thread (cuCtxSetCurrent)");
}

}  // namespace tessel::standin

using namespace tessel::standin;

CUresult cuInit(unsigned flags) {
  if (flags != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuInit", "flags must be 0");
  gInitialised = true;
  return gFaulted ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;  // the headers' version: the stand-in implements that API
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult rc, const char** name) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  switch (rc) {
#define TESSEL_NAME(code) \
  case code: *name = #code; return CUDA_SUCCESS;
    TESSEL_NAME(CUDA_SUCCESS)
    TESSEL_NAME(CUDA_ERROR_INVALID_VALUE)
    TESSEL_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    TESSEL_NAME(CUDA_ERROR_NOT_INITIALIZED)
    TESSEL_NAME(CUDA_ERROR_INVALID_CONTEXT)
    TESSEL_NAME(CUDA_ERROR_INVALID_IMAGE)
    TESSEL_NAME(CUDA_ERROR_INVALID_HANDLE)
    TESSEL_NAME(CUDA_ERROR_NOT_FOUND)
    TESSEL_NAME(CUDA_ERROR_NOT_READY)
    TESSEL_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    TESSEL_NAME(CUDA_ERROR_LAUNCH_FAILED)
    TESSEL_NAME(CUDA_ERROR_ILLEGAL_STATE)
    TESSEL_NAME(CUDA_ERROR_NOT_PERMITTED)
    TESSEL_NAME(CUDA_ERROR_NOT_SUPPORTED)
    TESSEL_NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    TESSEL_NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    TESSEL_NAME(CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
    TESSEL_NAME(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
    TESSEL_NAME(CUDA_ERROR_INVALID_DEVICE)
    TESSEL_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
#undef TESSEL_NAME
    default: *name = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult rc, const char** text) {
  if (!text) return CUDA_ERROR_INVALID_VALUE;
  const char* name = nullptr;
  if (CUresult r = cuGetErrorName(rc, &name)) return r;
  switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: *text = "an illegal memory access was encountered (see the stand-in's message above)"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
    default: *text = "see the stand-in's message above"; break;
  }
  if (rc == CUDA_SUCCESS) *text = "no error";
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (CUresult rc = status(); rc == CUDA_ERROR_NOT_INITIALIZED) return rc;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = deviceCount();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (CUresult rc = status()) return rc;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= deviceCount())
    return fail(CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet", fmt::format("device {} of {}", ordinal, deviceCount()));
  *device = ordinal;
  return CUDA_SUCCESS;
}

namespace {
CUresult checkDevice(CUdevice d, const char* call) {
  if (CUresult rc = status()) return rc;
  return d < 0 || d >= deviceCount() ? fail(CUDA_ERROR_INVALID_DEVICE, call, fmt::format("device {}", d))
                                     : CUDA_SUCCESS;
}
}  // namespace

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (CUresult rc = checkDevice(device, "cuDeviceGetName")) return rc;
  if (!name || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(length), "Tessel stand-in (CPU)");
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (CUresult rc = checkDevice(device, "cuDeviceGetAttribute")) return rc;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 48 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = device + 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = 0; break;
    default:
      return fail(CUDA_ERROR_NOT_SUPPORTED, "cuDeviceGetAttribute",
                  fmt::format("attribute {} is not modelled", static_cast<int>(attribute)));
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  if (CUresult rc = checkDevice(device, "cuDeviceTotalMem")) return rc;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = totalBytes();
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (CUresult rc = checkDevice(device, "cuDevicePrimaryCtxRetain")) return rc;
  if (!context) return CUDA_ERROR_INVALID_VALUE;
  gContexts[device].device = device;
  ++gContexts[device].retained;
  *context = &gContexts[device];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  if (CUresult rc = checkDevice(device, "cuDevicePrimaryCtxRelease"); rc && rc != CUDA_ERROR_ILLEGAL_ADDRESS)
    return rc;
  if (gContexts[device].retained <= 0)
    return fail(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease", "released more often than retained");
  --gContexts[device].retained;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (CUresult rc = status()) return rc;
  if (context && (context < gContexts || context >= gContexts + kMaxDevices || context->retained <= 0))
    return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent", "not a retained primary context");
  tCurrent = context;
  return CUDA_SUCCESS;
}

// NVRTC opens libcuda.so.1 when it is loaded and asks it for its private export tables; the
// stand-in has none, and NVRTC then compiles as it does without a driver.
CUresult cuGetExportTable(const void** table, const CUuuid*) {
  if (table) *table = nullptr;
  return CUDA_ERROR_NOT_FOUND;
}
