// What `tessel topology` reads about the host itself, from /proc and sysfs only (no library):
// CPU sockets, cores and SIMD features, NUMA nodes, network interfaces and InfiniBand devices.
//
// Promise: every field is what the kernel reported; what could not be read is reported as
// unknown (-1 or empty), never guessed. The parsers take the files' text or a sysfs root, so
// tests can feed them fixtures.
#pragma once

#include <string>
#include <vector>

namespace tessel::cli {

/// The SIMD features topology reports on, in /proc/cpuinfo's spelling: AVX2, the AVX-512
/// subsets GEMM and bf16 kernels use, and AMX.
const std::vector<std::string>& simdFeatures();

/// The CPUs, from /proc/cpuinfo (and the process's affinity and sysfs's NUMA nodes).
struct CpuInfo {
  std::string model;        // "model name" of the first processor
  int logicalCpus = 0;      // "processor" entries
  int sockets = 0;          // distinct "physical id" (1 when the field is absent)
  int cores = 0;            // distinct (physical id, core id); logicalCpus when "core id" is absent
  int usableCpus = -1;      // CPUs this process may run on (sched_getaffinity); -1 unknown
  int numaNodes = -1;       // /sys/devices/system/node/node*; -1 unknown
  std::vector<std::string> simd;  // the simdFeatures() the first processor's flags list
};

/// Parses the text of /proc/cpuinfo (usableCpus and numaNodes stay unknown).
CpuInfo parseCpuInfo(const std::string& text);
/// parseCpuInfo(/proc/cpuinfo) plus the affinity and the NUMA nodes under `sysRoot`.
CpuInfo probeCpu(const std::string& sysRoot = "/sys");

/// A network interface (/sys/class/net/NAME).
struct NetInterface {
  std::string name;
  std::string kind;      // "ethernet", "loopback", "infiniband" or "type N" (ARPHRD number)
  std::string state;     // operstate: "up", "down", "unknown"
  int speedMbps = -1;    // -1 when the driver does not report one (virtual NICs)
  std::string device;    // the PCI address, "virtual", or the bus device name
  int numaNode = -1;
};
std::vector<NetInterface> probeNetInterfaces(const std::string& sysRoot = "/sys");

/// An InfiniBand (or RoCE) device (/sys/class/infiniband/NAME) and its ports.
struct IbPort {
  int port = 0;
  std::string state;      // "4: ACTIVE"
  std::string rate;       // "200 Gb/sec (4X HDR)"
  std::string linkLayer;  // "InfiniBand" or "Ethernet" (RoCE)
};
struct IbDevice {
  std::string name;
  std::vector<IbPort> ports;
};
/// The devices under sysRoot/class/infiniband; empty when the folder is absent (no RDMA driver).
std::vector<IbDevice> probeInfiniband(const std::string& sysRoot = "/sys");

/// This host's name (gethostname; $TESSEL_HOSTNAME instead when set, so a test can give the
/// ranks of one machine different hosts).
std::string hostName();

}  // namespace tessel::cli
