// The report of `tessel topology`: what was probed on this rank plus every rank's host, as
// text (tables and sentences) or JSON, and the plan's placement warnings.
//
// Promise: the text says "no GPU", "no InfiniBand", "no NVLink information" and "absent" in
// words where nothing was detected, and claims a link only from a reported one. The JSON has
// the same facts: empty lists for what is absent, null for what is unknown, and each absence's
// reason.
#pragma once

#include "runtime/comm/DeviceMesh.h"
#include "runtime/tools/tessel/GpuProbe.h"
#include "runtime/tools/tessel/HostProbe.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessel::cli {

/// A library's version, or why there is none.
struct LibraryVersion {
  std::string version;  // empty when absent
  std::string detail;   // the library's path or full version line; or why it is absent
};

/// The MPI library's version line (MPI_Get_library_version; "Open MPI v4.1.4, ..."). Callable
/// before MPI is initialised.
LibraryVersion mpiLibraryVersion();
/// The NCCL the NCCL communicator would load (runtime/comm/NcclApi.h), or why none loads.
LibraryVersion ncclVersion();

/// One rank of the job, as it reported itself.
struct RankPlace {
  std::string host;
  std::string gpu;  // PCI address of the GPU it would use; empty: none
  int localRank = -1;
};

struct TopologyReport {
  std::string host;
  CpuInfo cpu;
  std::vector<NetInterface> nics;
  std::vector<IbDevice> infiniband;
  GpuReport gpus;
  struct {
    LibraryVersion mpi, nccl;
  } software;
  std::vector<RankPlace> ranks;  // by world rank
  std::vector<std::string> planWarnings;
};

/// One line per problem of placing `plan` on `ranks`: a world size that is not the plan's, and
/// every tp group (the ranks that differ only in the "tp" coordinate) whose ranks are on more
/// than one host. Empty when the plan fits.
std::vector<std::string> planWarnings(const rt::MeshLayout& plan, const std::vector<RankPlace>& ranks);

/// The report as sections of sentences and tables (rank 0 prints it).
std::string renderText(const TopologyReport& report);
/// The report as one JSON object (--json).
nlohmann::json toJson(const TopologyReport& report);

}  // namespace tessel::cli
