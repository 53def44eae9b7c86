// The executor interface: what the training loop (runtime/train/Loop.h) and the example
// front ends need from a program runner, implemented by the CPU executor (Executor.h) and
// the GPU executor (runtime/cuda/CudaExecutor.h).
//
// Promise: every implementation runs the same rt::Program (buffers, steps, memory plan) and
// initialises parameters identically (runtime/Init.h: a function of seed and name only), so
// a training loop written against this interface prints the same lines on either device.
#pragma once

#include "runtime/exec/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt {

class TraceRecorder;      // runtime/exec/Trace.h
class AllocationCounter;  // runtime/exec/AllocationCounter.h

/// One output of a function after run(): a view of host memory, valid until the next run()
/// or setInput() (the CPU executor's view points into its arena; the GPU executor's into a
/// host copy made after the device finished).
struct OutputView {
  std::string name;             // the function's outputNames entry
  int buffer = -1;              // buffer id
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  int64_t numel = 0;

  /// Element i of an f32 (or bf16, widened) output (a scalar loss: value()); throws for
  /// other dtypes or i out of range.
  float value(int64_t i = 0) const;
};

/// Runs a Program's functions on some device. Not thread-safe: one call at a time.
class ProgramExecutor {
 public:
  virtual ~ProgramExecutor() = default;

  /// The program being executed (validated).
  virtual const Program& program() const = 0;
  /// Parameters from runtime/Init.h (initParameter with their name and this seed); State
  /// buffers are set to zero.
  virtual void initParameters(uint64_t seed) = 0;
  /// Copies `bytes` bytes into input `index` of `function`; the size must match exactly.
  virtual void setInput(const std::string& function, size_t index, const void* data, size_t bytes) = 0;
  /// Executes the function's steps in order (a GPU executor may return before the device
  /// finished; outputs() and readBuffer() wait for it).
  virtual void run(const std::string& function) = 0;
  /// The function's outputs, in result order.
  virtual std::vector<OutputView> outputs(const std::string& function) const = 0;
  /// Copies buffer `buffer` (Buffer::bytes() bytes) to `out` / from `in`; throws on a bad id.
  virtual void readBuffer(int buffer, void* out) const = 0;
  virtual void writeBuffer(int buffer, const void* in) = 0;
  /// The arena's size in bytes (allocated once, at construction).
  virtual int64_t arenaBytes() const = 0;
  /// The highest offset + bytes of any Temp touched by a step (or returned as an output) of
  /// any run so far; 0 before the first run.
  virtual int64_t highWaterBytes() const = 0;
  /// The counter of the executor's own allocations (runtime/exec/AllocationCounter.h), whose
  /// peak is the measured high-water mark of its memory; null for an executor without one.
  virtual const AllocationCounter* allocationCounter() const { return nullptr; }
  /// "cpu", or the GPU, e.g. "cuda:0 (NVIDIA H200, sm_90)".
  virtual std::string deviceName() const = 0;
  /// Records each executed step on `trace` while it is active (runtime/exec/Trace.h; not
  /// owned, null stops). The CPU executor does; an executor that does not records nothing
  /// below the function (the loop still records the function's run).
  virtual void setTrace(TraceRecorder* trace) { (void)trace; }
};

}  // namespace tessel::rt
