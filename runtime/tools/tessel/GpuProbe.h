// What `tessel topology` learns about GPUs: from the CUDA driver (opened with dlopen, as
// runtime/cuda/Driver.h does) and, when present, NVML (libnvidia-ml.so.1, also dlopen'd) for
// the NVLink links between GPUs.
//
// Promise: nothing is claimed that a library did not report. Without the driver the report
// has no devices and says why; without NVML the NVLink matrix is absent (empty), not zero;
// a query that fails leaves its field unknown (-1 or empty).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cli {

/// One device, as the driver numbers it.
struct GpuDevice {
  int index = 0;
  std::string name;          // cuDeviceGetName
  int64_t memoryBytes = -1;  // cuDeviceTotalMem
  int multiprocessors = -1;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  int ccMajor = -1, ccMinor = -1;  // compute capability
  std::string pciBusId;      // cuDeviceGetPCIBusId, "0000:1b:00.0" (lower case)
  int numaNode = -1;         // /sys/bus/pci/devices/<pciBusId>/numa_node
};

struct GpuReport {
  bool driverLoaded = false;  // libcuda.so.1 opened and cuInit succeeded
  int driverVersion = -1;     // cuDriverGetVersion, e.g. 13000
  std::string why;            // why there are no devices, when there are none
  std::vector<GpuDevice> devices;
  /// peer[i][j]: 1 when device i can access device j's memory (cuDeviceCanAccessPeer), 0 when
  /// it cannot, -1 when the query failed; the diagonal is 1. Empty without devices.
  std::vector<std::vector<int>> peer;
  bool nvmlLoaded = false;
  std::string nvmlWhy;        // why NVML is not used, when it is not
  std::string nvmlDriver;     // nvmlSystemGetDriverVersion, e.g. "580.65.06"
  /// nvlinks[i][j]: active NVLink links from device i to device j (NVML); empty when NVML is
  /// absent or a device could not be matched by its PCI address.
  std::vector<std::vector<int>> nvlinks;
};

/// Probes once per call (the driver and NVML stay loaded).
GpuReport probeGpus();

}  // namespace tessel::cli
