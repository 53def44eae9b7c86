// The GPU executor: runs a Program lowered for the CUDA target (kernel steps with launches,
// Program::cudaSource compiled to a cubin) on one NVIDIA GPU through the CUDA driver API and
// cuBLASLt, both opened with dlopen (runtime/cuda/CudaApi.h), so this file builds and links
// on machines without a GPU or driver.
//
// Promise (as designed and reviewed against the CUDA 13 documentation; it has NOT been run on
// a GPU: the machines it was developed on have none. What is tested without one: the
// lowering, launches, argument order and step order by running the same program's CUDA
// source on the CPU (SIMT harness), the GEMM operand mapping against OpenBLAS, symbol
// resolution against the toolkit's stub driver, the clear failure without a driver, and this
// file's own calls, capture included, against the tests' stand-in driver and cuBLASLt, which
// run them on the CPU: test/standin, docs/gpu.md):
// - Construction: cuInit, the device of this process's local rank (CudaPlan.h
//   selectCudaDevice), its primary context, one stream, the module from the cubin (or PTX,
//   CudaPlan.h selectCudaImage), every kernel symbol resolved and its parameter count
//   checked against its steps' arguments (cuFuncGetParamInfo), ONE device allocation holding
//   the persistent buffers (parameters, optimizer state, inputs), the planned arena
//   (Program::arenaBytes) and the cuBLASLt workspace, zero-filled; every GEMM step's
//   cuBLASLt descriptors and algorithm chosen. Before allocating, the need is checked
//   against the device's free memory (an error with the numbers, not an allocation failure).
// - run(): the function's steps enqueued in order on the stream (cuLaunchKernel with the
//   step's launch, cublasLtMatmul, cuMemcpyDtoDAsync); with options.graphs the first run of
//   a function is captured into a CUDA graph (cuStreamBeginCapture / EndCapture,
//   cuGraphInstantiate) and every run launches that graph (one cuGraphLaunch). run() returns
//   without waiting; outputs(), readBuffer() and synchronize() wait and report a device
//   fault with the function's name. With TESSEL_CUDA_SYNC=1 every step is waited for, so a
//   fault names its step and the op's source location.
// - setInput(): an asynchronous host-to-device copy on the stream (the host data may be
//   reused as soon as it returns: the driver stages pageable memory).
// - initParameters(): the CPU executor's values (runtime/Init.h), computed on the host and
//   uploaded (bf16 buffers rounded to nearest even); optimizer state zero.
// - Shard moves (all_gather, reduce_scatter, all_to_all steps; fully sharded and tensor
//   parallelism): issued through the communicator on its stream; one along a leading
//   dimension runs straight between its tensors, and this stream waits for it only before the
//   first later step touching its memory or at the end of the function
//   (runtime/cuda/CudaOverlap.h); any other packs into its staging buffer, and this stream
//   waits right after the issue, then unpacks.
// - Collective steps (data parallelism): a start packs the bucket's gradients into the flat
//   bucket buffer with device-to-device copies on the stream, then issues the all-reduce
//   through the communicator (setCommunicator: a StreamCommunicator such as NCCL, whose
//   communication stream is ordered after this stream by an event); its wait makes this
//   stream wait for the collective (no host block) and unpacks with device copies. A bucket
//   of group 1 is only packed and unpacked. Functions with collectives of group > 1 are never
//   captured into CUDA graphs (they run eagerly, with a note on stderr when graphs were
//   asked for): the collective is issued by the host through the communicator, which a
//   captured graph would not replay.
// - Send_recv steps (pipeline parallelism, runtime/exec/PipelineRuntime.h): every transfer
//   of the step is issued as one group (Communicator::sendRecv: ncclGroupStart, ncclSend /
//   ncclRecv on the device buffers, ncclGroupEnd) on the communication stream, after this
//   stream's work so far; this stream then waits for the group. Action spans are not traced
//   here (the GPU executor records no trace).
// Not thread-safe. One executor per process and device is the intended use.
#pragma once

