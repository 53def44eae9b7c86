// NCCL, opened with dlopen (internal to the NCCL backend, runtime/comm/NcclCommunicator).
//
// Promise: every function is declared by NCCL's own nccl.h (written against NCCL 2.28; the
// functions used exist since NCCL 2.10, the first with ncclAvg) and resolved by its name in
// libnccl.so.2, so a call through this table is the call a program linked against NCCL would
// make. Nothing links NCCL: a machine without it gets an error naming the library and why it
// could not be loaded.
#pragma once

#include <nccl.h>

#include <string>

namespace tessel::rt::nccl {

/// The NCCL functions the backend calls.
#define TESSEL_NCCL_FUNCTIONS(X)                                                                 \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)  \
  X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclGetLastError) X(ncclAllReduce)           \
  X(ncclAllGather) X(ncclReduceScatter) X(ncclBroadcast) X(ncclSend) X(ncclRecv)                \
  X(ncclGroupStart) X(ncclGroupEnd)

/// The oldest NCCL the backend accepts: 2.10.0 (ncclAvg), as NCCL_VERSION_CODE encodes it.
constexpr int kMinVersion = 21000;

/// NCCL's function table.
struct NcclApi {
#define TESSEL_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  TESSEL_NCCL_FUNCTIONS(TESSEL_NCCL_MEMBER)
#undef TESSEL_NCCL_MEMBER
  std::string library;  // the file that was opened
  int version = 0;      // ncclGetVersion
};

/// NCCL, opened once per process: $TESSEL_LIBNCCL, libnccl.so.2 (loader path),
/// $CUDA_HOME/lib64/libnccl.so.2, /usr/local/cuda/lib64/libnccl.so.2. Throws
/// std::runtime_error listing what was tried, naming a missing function, or saying that the
/// version is older than 2.10.
const NcclApi& ncclApi();

/// "2.28.9" for NCCL_VERSION_CODE 22809 (and 2.8.4 for the old encoding 2804).
std::string versionText(int code);

/// "ncclSystemError (2): unhandled system error" plus NCCL's last error text when given.
std::string resultText(const NcclApi& api, ncclResult_t rc, ncclComm_t comm = nullptr);

}  // namespace tessel::rt::nccl
