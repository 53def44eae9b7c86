// `tessel topology`: what this machine and job have, as detected, and nothing more.
//
// GPUs (name, memory, SMs, compute capability, PCI address and NUMA node) come from the CUDA
// driver, the peer-access matrix from cuDeviceCanAccessPeer and NVLink links from NVML
// (GpuProbe.h); NICs, InfiniBand, CPUs, NUMA and SIMD from /proc and sysfs (HostProbe.h); the
// MPI library's version from MPI_Get_library_version and NCCL's from the library the NCCL
// communicator would load. Whatever is absent is said in words ("no GPU", "no InfiniBand").
// Under a launcher every rank reports its host and the GPU it would use (the trainer's choice:
// the local rank modulo the devices), and rank 0 prints the job's layout; --plan dp=2,tp=4
// adds a warning for every tp group whose ranks are on more than one host (a tp group
// all-reduces activations in every layer, so it belongs on one host's fast links).
#include "runtime/comm/DeviceMesh.h"
#include "runtime/cuda/CudaPlan.h"  // selectCudaDevice
#include "runtime/tools/tessel/GpuProbe.h"
#include "runtime/tools/tessel/HostProbe.h"
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/tools/tessel/TopologyReport.h"
#include "runtime/train/FlagChecks.h"
#include "runtime/train/Ranks.h"  // checkSameCommandLine

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

namespace tessel::cli {
namespace {

struct TopologyFlags {
  std::string plan;
  bool json = false;
  double commTimeout = 300.0;
};

/// What each rank tells rank 0: fixed-size text fields, gathered as i32 words.
struct RankRecord {
  char host[96];
  char gpu[32];  // PCI address of the GPU the rank would use; empty: none
  int32_t localRank;
  int32_t pad;
};
static_assert(sizeof(RankRecord) % 4 == 0);

/// The mesh --plan describes ("dp=2,tp=4": axis=size items, outermost first). Throws
/// std::runtime_error naming the item that is not of that form.
rt::MeshLayout parsePlanText(const std::string& text) {
  std::vector<rt::MeshAxis> axes;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    size_t eq = item.find('=');
    char* end = nullptr;
    long size = eq == std::string::npos ? 0 : std::strtol(item.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || end == item.c_str() + eq + 1 || *end || size < 1 || size > 1 << 20)
      throw std::runtime_error(fmt::format("--plan '{}': '{}' is not AXIS=SIZE with a size in [1, 2^20]", text, item));
    axes.push_back({item.substr(0, eq), static_cast<int>(size)});
  }
  try {
    return rt::MeshLayout(axes);
  } catch (const rt::CommError& e) {
    throw std::runtime_error(fmt::format("--plan '{}': {}", text, e.what()));
  }
}

/// Every rank's record, on every rank (one world all_gather).
std::vector<RankRecord> gatherRanks(rt::Communicator& comm, const RankRecord& mine) {
  const int world = comm.worldSize();
  constexpr int64_t words = sizeof(RankRecord) / 4;
  std::vector<RankRecord> all(static_cast<size_t>(world));
  comm.allGather(&mine, all.data(), words * world, rt::DType::I32, "topology hosts")->wait();
  return all;
}

int runTopology(const TopologyFlags& f, Context& context) {
  std::optional<rt::MeshLayout> plan;
  if (!f.plan.empty()) plan = parsePlanText(f.plan);
  TopologyReport report;
  report.software.mpi = mpiLibraryVersion();  // before MPI starts: allowed at any time
  report.software.nccl = ncclVersion();
  context.world = rt::makeWorld({.timeoutSeconds = f.commTimeout});
  rt::Communicator& comm = *context.world->comm;
  trainer::checkSameCommandLine(context.argc, context.argv, comm);
  report.host = hostName();
  report.cpu = probeCpu();
  report.nics = probeNetInterfaces();
  report.infiniband = probeInfiniband();
  report.gpus = probeGpus();

  RankRecord mine{};
  std::snprintf(mine.host, sizeof(mine.host), "%s", report.host.c_str());
  mine.localRank = context.world->info.localRank;
  if (!report.gpus.devices.empty()) {
    const int device = rt::selectCudaDevice(-1, static_cast<int>(report.gpus.devices.size()));
    std::snprintf(mine.gpu, sizeof(mine.gpu), "%s", report.gpus.devices[static_cast<size_t>(device)].pciBusId.c_str());
  }
  for (const RankRecord& r : gatherRanks(comm, mine))
    report.ranks.push_back({r.host, r.gpu, r.localRank});
  if (plan) report.planWarnings = planWarnings(*plan, report.ranks);
  if (comm.rank() != 0) return 0;
  fmt::print("{}", f.json ? toJson(report).dump(2) + "\n" : renderText(report));
  return 0;
}

}  // namespace

Action setupTopology(CLI::App& sub) {
  auto f = std::make_shared<TopologyFlags>();
  sub.footer(
      "\nReports what was detected, and says in words what was not: GPUs (name, memory, SMs, compute capability, "
      "PCI address, NUMA node) through the CUDA driver, the peer-access matrix, NVLink links through NVML, "
      "network interfaces and InfiniBand devices from sysfs, CPU sockets, cores, NUMA nodes and SIMD features "
      "(AVX-512, AMX) from /proc/cpuinfo and sysfs, and the MPI and NCCL library versions. Under mpirun every "
      "rank reports its host and GPU, and rank 0 prints which ranks share a host or a GPU.");
  sub.add_option("--plan", f->plan, "a plan as the trainers take it (e.g. dp=2,tp=4; axes outermost first, tp "
                                    "fastest): warn when a tp group's ranks are on more than one host")
      ->check(trainer::nonEmpty("plan"));
  sub.add_option("--comm-timeout", f->commTimeout, "seconds the gathering of the ranks' hosts may take")
      ->capture_default_str()->check(trainer::positiveUpTo(rt::kMaxTimeoutSeconds));
  addJsonFlag(sub, f->json);
  return [f](Context& context) { return runTopology(*f, context); };
}

}  // namespace tessel::cli
