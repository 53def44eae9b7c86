// /proc and sysfs readers; see HostProbe.h.
#include "runtime/tools/tessel/HostProbe.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace tessel::cli {
namespace fs = std::filesystem;
namespace {

/// The first line of a small file, trimmed; empty when it cannot be read.
std::string readLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

int readInt(const fs::path& path, int fallback = -1) {
  std::string s = readLine(path);
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  return s.empty() || *end ? fallback : static_cast<int>(v);
}

std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

/// The names of a folder's entries, sorted; empty when it does not exist.
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) names.push_back(it->path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

const std::vector<std::string>& simdFeatures() {
  static const std::vector<std::string> features = {"avx2",        "avx512f",     "avx512bw", "avx512vl",
                                                    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
                                                    "amx_bf16",    "amx_int8"};
  return features;
}

CpuInfo parseCpuInfo(const std::string& text) {
  CpuInfo cpu;
  std::set<std::string> sockets;
  std::set<std::pair<std::string, std::string>> cores;
  std::string socket, flags;
  bool coreIds = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "processor") {
      ++cpu.logicalCpus;
      socket.clear();
    } else if (key == "model name" && cpu.model.empty()) {
      cpu.model = value;
    } else if (key == "physical id") {
      socket = value;
      sockets.insert(value);
    } else if (key == "core id") {
      coreIds = true;
      cores.insert({socket, value});
    } else if (key == "flags" && flags.empty()) {
      flags = " " + value + " ";
    }
  }
  cpu.sockets = sockets.empty() ? (cpu.logicalCpus > 0 ? 1 : 0) : static_cast<int>(sockets.size());
  cpu.cores = coreIds ? static_cast<int>(cores.size()) : cpu.logicalCpus;
  for (const std::string& f : simdFeatures())
    if (flags.find(" " + f + " ") != std::string::npos) cpu.simd.push_back(f);
  return cpu;
}

CpuInfo probeCpu(const std::string& sysRoot) {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream text;
  text << in.rdbuf();
  CpuInfo cpu = parseCpuInfo(text.str());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpu.usableCpus = CPU_COUNT(&set);
  const fs::path nodes = fs::path(sysRoot) / "devices/system/node";
  if (fs::exists(nodes)) {
    cpu.numaNodes = 0;
    for (const std::string& name : entries(nodes))
      if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4])))
        ++cpu.numaNodes;
  }
  return cpu;
}

std::vector<NetInterface> probeNetInterfaces(const std::string& sysRoot) {
  std::vector<NetInterface> out;
  const fs::path net = fs::path(sysRoot) / "class/net";
  for (const std::string& name : entries(net)) {
    const fs::path dir = net / name;
    NetInterface nic;
    nic.name = name;
    const int type = readInt(dir / "type");
    nic.kind = type == 1 ? "ethernet" : type == 772 ? "loopback" : type == 32 ? "infiniband"
                                                                             : "type " + std::to_string(type);
    nic.state = readLine(dir / "operstate");
    nic.speedMbps = readInt(dir / "speed");
    if (nic.speedMbps <= 0) nic.speedMbps = -1;  // -1 or 0: not reported
    std::error_code ec;
    const std::string target = fs::read_symlink(dir, ec).string();
    if (target.find("/virtual/") != std::string::npos) {
      nic.device = "virtual";
    } else {
      // The PCI address is the last path element of the form dddd:bb:dd.f before /net/.
      std::string pci;
      std::istringstream parts(target);
      for (std::string p; std::getline(parts, p, '/');)
        if (p.size() == 12 && p[4] == ':' && p[7] == ':' && p[10] == '.') pci = p;
      nic.device = pci.empty() ? fs::path(fs::canonical(dir / "device", ec)).filename().string() : pci;
      nic.numaNode = readInt(dir / "device/numa_node");
    }
    out.push_back(nic);
  }
  return out;
}

std::vector<IbDevice> probeInfiniband(const std::string& sysRoot) {
  std::vector<IbDevice> out;
  const fs::path ib = fs::path(sysRoot) / "class/infiniband";
  for (const std::string& name : entries(ib)) {
    IbDevice dev;
    dev.name = name;
    for (const std::string& port : entries(ib / name / "ports")) {
      const fs::path p = ib / name / "ports" / port;
      dev.ports.push_back({std::atoi(port.c_str()), readLine(p / "state"), readLine(p / "rate"),
                           readLine(p / "link_layer")});
    }
    out.push_back(dev);
  }
  return out;
}

std::string hostName() {
  if (const char* forced = std::getenv("TESSEL_HOSTNAME"); forced && *forced) return forced;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace tessel::cli
