// The GPU probe; see GpuProbe.h. The driver and NVML functions are declared here with the
// signatures of cuda.h and nvml.h (CUDA 13; NVML's header is not part of the toolkit
// install on every machine), so the probe builds without either.
#include "runtime/tools/tessel/GpuProbe.h"

#include "runtime/cuda/Driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>

namespace tessel::cli {
namespace {

// cuda.h: CUdevice is an int, CUresult an enum (0: CUDA_SUCCESS).
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceTotalMem = int (*)(size_t*, int);  // cuDeviceTotalMem_v2
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuDeviceGetPCIBusId = int (*)(char*, int, int);
using CuDeviceCanAccessPeer = int (*)(int*, int, int);
using CuDriverGetVersion = int (*)(int*);
constexpr int kAttrMultiprocessors = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrCcMajor = 75;          // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;          // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

// nvml.h: nvmlDevice_t is a pointer, nvmlReturn_t an enum (0: NVML_SUCCESS).
using NvmlDevice = void*;
struct NvmlPciInfo {     // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr unsigned kNvlinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
using NvmlInit = int (*)();
using NvmlDeviceGetCount = int (*)(unsigned*);
using NvmlDeviceGetHandleByPciBusId = int (*)(const char*, NvmlDevice*);
using NvmlDeviceGetNvLinkState = int (*)(NvmlDevice, unsigned, int*);
using NvmlDeviceGetNvLinkRemotePciInfo = int (*)(NvmlDevice, unsigned, NvmlPciInfo*);
using NvmlSystemGetDriverVersion = int (*)(char*, unsigned);

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// "00000000:1B:00.0" (NVML) and "0000:1b:00.0" (CUDA) name the same device: compare the
/// lower-cased address with the domain's leading zeros removed.
std::string canonicalBusId(const std::string& id) {
  std::string s = lower(id);
  size_t colon = s.find(':');
  if (colon == std::string::npos) return s;
  std::string domain = s.substr(0, colon);
  while (domain.size() > 4 && domain[0] == '0') domain.erase(0, 1);
  return domain + s.substr(colon);
}

/// NVLink links between the driver's devices, from NVML; leaves r.nvlinks empty on failure.
void probeNvlinks(GpuReport& r) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    r.nvmlWhy = fmt::format("NVML (libnvidia-ml.so.1) cannot be loaded: {}", err ? err : "unknown reason");
    return;
  }
  auto init = symbol<NvmlInit>(lib, "nvmlInit_v2");
  auto byBus = symbol<NvmlDeviceGetHandleByPciBusId>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  auto state = symbol<NvmlDeviceGetNvLinkState>(lib, "nvmlDeviceGetNvLinkState");
  auto remote = symbol<NvmlDeviceGetNvLinkRemotePciInfo>(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  auto driver = symbol<NvmlSystemGetDriverVersion>(lib, "nvmlSystemGetDriverVersion");
  if (!init || !byBus || !state || !remote) {
    r.nvmlWhy = "NVML lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or the NVLink queries";
    return;
  }
  if (int rc = init(); rc != 0) {
    r.nvmlWhy = fmt::format("nvmlInit failed with NVML error {}", rc);
    return;
  }
  r.nvmlLoaded = true;
  char version[96] = {};
  if (driver && driver(version, sizeof(version)) == 0) r.nvmlDriver = version;
  const size_t n = r.devices.size();
  std::vector<std::vector<int>> links(n, std::vector<int>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    NvmlDevice dev = nullptr;
    if (byBus(r.devices[i].pciBusId.c_str(), &dev) != 0) {
      r.nvmlWhy = fmt::format("NVML does not know device {} ({})", i, r.devices[i].pciBusId);
      return;
    }
    for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
      int active = 0;
      NvmlPciInfo pci{};
      if (state(dev, link, &active) != 0 || !active || remote(dev, link, &pci) != 0) continue;
      const std::string peer = canonicalBusId(pci.busId);
      for (size_t j = 0; j < n; ++j)
        if (canonicalBusId(r.devices[j].pciBusId) == peer) ++links[i][j];
    }
  }
  r.nvlinks = links;
}

}  // namespace

GpuReport probeGpus() {
  GpuReport r;
  const rt::CudaDriverStatus& status = rt::probeCudaDriver();
  r.driverLoaded = status.loaded;
  if (!status.loaded || status.devices == 0) {
    r.why = status.why;
    return r;
  }
  // probeCudaDriver opened and initialised the driver; this handle is the same library.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto get = symbol<CuDeviceGet>(lib, "cuDeviceGet");
  auto name = symbol<CuDeviceGetName>(lib, "cuDeviceGetName");
  auto mem = symbol<CuDeviceTotalMem>(lib, "cuDeviceTotalMem_v2");
  auto attr = symbol<CuDeviceGetAttribute>(lib, "cuDeviceGetAttribute");
  auto bus = symbol<CuDeviceGetPCIBusId>(lib, "cuDeviceGetPCIBusId");
  auto peer = symbol<CuDeviceCanAccessPeer>(lib, "cuDeviceCanAccessPeer");
  if (auto version = symbol<CuDriverGetVersion>(lib, "cuDriverGetVersion")) version(&r.driverVersion);
  std::vector<int> handles;
  for (int i = 0; i < status.devices; ++i) {
    GpuDevice d;
    d.index = i;
    int h = -1;
    if (!get || get(&h, i) != 0) continue;
    handles.push_back(h);
    char text[256] = {};
    if (name && name(text, sizeof(text) - 1, h) == 0) d.name = text;
    size_t bytes = 0;
    if (mem && mem(&bytes, h) == 0) d.memoryBytes = static_cast<int64_t>(bytes);
    if (attr) {
      attr(&d.multiprocessors, kAttrMultiprocessors, h);
      attr(&d.ccMajor, kAttrCcMajor, h);
      attr(&d.ccMinor, kAttrCcMinor, h);
    }
    char busId[64] = {};
    if (bus && bus(busId, sizeof(busId) - 1, h) == 0) {
      d.pciBusId = lower(busId);
      std::ifstream numa("/sys/bus/pci/devices/" + d.pciBusId + "/numa_node");
      if (!(numa >> d.numaNode)) d.numaNode = -1;
    }
    r.devices.push_back(d);
  }
  const size_t n = handles.size();
  r.peer.assign(n, std::vector<int>(n, 1));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      int can = 0;
      r.peer[i][j] = peer && peer(&can, handles[i], handles[j]) == 0 ? (can ? 1 : 0) : -1;
    }
  if (r.devices.empty()) r.why = "the CUDA driver reported devices but none could be queried";
  else probeNvlinks(r);
  return r;
}

}  // namespace tessel::cli
