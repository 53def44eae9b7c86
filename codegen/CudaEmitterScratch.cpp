// The scratch of the CUDA two-level sums (see CudaEmitter.h): the writer's scratch parameter,
// the second level (the last block to finish adds the chunk sums), and the kernel that
// resets a scratch's counter before its first use.
//
// Layout of a scratch: bytes [0, 4) count the blocks that have finished (0 at launch, 0
// again when the kernel ends); the chunk sums start at kScratchHeaderBytes (16, so doubles
// are aligned). No kernel keeps state in module-scope __device__ variables, so launches on
// different scratch may overlap.
#include "codegen/CudaEmitterInternal.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace tessel {
namespace cudagen {

void CudaWriter::scratch(const std::string& type, int64_t count) {
  if (scratchBytes_ != 0)
    throw std::logic_error("CUDA emitter: a second scratch for '" + symbol_ + "'");
  count = std::max<int64_t>(count, 1);
  scratchBytes_ = kScratchHeaderBytes + count * (type == "double" ? 8 : 4);
  scratchParam_ = "    unsigned char* scratch";
  scratchDecls_ = fmt::format(
      "// The scratch (in the arena): the count of finished blocks, 0 at launch and again at\n"
      "// exit, then the chunk sums.\n"
      "unsigned int* const done = reinterpret_cast<unsigned int*>(scratch);\n"
      "{0}* const chunkSums = reinterpret_cast<{0}*>(scratch + {1});\n",
      type, kScratchHeaderBytes);
  describe("Reentrant: the chunk sums and the block counter live in `scratch`, not in globals.");
}

std::string lastBlockCombine(CudaWriter& w, const std::string& type, int64_t count,
                             const std::string& combine) {
  w.scratch(type, count);
  return fmt::format(
      "// The last block to finish adds the chunk sums, in chunk order.\n"
      "__shared__ bool isLast;\n"
      "__threadfence();  // this block's chunk sums are visible before it is counted\n"
      "__syncthreads();\n"
      "if (threadIdx.x == 0) isLast = atomicAdd(done, 1u) == gridDim.x - 1;\n"
      "__syncthreads();\n"
      "if (isLast) {{\n"
      "  const volatile {0}* partial = chunkSums;  // written by other blocks: not from L1\n"
      "{1}"
      "  if (threadIdx.x == 0) *done = 0;  // the scratch is ready for the next launch\n"
      "}}\n",
      type, indent(combine, 2));
}

}  // namespace cudagen

CudaKernel emitScratchReset(llvm::StringRef symbol) {
  std::string source = fmt::format(
      "// The counter of finished blocks in a scratch, set to 0 before the first kernel that\n"
      "// uses it (the arena's bytes were another buffer's); each such kernel leaves it 0.\n"
      "extern \"C\" __global__ void __launch_bounds__(32, 32) {}(\n"
      "    unsigned char* scratch) {{                           // scratch: counter, then chunk sums\n"
      "  // launch: grid (1, 1, 1), block (32, 1, 1): one thread stores\n"
      "  if (blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<unsigned int*>(scratch) = 0u;\n"
      "}}\n",
      symbol.str());
  return CudaKernel{std::move(source), CudaLaunch{{1, 1, 1}, {32, 1, 1}, 0},
                    CudaKernelKind::Scalar, 0};
}

}  // namespace tessel
