// The GPU executor's decisions that need no GPU, kept apart so they are unit-tested on any
// machine: how a row-major GemmStep maps onto cuBLASLt's column-major matmul, which module
// image (cubin or PTX) a device can load, which device a process uses, and the pointer
// alignment cuBLASLt's heuristics are told about. No CUDA header, no driver.
#pragma once

#include "runtime/exec/Program.h"

#include <cstdint>
#include <string>

namespace tessel::rt {

/// One operand of a column-major matmul as cuBLASLt describes it: the stored matrix is
/// `rows` x `cols` with leading dimension `ld` (elements), `trans` says whether the matmul
/// uses its transpose, and consecutive batches are `stride` elements apart (0: shared).
struct LtOperand {
  bool trans = false;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
};

/// A GemmStep as a cuBLASLt matmul D = alpha op(A) op(B) + beta C with C = D (column-major).
/// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so cuBLASLt's A is the
/// step's B buffer and its B the step's A buffer (no data moves; only the roles swap):
///   a: the step's B, stored transB ? k x n (ld k) : n x k (ld n) column-major, trans = transB
///   b: the step's A, stored transA ? m x k (ld m) : k x m (ld k) column-major, trans = transA
///   d: n x m, ld n (the step's C, row-major m x n)
/// `batch` matmuls with the step's strides; beta = 1 with accumulate. `serialBatches` is set
/// when batches write one C (strideC 0, batch > 1: a sum over the batch), which a batched
/// matmul would race on; the executor then issues `batch` matmuls of batch 1 in order.
struct LtGemmShape {
  LtOperand a, b, d;
  int64_t m = 0, n = 0, k = 0;  // cuBLASLt's: m = step n, n = step m, k = step k
  int64_t batch = 1;
  float beta = 0.0f;
  bool serialBatches = false;
};

/// The cuBLASLt form of `g` (see LtGemmShape).
LtGemmShape ltGemmShape(const GemmStep& g);

/// The largest power of two <= 256 dividing `address` and, when `batch` > 1, also
/// `strideBytes`: the alignment cuBLASLt's heuristics may assume for an operand (they assume
/// 256 bytes unless told otherwise, and an algorithm chosen for aligned pointers may fault
/// on unaligned ones).
uint32_t operandAlignment(uint64_t address, int64_t strideBytes, int64_t batch);

/// Which image of a bundle's CUDA module a device loads.
enum class CudaImage { Cubin, Ptx };

/// Chooses the image for a device of compute capability major.minor: the cubin built for
/// `arch` ("sm_XY") when the device can run it (same major version, minor >= Y: CUDA's
/// binary compatibility rule), else the PTX (JIT-compiled by the driver) when there is
/// PTX and the device is at least compute_XY. Otherwise throws std::runtime_error naming
/// both archs and what to do ("recompile the bundle with --cuda-arch sm_MN").
CudaImage selectCudaImage(const std::string& arch, bool havePtx, int major, int minor);

/// The device index this process uses among `count` devices: `requested` if >= 0, else the
/// local rank from $LOCAL_RANK, $OMPI_COMM_WORLD_LOCAL_RANK or $SLURM_LOCALID (first set)
/// modulo count, else 0. Throws std::runtime_error if requested >= count or count < 1.
int selectCudaDevice(int requested, int count);

}  // namespace tessel::rt
