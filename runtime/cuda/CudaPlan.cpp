// The GPU executor's GPU-independent decisions; see CudaPlan.h.
#include "runtime/cuda/CudaPlan.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

namespace tessel::rt {

LtGemmShape ltGemmShape(const GemmStep& g) {
  LtGemmShape s;
  s.m = g.n;
  s.n = g.m;
  s.k = g.k;
  s.a = g.transB ? LtOperand{true, g.k, g.n, g.k, g.strideB} : LtOperand{false, g.n, g.k, g.n, g.strideB};
  s.b = g.transA ? LtOperand{true, g.m, g.k, g.m, g.strideA} : LtOperand{false, g.k, g.m, g.k, g.strideA};
  s.d = LtOperand{false, g.n, g.m, g.n, g.strideC};
  s.batch = g.batch;
  s.beta = g.accumulate ? 1.0f : 0.0f;
  s.serialBatches = g.batch > 1 && g.strideC == 0;
  return s;
}

uint32_t operandAlignment(uint64_t address, int64_t strideBytes, int64_t batch) {
  uint32_t align = 256;
  while (align > 1 && (address % align != 0 || (batch > 1 && static_cast<uint64_t>(strideBytes) % align != 0)))
    align /= 2;
  return align;
}

namespace {

/// "sm_90" -> 90; -1 if malformed.
int archNumber(const std::string& arch) {
  if (arch.size() < 4 || arch.rfind("sm_", 0) != 0) return -1;
  int v = 0;
  for (size_t i = 3; i < arch.size(); ++i) {
    if (arch[i] < '0' || arch[i] > '9' || v > 100000) return -1;
    v = v * 10 + (arch[i] - '0');
  }
  return v;
}

}  // namespace

CudaImage selectCudaImage(const std::string& arch, bool havePtx, int major, int minor) {
  int built = archNumber(arch);
  if (built < 0) throw std::runtime_error(fmt::format("the bundle's CUDA arch '{}' is not sm_XY", arch));
  int device = major * 10 + minor;
  if (built / 10 == major && minor >= built % 10) return CudaImage::Cubin;
  if (havePtx && device >= built) return CudaImage::Ptx;
  throw std::runtime_error(fmt::format(
      "the bundle's kernels are compiled for {} ({}), but this GPU is sm_{}{}; recompile the bundle "
      "with --cuda-arch sm_{}{}",
      arch, havePtx ? "cubin and PTX" : "cubin only", major, minor, major, minor));
}

int selectCudaDevice(int requested, int count) {
  if (count < 1) throw std::runtime_error("the CUDA driver sees no devices");
  if (requested >= count)
    throw std::runtime_error(fmt::format("CUDA device {} requested, but there are {} (0 to {})", requested, count,
                                         count - 1));
  if (requested >= 0) return requested;
  for (const char* var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    long rank = std::strtol(v, &end, 10);
    if (*end != '\0' || rank < 0)
      throw std::runtime_error(fmt::format("${}='{}' is not a non-negative integer", var, v));
    return static_cast<int>(rank % count);
  }
  return 0;
}

}  // namespace tessel::rt
