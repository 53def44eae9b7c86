// The stand-in CUDA driver's internals, shared by its files (memory, streams, modules, the
// device and context calls). Tests only; see docs/gpu.md for what the stand-in checks.
//
// Model: $TESSEL_STANDIN_DEVICES identical devices (default 1; "Tessel stand-in (CPU)",
// sm_90, Device.cpp), each with one primary context, sharing one memory. Device memory lives in
// its own reserved address range (never readable by the host), backed by host memory that
// only the stand-in touches. Every stream is a worker thread running its queue in order.
// A failure of queued work (an out-of-bounds copy, a kernel given a freed pointer, a kernel
// that deadlocks) is a device fault: it is reported once on stderr and, as on a GPU, every
// later call returns CUDA_ERROR_ILLEGAL_ADDRESS.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace tessel::standin {

/// Reports a misuse on stderr ("tessel stand-in: <call>: <reason>") and returns `rc`, so that
/// the caller's error names the cause beyond the CUDA error code.
CUresult fail(CUresult rc, const std::string& call, const std::string& reason);

/// Marks the context faulted (the first fault's message is printed); later calls return
/// CUDA_ERROR_ILLEGAL_ADDRESS.
void fault(const std::string& what);

/// CUDA_SUCCESS, or the sticky error of an earlier device fault, CUDA_ERROR_NOT_INITIALIZED
/// before cuInit, or CUDA_ERROR_NOT_PERMITTED inside a host function (CUDA's rule).
CUresult status();

/// status(), and then CUDA_ERROR_INVALID_CONTEXT (reported, naming `call`) when the calling
/// thread has no current context: as in CUDA, memory, stream, event, module and launch calls
/// need one (cuCtxSetCurrent).
CUresult contextStatus(const char* call);

// ---- memory (Memory.cpp) -------------------------------------------------------------------

/// The host view of device bytes [p, p + bytes) inside one live allocation, or nullptr with
/// *why saying what is wrong (not a device address, freed, out of bounds).
std::byte* hostView(CUdeviceptr p, size_t bytes, std::string* why);

/// Bytes allocated and not freed, and the device's capacity.
size_t usedBytes();
size_t totalBytes();

// ---- streams (Streams.cpp) -----------------------------------------------------------------

/// A piece of queued work: runs on the stream's worker thread; throwing std::exception is a
/// device fault named by `what`.
struct Work {
  std::string what;
  std::function<void()> run;
  bool control = false;  // an event record or wait: runs even after a fault, so nothing hangs
};

/// Whether the calling thread runs a host function (cuLaunchHostFunc), which must not call
/// the CUDA API.
bool inHostFunction();

/// Queues `w` on `stream` (nullptr: the default stream), or records it into the stream's
/// graph while the stream is being captured. Fails for an unknown stream.
CUresult enqueue(CUstream stream, Work w);

/// Waits until every blocking stream has run all it was given (the legacy default stream's
/// implicit synchronisation of synchronous copies). Fails while a capture is in progress.
CUresult synchronizeAll(const char* call);

// ---- modules (Modules.cpp) -----------------------------------------------------------------

/// Serialises kernel bodies: the SIMT harness and kernels' `__shared__` arrays (host statics)
/// are process-wide, so kernels of different streams take turns while copies, host functions
/// and collectives of other streams run alongside.
std::mutex& kernelMutex();

}  // namespace tessel::standin
