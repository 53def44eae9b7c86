// The topology report's text and JSON; see TopologyReport.h.
#include "runtime/tools/tessel/TopologyReport.h"

#include "runtime/tools/tessel/Table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace tessel::cli {
namespace {

std::string plural(int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string orUnknown(int v) { return v < 0 ? "?" : std::to_string(v); }

/// The ranks' list as "0-3" runs: "0, 2, 4-7".
std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") +
           (j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : std::to_string(ranks[i]));
    i = j + 1;
  }
  return out;
}

/// A GPU-by-GPU matrix: cell(i, j) for every pair, "X" on the diagonal.
std::string matrix(size_t n, const std::function<std::string(size_t, size_t)>& cell) {
  std::vector<std::string> header = {""};
  for (size_t j = 0; j < n; ++j) header.push_back("GPU" + std::to_string(j));
  Table t(header);
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::string> row = {"GPU" + std::to_string(i)};
    for (size_t j = 0; j < n; ++j) row.push_back(i == j ? "X" : cell(i, j));
    t.add(row);
  }
  return t.render(4);
}

std::string gpuText(const GpuReport& g) {
  if (g.devices.empty()) return fmt::format("GPUs: no GPU ({})\n", g.why);
  std::string out = fmt::format("GPUs: {} (CUDA driver {}.{})\n", plural(static_cast<int64_t>(g.devices.size()), "GPU", "GPUs"),
                                g.driverVersion / 1000, g.driverVersion % 1000 / 10);
  Table t({"index", "name", "memory", "SMs", "compute capability", "PCI address", "NUMA node"});
  for (const GpuDevice& d : g.devices)
    t.add({std::to_string(d.index), d.name, d.memoryBytes < 0 ? "?" : humanBytes(d.memoryBytes),
           orUnknown(d.multiprocessors), d.ccMajor < 0 ? "?" : fmt::format("{}.{}", d.ccMajor, d.ccMinor),
           d.pciBusId.empty() ? "?" : d.pciBusId, orUnknown(d.numaNode)});
  out += t.render();
  const size_t n = g.devices.size();
  if (n > 1)
    out += "  peer access (cuDeviceCanAccessPeer; yes: GPU row can read GPU column's memory directly)\n" +
           matrix(n, [&](size_t i, size_t j) { return g.peer[i][j] < 0 ? "?" : g.peer[i][j] ? "yes" : "no"; });
  if (g.nvlinks.empty()) {
    out += fmt::format("  NVLink: no NVLink information ({})\n", g.nvmlWhy);
  } else {
    bool any = false;
    for (const auto& row : g.nvlinks) any = any || std::any_of(row.begin(), row.end(), [](int k) { return k > 0; });
    if (!any) out += "  NVLink: NVML reports no active NVLink link between these GPUs\n";
    else
      out += "  NVLink (NVML; NVk: k active links, -: none)\n" +
             matrix(n, [&](size_t i, size_t j) { return g.nvlinks[i][j] ? "NV" + std::to_string(g.nvlinks[i][j]) : "-"; });
  }
  return out;
}

std::string networkText(const TopologyReport& r) {
  std::string out = "Network interfaces (sysfs):\n";
  Table t({"name", "kind", "state", "speed", "device", "NUMA node"});
  for (const NetInterface& n : r.nics)
    t.add({n.name, n.kind, n.state, n.speedMbps < 0 ? "not reported" : fmt::format("{} Mb/s", n.speedMbps), n.device,
           orUnknown(n.numaNode)});
  out += t.empty() ? "  none found in /sys/class/net\n" : t.render();
  if (r.infiniband.empty())
    return out + "InfiniBand: no InfiniBand (no device under /sys/class/infiniband; no RDMA driver is loaded)\n";
  out += "InfiniBand / RDMA devices (sysfs):\n";
  Table ib({"device", "port", "state", "rate", "link layer"});
  for (const IbDevice& d : r.infiniband)
    for (const IbPort& p : d.ports) ib.add({d.name, std::to_string(p.port), p.state, p.rate, p.linkLayer});
  return out + ib.render();
}

