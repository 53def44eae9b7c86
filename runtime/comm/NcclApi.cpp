// The dlopen'd NCCL table; see NcclApi.h.
#include "runtime/comm/NcclApi.h"

#include "runtime/ToolkitLibrary.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace tessel::rt::nccl {

std::string versionText(int code) {
  if (code < 10000) return fmt::format("{}.{}.{}", code / 1000, code / 100 % 10, code % 100);
  return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

const NcclApi& ncclApi() {
  static const NcclApi api = [] {
    NcclApi a;
    ToolkitLibrary opened = openToolkitLibrary("NCCL", "libnccl.so.2", "TESSEL_LIBNCCL");
    void* lib = opened.handle;
    const std::string& c = opened.path;
    a.library = c;
#define TESSEL_NCCL_RESOLVE(name)                                                                       \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(lib, #name));                                      \
  if (!a.name) throw std::runtime_error(fmt::format("{} lacks the function {} (NCCL older than 2.10?)", c, #name));
    TESSEL_NCCL_FUNCTIONS(TESSEL_NCCL_RESOLVE)
#undef TESSEL_NCCL_RESOLVE
    if (a.ncclGetVersion(&a.version) != ncclSuccess)
      throw std::runtime_error(fmt::format("{}: ncclGetVersion failed", c));
    if (a.version < kMinVersion)
      throw std::runtime_error(fmt::format("{} is NCCL {}; NCCL 2.10 or newer is needed (ncclAvg)", c,
                                           versionText(a.version)));
    return a;
  }();
  return api;
}

std::string resultText(const NcclApi& api, ncclResult_t rc, ncclComm_t comm) {
  static const char* names[] = {"ncclSuccess",      "ncclUnhandledCudaError", "ncclSystemError",
                                "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                "ncclRemoteError",   "ncclInProgress"};
  const int code = static_cast<int>(rc);
  std::string text = fmt::format("{} ({}): {}", code >= 0 && code < 8 ? names[code] : "NCCL error", code,
                                 api.ncclGetErrorString ? api.ncclGetErrorString(rc) : "no description");
  if (const char* last = api.ncclGetLastError ? api.ncclGetLastError(comm) : nullptr; last && *last)
    text += fmt::format(" ({})", last);
  return text;
}

}  // namespace tessel::rt::nccl
