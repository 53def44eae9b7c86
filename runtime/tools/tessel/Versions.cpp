// The MPI and NCCL library versions topology reports; see TopologyReport.h. The only file of
// the tool that includes mpi.h, and the only one that needs nccl.h (when the build found it).
#include "runtime/tools/tessel/TopologyReport.h"

#include <mpi.h>

#ifdef TESSEL_CLI_HAVE_NCCL
#include "runtime/comm/NcclApi.h"
#endif

#include <stdexcept>

namespace tessel::cli {

LibraryVersion mpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return {"", "MPI_Get_library_version failed"};
  std::string full(text, static_cast<size_t>(length));
  std::string first = full.substr(0, full.find_first_of(",\n"));  // "Open MPI v4.1.4"
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  while (!full.empty() && (full.back() == '\n' || full.back() == '\0')) full.pop_back();
  return {first, "MPI standard " + std::to_string(major) + "." + std::to_string(minor) + "; " + full};
}

LibraryVersion ncclVersion() {
#ifdef TESSEL_CLI_HAVE_NCCL
  try {
    const rt::nccl::NcclApi& api = rt::nccl::ncclApi();
    return {rt::nccl::versionText(api.version), api.library};
  } catch (const std::exception& e) {
    std::string why = e.what();
    return {"", why.substr(0, why.find('\n'))};
  }
#else
  return {"", "this build has no NCCL backend (nccl.h was not found when it was built)"};
#endif
}

}  // namespace tessel::cli