std::string cpuText(const CpuInfo& c) {
  std::string out = fmt::format(
      "CPU: {}; {}, {}, {}{}; {}\n", c.model.empty() ? "model not reported" : c.model,
      plural(c.sockets, "socket", "sockets"), plural(c.cores, "core", "cores"),
      plural(c.logicalCpus, "logical CPU", "logical CPUs"),
      c.usableCpus >= 0 ? fmt::format(" ({} usable by this process)", c.usableCpus) : std::string(),
      c.numaNodes < 0 ? std::string("NUMA nodes unknown") : plural(c.numaNodes, "NUMA node", "NUMA nodes"));
  auto has = [&](const std::string& f) { return std::find(c.simd.begin(), c.simd.end(), f) != c.simd.end(); };
  std::vector<std::string> absent;
  for (const std::string& f : simdFeatures())
    if (!has(f)) absent.push_back(f);
  out += fmt::format("  SIMD: AVX-512 {}, AMX {}; present: {}; absent: {}\n", has("avx512f") ? "yes" : "no",
                     has("amx_tile") ? "yes" : "no", c.simd.empty() ? "none" : fmt::format("{}", fmt::join(c.simd, " ")),
                     absent.empty() ? "none" : fmt::format("{}", fmt::join(absent, " ")));
  return out;
}

std::string jobText(const TopologyReport& r) {
  if (r.ranks.size() <= 1) return "Job: one rank (not started by a launcher)\n";
  std::map<std::string, std::vector<int>> byHost;
  std::map<std::pair<std::string, std::string>, std::vector<int>> byGpu;
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    byHost[r.ranks[i].host].push_back(static_cast<int>(i));
    if (!r.ranks[i].gpu.empty()) byGpu[{r.ranks[i].host, r.ranks[i].gpu}].push_back(static_cast<int>(i));
  }
  std::string out = fmt::format("Job: {} on {}\n", plural(static_cast<int64_t>(r.ranks.size()), "rank", "ranks"),
                                plural(static_cast<int64_t>(byHost.size()), "host", "hosts"));
  Table t({"host", "ranks", "GPU per rank"});
  for (const auto& [host, ranks] : byHost) {
    std::vector<std::string> gpus;
    for (int k : ranks) gpus.push_back(r.ranks[static_cast<size_t>(k)].gpu.empty() ? "none" : r.ranks[static_cast<size_t>(k)].gpu);
    t.add({host, rankList(ranks), fmt::format("{}", fmt::join(gpus, ", "))});
  }
  out += t.render();
  bool shared = false;
  for (const auto& [key, ranks] : byGpu)
    if (ranks.size() > 1) {
      out += fmt::format("  ranks {} share the GPU {} on {}\n", rankList(ranks), key.second, key.first);
      shared = true;
    }
  if (!shared) out += byGpu.empty() ? "  no rank has a GPU\n" : "  no two ranks share a GPU\n";
  return out;
}

nlohmann::json versionJson(const LibraryVersion& v) {
  return {{"version", v.version.empty() ? nlohmann::json() : nlohmann::json(v.version)},
          {v.version.empty() ? "absent_reason" : "detail", v.detail}};
}

}  // namespace

std::vector<std::string> planWarnings(const rt::MeshLayout& plan, const std::vector<RankPlace>& ranks) {
  const std::string text = plan.describe();
  if (plan.size() != static_cast<int>(ranks.size()))
    return {fmt::format("the plan {} has {} but this job has {}; launch it with mpirun -np {} to check its placement",
                        text, plural(plan.size(), "rank", "ranks"), plural(static_cast<int64_t>(ranks.size()), "rank", "ranks"),
                        plan.size())};
  const auto& axes = plan.axes();
  if (std::none_of(axes.begin(), axes.end(), [](const rt::MeshAxis& a) { return a.name == "tp"; })) return {};
  std::vector<std::string> out;
  std::set<std::vector<int>> seen;
  for (int r = 0; r < plan.size(); ++r) {
    std::vector<int> group = plan.groupRanks(r, {"tp"});
    if (!seen.insert(group).second) continue;
    std::set<std::string> hosts;
    for (int k : group) hosts.insert(ranks[static_cast<size_t>(k)].host);
    if (hosts.size() > 1)
      out.push_back(fmt::format("plan {}: the tp group of ranks {} spans {} hosts ({}); tensor parallelism "
                                "all-reduces activations in every layer, so keep tp inside a host and put dp or "
                                "pp across hosts (make tp the last, fastest axis and at most the ranks per host)",
                                text, rankList(group), hosts.size(), fmt::join(hosts, ", ")));
  }
  return out;
}

