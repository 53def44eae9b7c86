// The stand-in CUDA driver's extra entry points, shared by the other stand-in libraries (the
// stand-in cuBLASLt and NCCL under test/standin/). Tests only: nothing here is installed, and
// the runtime never calls these (it sees only the CUDA driver API).
//
// The stand-in libcuda.so.1 owns device memory and streams. The stand-in cuBLASLt and NCCL do
// not touch device pointers or queue work by themselves: they resolve these symbols from the
// already-loaded stand-in driver (dlopen of "libcuda.so.1" with RTLD_NOLOAD, which finds it by
// its soname) and queue their work with the driver API's own cuLaunchHostFunc, so an operation
// runs on its stream's worker thread in stream order, and graph capture records it like a
// kernel launch.
#pragma once

#include <cuda.h>

#include <cstddef>

extern "C" {

/// The host address of device bytes [p, p + bytes): the stand-in's own view of a live device
/// allocation. Aborts the process with a message naming `what` (e.g. "cublasLtMatmul A") when
/// the range is not inside one live allocation (out of bounds, freed, or not a device
/// pointer), so a wrong leading dimension or a use after free is reported where it happens.
void* tesselStandinHostAddress(CUdeviceptr p, size_t bytes, const char* what);

/// As tesselStandinHostAddress, but returns nullptr instead of aborting, with *why (when `why`
/// is not null) set to the reason; the text stays valid until the calling thread's next call.
/// For work that reports a bad range as a device fault (the stand-in cuBLASLt throws from its
/// host function, and the stream's next synchronisation fails with CUDA_ERROR_ILLEGAL_ADDRESS).
void* tesselStandinTryHostAddress(CUdeviceptr p, size_t bytes, const char** why);

}  // extern "C"