#include "runtime/bundle/Bundle.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceMesh.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ProgramExecutor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

struct CudaExecutorOptions {
  int device = -1;             // CUDA device index; -1: by local rank (CudaPlan.h)
  bool graphs = false;         // capture each function into a CUDA graph and replay it
  int64_t workspaceBytes = 32 << 20;  // cuBLASLt workspace (32 MiB: enough for Hopper's kernels)
};

/// Device memory as the executor accounts for it, in bytes.
struct CudaMemoryReport {
  int64_t persistent = 0;  // parameters, optimizer state, inputs (each 256-byte aligned)
  int64_t arena = 0;       // the planned arena of temporaries
  int64_t workspace = 0;   // cuBLASLt
  int64_t allocated = 0;   // the one cuMemAlloc: persistent + arena + workspace
  int64_t devicePeakUsed = 0;  // max over synchronisations of total - free (cuMemGetInfo):
                               // everything on the device, context and modules included
  int64_t deviceTotal = 0;
};

class CudaExecutor final : public ProgramExecutor {
 public:
  /// Loads `module` (a bundle's cubin/PTX for `program`) and allocates everything; throws
  /// std::runtime_error with the reason (no driver, no device, wrong arch, not enough memory,
  /// a missing kernel, a CUDA error naming the call).
  CudaExecutor(Program program, const CudaBinary& module, CudaExecutorOptions options = {});
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  const Program& program() const override { return program_; }
  void initParameters(uint64_t seed) override;
  void setInput(const std::string& function, size_t index, const void* data, size_t bytes) override;
  void run(const std::string& function) override;
  std::vector<OutputView> outputs(const std::string& function) const override;
  void readBuffer(int buffer, void* out) const override;
  void writeBuffer(int buffer, const void* in) override;
  int64_t arenaBytes() const override { return program_.arenaBytes(); }
  int64_t highWaterBytes() const override { return highWater_; }
  std::string deviceName() const override;

  /// Waits for everything enqueued; throws on a device fault.
  void synchronize() const;
  /// Milliseconds the device spent in runs of `function` (events around each run), over the
  /// runs completed by the last synchronisation.
  double deviceMilliseconds(const std::string& function) const;
  /// Device memory (synchronises first).
  CudaMemoryReport memory() const;
  /// The communicator of collective steps with group > 1 (not owned; must outlive the runs):
  /// a StreamCommunicator (runtime/comm/StreamCommunicator.h, e.g. NCCL) on this executor's
  /// device, whose compute stream becomes this executor's stream. Throws std::runtime_error
  /// for one on another device, or for a host communicator (MPI), whose collectives cannot
  /// read device memory. nullptr: none (a group > 1 collective then fails in run()).
  void setCommunicator(Communicator* comm);
  /// For a program with a mesh (Program::mesh): the device mesh (over a StreamCommunicator
  /// world, e.g. NCCL) whose group of each collective step's axes runs it; every group the
  /// program names is created now (collectively, in program order) and checked as
  /// setCommunicator checks its communicator. Throws std::runtime_error if the mesh is not the
  /// program's, or if a pipelined program is not this rank's stage's (checkPipelineStage).
  /// Sharded parameters are initialised at the mesh's coordinates (initParameters).
  void setMesh(DeviceMesh* mesh);
  /// What the collective steps did (CollectiveCounters, runtime/exec/Executor.h); the seconds
  /// are host time spent issuing (start) and enqueuing the stream wait (wait), not device time.
  const CollectiveCounters& collectiveCounters() const;
  /// Whether runs replay CUDA graphs (false after a capture failed and the executor fell
  /// back to eager launches, which it reports on stderr).
  bool usingGraphs() const;

 private:
  /// Checks that `comm` (size > 1) is a StreamCommunicator on this device and orders its
  /// stream after this executor's (setCommunicator's checks).
  void useDeviceCommunicator(Communicator* comm);

  struct State;
  Program program_;
  std::unique_ptr<State> state_;
  int64_t highWater_ = 0;
};

}  // namespace tessel::rt