std::string renderText(const TopologyReport& r) {
  std::string out = fmt::format("tessel topology: host {} (what was detected; absent means not detected)\n", r.host);
  out += gpuText(r.gpus);
  out += networkText(r);
  out += cpuText(r.cpu);
  auto lib = [](const char* name, const LibraryVersion& v) {
    return v.version.empty() ? fmt::format("{}: absent ({})\n", name, v.detail)
                             : fmt::format("{}: {} ({})\n", name, v.version, v.detail);
  };
  out += lib("MPI", r.software.mpi) + lib("NCCL", r.software.nccl);
  out += jobText(r);
  for (const std::string& w : r.planWarnings) out += "warning: " + w + "\n";
  return out;
}

nlohmann::json toJson(const TopologyReport& r) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuDevice& d : r.gpus.devices)
    gpus.push_back({{"index", d.index}, {"name", d.name}, {"memory_bytes", d.memoryBytes},
                    {"multiprocessors", d.multiprocessors}, {"compute_capability", {d.ccMajor, d.ccMinor}},
                    {"pci_bus_id", d.pciBusId}, {"numa_node", d.numaNode}});
  nlohmann::json nics = nlohmann::json::array(), ib = nlohmann::json::array(), ranks = nlohmann::json::array();
  for (const NetInterface& n : r.nics)
    nics.push_back({{"name", n.name}, {"kind", n.kind}, {"state", n.state},
                    {"speed_mbps", n.speedMbps < 0 ? nlohmann::json() : nlohmann::json(n.speedMbps)},
                    {"device", n.device}, {"numa_node", n.numaNode}});
  for (const IbDevice& d : r.infiniband) {
    nlohmann::json ports = nlohmann::json::array();
    for (const IbPort& p : d.ports)
      ports.push_back({{"port", p.port}, {"state", p.state}, {"rate", p.rate}, {"link_layer", p.linkLayer}});
    ib.push_back({{"name", d.name}, {"ports", ports}});
  }
  for (const RankPlace& p : r.ranks)
    ranks.push_back({{"host", p.host}, {"gpu", p.gpu.empty() ? nlohmann::json() : nlohmann::json(p.gpu)},
                     {"local_rank", p.localRank}});
  nlohmann::json doc = {
      {"host", r.host},
      {"gpus", gpus},
      {"peer_access", r.gpus.peer},
      {"nvlink", r.gpus.nvlinks.empty() ? nlohmann::json() : nlohmann::json(r.gpus.nvlinks)},
      {"network_interfaces", nics},
      {"infiniband", ib},
      {"cpu",
       {{"model", r.cpu.model}, {"sockets", r.cpu.sockets}, {"cores", r.cpu.cores}, {"logical_cpus", r.cpu.logicalCpus},
        {"usable_cpus", r.cpu.usableCpus}, {"numa_nodes", r.cpu.numaNodes}, {"simd", r.cpu.simd},
        {"simd_checked", simdFeatures()}}},
      {"mpi", versionJson(r.software.mpi)},
      {"nccl", versionJson(r.software.nccl)},
      {"ranks", ranks},
      {"plan_warnings", r.planWarnings}};
  if (r.gpus.devices.empty()) doc["gpus_absent_reason"] = r.gpus.why;
  if (r.gpus.nvlinks.empty()) doc["nvlink_absent_reason"] = r.gpus.devices.empty() ? "no GPU" : r.gpus.nvmlWhy;
  if (r.infiniband.empty()) doc["infiniband_absent_reason"] = "no device under /sys/class/infiniband";
  return doc;
}

}  // namespace tessel::cli
