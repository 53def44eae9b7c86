// A minimal "libcuda.so.1" for the stand-in NCCL's API test only (NcclApiTest.cpp), so the
// library's own checks, groups and errors are tested without the stand-in CUDA driver:
// "device" pointers are host pointers (tesselStandinHostAddress is the identity; the
// checking variant refuses addresses below 4096) and
// cuLaunchHostFunc runs the function at once on the calling thread (each test rank is a
// thread, so a collective blocks its rank's thread until the peers arrive, as a stream
// would). The end-to-end tests use the real stand-in driver (test/standin).
#include "test/standin/StandinDevice.h"

#include <cuda.h>

extern "C" {

CUresult cuLaunchHostFunc(CUstream, CUhostFn fn, void* userData) {
  fn(userData);
  return CUDA_SUCCESS;
}

void* tesselStandinHostAddress(CUdeviceptr p, size_t, const char*) { return reinterpret_cast<void*>(p); }

/// Addresses below 4096 are "not device memory" (so the library's call-time check is tested).
void* tesselStandinTryHostAddress(CUdeviceptr p, size_t, const char** why) {
  if (p >= 4096) return reinterpret_cast<void*>(p);
  if (why) *why = "not a device address (stub driver: below 4096)";
  return nullptr;
}

}  // extern "C"
