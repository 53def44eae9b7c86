// A minimal "libcuda.so.1" for the stand-in NCCL's API test only (NcclApiTest.cpp), so the
// library's own checks, groups and errors are tested without the stand-in CUDA driver:
// "device" pointers are host pointers (tesselStandinHostAddress is the identity) and
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

}  // extern "C"
