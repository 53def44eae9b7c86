// The CPU executor: runs a Program's functions step by step. No MLIR, no compiler.
//
// Promise: memory is allocated once, at construction, through an AllocationCounter: one
// 64-byte aligned block per persistent buffer (Parameter, State, Input, Coordinate), one for
// the bf16 GEMMs' f32 scratch, and ONE 64-byte aligned arena of Program::arenaBytes() (the
// max over functions) holding every Temp at its planned offset: memoryBreakdown(program)
// (runtime/exec/MemoryBreakdown.h) predicts the total, and the counter measures it.
// run() allocates nothing. Kernel symbols are resolved once, at construction, through the
// caller's resolver, so the executor does not care how kernels were built; the usual one is
//   tessel::KernelLibrary lib = tessel::buildKernelLibrary(program.kernelSource);
//   Executor exec(program, [&](const std::string& s) { return lib.symbol(s); });
// (the library must outlive the executor). GEMM steps run with OpenBLAS or oneDNN as each
// step's backend says (runtime/exec/CpuGemm.h; prepared once, here), copies call memcpy, kernel steps call `void symbol(void** args)`.
//
// Not thread-safe: one run() at a time per Executor. `threads` sets the process-wide OpenMP
// and OpenBLAS thread counts, which every Executor in the process shares.
#pragma once

#include <array>
#include <chrono>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceMesh.h"
#include "runtime/exec/AllocationCounter.h"
#include "runtime/exec/Program.h"
#include "runtime/exec/ProgramExecutor.h"
#include "runtime/exec/Trace.h"

namespace tessel::rt {
class CpuGemmContext;  // runtime/exec/CpuGemm.h

/// Maps a kernel symbol to its address; may throw or return nullptr when it is missing.
using KernelResolver = std::function<void*(const std::string& symbol)>;

struct ExecutorOptions {
  int threads = 0;  // OpenMP and OpenBLAS threads; 0 keeps the OpenMP/OpenBLAS defaults
  bool profile = false;  // time every step (see stepSeconds)
};

/// What the executor's collective steps did so far (all functions, all runs).
struct CollectiveCounters {
  int64_t collectives = 0;   // collectives issued with group > 1 (all-reduce starts, shard moves)
  int64_t payloadBytes = 0;  // their payload: the bucket bytes, once per start; for the
                             // shard moves Program.h's CollectiveStep payload
  /// The same two, per kind (index collectiveKindIndex: all_reduce, all_gather,
  /// reduce_scatter, all_to_all, send_recv: the bytes sent); they sum to the totals above.
  std::array<int64_t, kCollectiveKinds> kindCollectives{};
  std::array<int64_t, kCollectiveKinds> kindPayloadBytes{};
  /// Bytes the all-reduce steps copied between buckets and their tensors (the start's packing
  /// plus the wait's unpacking; 0 for in-place buckets, Program.h CollectiveStep::inPlace).
  int64_t bucketCopyBytes = 0;
  double startSeconds = 0;   // wall time in start steps (packing the bucket, issuing)
  double waitSeconds = 0;    // wall time in wait steps (blocked on the network + unpacking):
                             // the communication the compute did not hide
};

/// The communicator collective step `c` (issued as `name`) runs on: the mesh's group of its
/// axes when there is a mesh, else `world`. Throws std::runtime_error naming the collective if
/// there is neither, or if that communicator's size is not c.group. Shared by the executors.
Communicator& communicatorOf(const CollectiveStep& c, const std::string& name, DeviceMesh* mesh,
                             Communicator* world);
/// The name a collective step is issued under (timeouts and traces name it): "bucket 3 of
/// @train_step" for a gradient bucket, "all_reduce 'blocks.0.attn.proj' of @train_step over tp" for a synchronous one (by its op's path),
/// "all_gather along dim 1 of @forward over tp" for a shard move.
std::string collectiveName(const CollectiveStep& c, const std::string& function);
/// Adds one issued collective of `c`'s kind with `payloadBytes` to `counters` (totals and
/// per kind). Shared by the executors.
void countCollective(CollectiveCounters& counters, const CollectiveStep& c, int64_t payloadBytes);
/// "sum" -> Sum, "avg" -> Avg, "max" -> Max (a validated CollectiveStep::reduce).
ReduceOp reduceOpOf(const std::string& reduce);

/// The CPU implementation of ProgramExecutor (see the promise above). OutputView data point
/// into executor memory (a Temp output lives in the arena and is reused by the next run).
class Executor final : public ProgramExecutor {
 public:
  /// Validates `program` (validateProgram), allocates all memory (zero-filled) and resolves
  /// every kernel symbol; throws std::runtime_error naming the symbol and the step's location
  /// if one is missing.
  Executor(Program program, const KernelResolver& resolve, ExecutorOptions options = {});
  ~Executor() override;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Parameters from runtime/Init.h (initParameter with their name and this seed; a sharded
  /// one generates only this rank's elements, the values the whole tensor has there:
  /// runtime/exec/Sharding.h initParameterShard at the mesh's coordinates, so a sharded
  /// program needs setMesh first);
  /// State buffers are set to zero.
  void initParameters(uint64_t seed) override;

  /// Base pointer of an f32 buffer (a Temp's points into the arena); throws on a bad id or an
  /// i32 buffer.
  float* data(int buffer);
  /// Base pointer of any buffer.
  void* raw(int buffer);
  /// The id of the buffer called `name`; throws if there is none.
  int bufferId(const std::string& name) const;

  /// Copies `bytes` bytes into input `index` of `function`; the size must match exactly.
  void setInput(const std::string& function, size_t index, const void* data, size_t bytes) override;
  /// The communicator collective steps with group > 1 are issued through (not owned; must
  /// outlive the runs). A bucket of group 1 needs none: its all-reduce is the identity.
  /// run() throws std::runtime_error if a collective's group differs from the
  /// communicator's world size, or if it needs one and none was set.
  void setCommunicator(Communicator* comm) { comm_ = comm; }
  /// For a program with a mesh (Program::mesh): the device mesh its collectives run on (not
  /// owned; must outlive the runs). Each collective step goes to mesh->group(step.axes).
  /// A pipelined program must be this rank's stage's (checkPipelineStage, else it throws);
  /// its groups are formed in one order on every stage (formPipelineGroups).
  /// Creates every group the program's collectives name now, in program order (a collective
  /// call over the world: every rank calls setMesh at the same point). Throws
  /// std::runtime_error if the mesh's axes are not the program's (names and sizes, in order).
  /// A program without a mesh uses setCommunicator instead, as before meshes.
  void setMesh(DeviceMesh* mesh);
  const CollectiveCounters& collectiveCounters() const { return counters_; }

  /// Executes the function's steps in order. A collective start packs its bucket and issues
  /// the all-reduce without waiting; its wait blocks (CommError on timeout) and unpacks. An
  /// all_gather, reduce_scatter or all_to_all step repacks, runs and waits in the step; a
  /// send_recv posts all its transfers on the group along its axis and waits for them
  /// (runtime/exec/PipelineRuntime.h runSendRecv).
  void run(const std::string& function) override;
  /// The function's outputs, in result order.
  std::vector<OutputView> outputs(const std::string& function) const override;

  /// Bytes of the f32 scratch that bf16 GEMMs convert their operands into (0 without bf16
  /// GEMMs): one batch item's A, B and C at the largest GEMM's sizes, allocated once.
  int64_t gemmScratchBytes() const;
  /// The arena's size in bytes (allocated once, at construction).
  int64_t arenaBytes() const override { return program_.arenaBytes(); }
  /// The highest offset + bytes of any Temp touched by a step (or returned as an output) of
  /// any run so far; 0 before the first run.
  int64_t highWaterBytes() const override { return highWater_; }
  /// The counter every block of this executor was allocated through.
  const AllocationCounter* allocationCounter() const override { return &counter_; }
  /// With ExecutorOptions::profile: seconds spent in each step of `function` over all runs so
  /// far (indexed like Function::steps); empty otherwise.
  std::vector<double> stepSeconds(const std::string& function) const;
  const Program& program() const override { return program_; }
  void readBuffer(int buffer, void* out) const override;
  void writeBuffer(int buffer, const void* in) override;
  std::string deviceName() const override { return "cpu"; }
  /// Records every step of every run while `trace` is active (kernels by symbol, GEMMs by
  /// shape, copies, collective starts and waits by the name they are issued under, send_recv
  /// steps as "p2p"), with the step's source location, and each of the function's action spans
  /// as a "pipeline" event enclosing its steps. Not owned; null stops recording.
  void setTrace(TraceRecorder* trace) override { trace_ = trace; }

 private:
  struct Prepared;
  struct PreparedFunction;
  const PreparedFunction& prepared(const std::string& function) const;
  void collective(const PreparedFunction& pf, const Prepared& p);
  /// An AllGather, ReduceScatter or AllToAll step (Program.h; runtime/exec/BlockLayout.h).
  void shardMove(const Prepared& p);
  /// The Start or the Wait of an asynchronous AllGather (Program.h's phase); `work` is its
  /// in-flight slot.
  void asyncAllGather(const Prepared& p, std::unique_ptr<Work>& work);
  /// Records step `index` of `f`, which ran from `start` until now, on trace_.
  void traceStep(const Function& f, size_t index, const Prepared& p, std::chrono::steady_clock::time_point start) const;
  TraceRecorder* trace_ = nullptr;

  Program program_;
  AllocationCounter counter_;  // before the blocks: it outlives them
  std::vector<AllocationCounter::Block> blocks_;  // the arena, the GEMM scratch, each persistent buffer
  std::vector<void*> pointers_;  // per buffer id
  std::unique_ptr<CpuGemmContext> gemmContext_;  // oneDNN's engine and stream, once any GEMM uses it
  std::vector<PreparedFunction> functions_;  // after gemmContext_: its GEMMs use the stream
  std::unordered_map<std::string, size_t> functionIndex_;
  int64_t highWater_ = 0;
  // f32 scratch of bf16 GEMMs (elements of one batch item's A, B and C), its own block.
  int64_t gemmScratchA_ = 0, gemmScratchB_ = 0, gemmScratchC_ = 0;
  float* scratch_ = nullptr;
  DType dtypeOf(int buffer) const;
  ExecutorOptions options_;
  Communicator* comm_ = nullptr;
  DeviceMesh* mesh_ = nullptr;
  CollectiveCounters counters_;
  std::unordered_map<std::string, std::vector<double>> profile_;  // per function, per step
};

}  // namespace tessel::rt
