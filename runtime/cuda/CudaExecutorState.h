// The GPU executor's device state (internal to runtime/cuda/CudaExecutor.cpp, which alone
// includes it): the driver and cuBLASLt tables, the context, streams and events, device
// buffers, loaded kernels and GEMM plans per function, CUDA graphs, and the timing and memory
// bookkeeping that CudaExecutor's methods read. Split from CudaExecutor.cpp along the seam
// between what the executor holds (here) and what it does (there).
#pragma once

#include "runtime/cuda/CudaExecutor.h"

#include "runtime/comm/StreamCommunicator.h"
#include "runtime/exec/BlockLayout.h"
#include "runtime/exec/Executor.h"  // communicatorOf, reduceOpOf, countCollective
#include "runtime/exec/PipelineRuntime.h"  // runSendRecv, checkPipelineStage
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/CudaGemm.h"
#include "runtime/cuda/CudaOverlap.h"
#include "runtime/cuda/CudaPlan.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

namespace tessel::rt {

/// Everything a CudaExecutor owns on the device; its destructor releases it all.
struct CudaExecutor::State {
  const Program* program = nullptr;  // the executor's (buffer dtypes of send_recv steps)
  const cuda::DriverApi* api = nullptr;
  const cuda::BlasLtApi* lt = nullptr;
  int ordinal = 0, major = 0, minor = 0;
  std::string name;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  CUmodule module = nullptr;
  cublasLtHandle_t handle = nullptr;
  CUdeviceptr base = 0;
  CudaMemoryReport memory;
  std::vector<CUdeviceptr> pointers;  // per buffer id
  bool graphs = false, syncEachStep = false;
  CudaImage image = CudaImage::Cubin;

  struct Step {
    enum Kind { Kernel, Gemm, Copy, Collective } kind = Kernel;
    CUfunction function = nullptr;
    LaunchConfig launch;
    std::vector<CUdeviceptr> args;  // kernel argument values (device pointers)
    std::vector<void*> params;      // cuLaunchKernel's kernelParams: &args[i]
    std::unique_ptr<cuda::LtGemm> gemm;
    CUdeviceptr src = 0, dst = 0;
    size_t bytes = 0;
    int64_t tempEnd = 0;
    std::string what;  // for errors: "step 3 (kernel k3_add at model.h:45:3)"
    // Collective: the step, the bucket, each tensor's pointer and bytes, the issue name.
    const CollectiveStep* collective = nullptr;
    std::vector<std::pair<CUdeviceptr, size_t>> tensors;
    std::string name;
    // A shard move (`src` is its staging buffer): its copies and call (BlockLayout.h).
    ShardMovePlan move;
    DType dtype = DType::F32;
    size_t elementBytes = 0;
    // A direct shard move (CudaOverlap.h): between its tensors, waited for where waitsBefore says.
    bool direct = false;
  };
  struct Fn {
    const Function* function = nullptr;
    std::vector<Step> steps;
    int64_t outputsTempEnd = 0;
    CUgraphExec graph = nullptr;
    double milliseconds = 0;
    bool capturable = true;  // no collective of group > 1
    std::vector<std::unique_ptr<Work>> inFlight;  // per bucket index, start to wait
    // Direct shard moves: before step i (i = steps.size(): at the end) the compute stream
    // waits for the moves issued at steps waitsBefore[i] (CudaOverlap.h shardMoveWaits),
    // whose Work is held in `deferred`, by step index, from issue to wait.
    std::vector<std::vector<size_t>> waitsBefore;
    std::vector<std::unique_ptr<Work>> deferred;
  };
  std::vector<Fn> functions;
  std::unordered_map<std::string, size_t> index;
  std::string lastRun;
  // Event pairs around runs whose time is not collected yet, and a pool of free ones.
  struct Timing {
    size_t function;
    CUevent start, stop;
  };
  std::vector<Timing> pending;
  std::vector<std::pair<CUevent, CUevent>> pool;
  std::vector<std::vector<std::byte>> hostOutputs;  // outputs() copies
  Communicator* comm = nullptr;
  DeviceMesh* mesh = nullptr;
  CollectiveCounters counters;

  // Releases what the constructor acquired, also when it threw halfway.
  ~State() {
    if (!api) return;
    if (stream) api->cuStreamSynchronize(stream);  // errors are moot now
    for (Fn& f : functions) {
      if (f.graph) api->cuGraphExecDestroy(f.graph);
      f.steps.clear();  // cuBLASLt descriptors, before the handle
    }
    if (handle) lt->cublasLtDestroy(handle);
    for (const Timing& t : pending) pool.emplace_back(t.start, t.stop);
    for (auto [a, b] : pool) {
      api->cuEventDestroy(a);
      api->cuEventDestroy(b);
    }
    if (module) api->cuModuleUnload(module);
    if (base) api->cuMemFree(base);
    if (stream) api->cuStreamDestroy(stream);
    if (context) api->cuDevicePrimaryCtxRelease(device);
  }

  void ck(CUresult rc, const std::string& what) const { cuda::check(*api, rc, what); }

  Fn& fn(const std::string& name) {
    auto it = index.find(name);
    if (it == index.end()) throw std::runtime_error(fmt::format("CudaExecutor: no function named '{}'", name));
    return functions[it->second];
  }

  /// A collective step (see the header): device copies into or out of the bucket on the
  /// stream, and the communicator's all-reduce between them.
  void collective(Fn& f, const Step& s, size_t index) {
    const CollectiveStep& c = *s.collective;
    if (c.kind == CollectiveStep::Kind::SendRecv) {
      // One NCCL group on the communication stream, after the compute stream's work so far;
      // the compute stream then waits for it (Work::wait), so the step is synchronous.
      auto t0 = std::chrono::steady_clock::now();
      std::vector<std::pair<void*, size_t>> tensors;
      for (auto [ptr, bytes] : s.tensors) tensors.emplace_back(reinterpret_cast<void*>(ptr), bytes);
      Communicator& group = communicatorOf(c, s.name, mesh, comm);
      countCollective(counters, c, runSendRecv(c, *program, tensors, group, f.function->name));
      counters.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return;
    }
    if (c.movesShards()) {
      // A split all-gather (FSDP prefetch) runs whole at its Start here; its Wait has nothing
      // left to do: it touches the same tensors, so the compute stream waits for the
      // gather's event there at the latest (CudaOverlap).
      if (c.phase != CollectiveStep::Phase::Wait) shardMove(f, s, index);
      return;
    }
    std::unique_ptr<Work>& work = f.inFlight[static_cast<size_t>(c.bucket)];
    auto t0 = std::chrono::steady_clock::now();
    const bool start = c.kind == CollectiveStep::Kind::AllReduceStart;
    if (!start && work) {
      work->wait();  // the stream waits for the collective; CommError if it already failed
      work.reset();
    }
    if (!c.inPlace) {  // an in-place bucket's tensors already lie in it
      CUdeviceptr at = s.src;
      for (auto [ptr, bytes] : s.tensors) {
        if (bytes > 0)
          ck(start ? api->cuMemcpyDtoDAsync(at, ptr, bytes, stream) : api->cuMemcpyDtoDAsync(ptr, at, bytes, stream),
             "cuMemcpyDtoDAsync of " + s.what);
        at += bytes;
      }
      counters.bucketCopyBytes += static_cast<int64_t>(s.bytes);
    }
    if (start && c.group > 1) {
      Communicator& group = communicatorOf(c, s.name, mesh, comm);
      work = group.allReduce(reinterpret_cast<void*>(s.src), static_cast<int64_t>(s.bytes / sizeof(float)),
                             DType::F32, reduceOpOf(c.reduce), s.name);
      countCollective(counters, c, static_cast<int64_t>(s.bytes));
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (start ? counters.startSeconds : counters.waitSeconds) += seconds;
  }

  /// Enqueues `copies` (elements of s.elementBytes) from `src` to `dst` on the compute
  /// stream: one cuMemcpyDtoDAsync per row of a slice (the rows are the dims before the
  /// moved one, e.g. the batch, so there are few).
  void enqueueCopies(const Step& s, const std::vector<StridedCopy>& copies, CUdeviceptr src, CUdeviceptr dst) {
    const auto e = static_cast<CUdeviceptr>(s.elementBytes);
    for (const StridedCopy& c : copies)
      for (int64_t r = 0; r < c.rows; ++r)
        ck(api->cuMemcpyDtoDAsync(dst + static_cast<CUdeviceptr>(c.dst + r * c.dstPitch) * e,
                                  src + static_cast<CUdeviceptr>(c.src + r * c.srcPitch) * e,
                                  static_cast<size_t>(c.width) * s.elementBytes, stream),
           "cuMemcpyDtoDAsync of " + s.what);
  }

  /// An all_gather, reduce_scatter or all_to_all step (Program.h): the packing copies on the
  /// compute stream, the communicator's collective (NCCL orders it after them by an event on
  /// its own stream), its wait (the compute stream waits for its event), the unpacking copies.
  /// A direct move (CudaOverlap.h) has no copies, and its wait is deferred (waitFor).
  void shardMove(Fn& f, const Step& s, size_t index) {
    const CollectiveStep& c = *s.collective;
    auto t0 = std::chrono::steady_clock::now();
    const CUdeviceptr input = s.tensors[0].first, output = s.tensors[1].first, staging = s.src;
    auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(p); };
    if (c.group == 1) {
      ck(api->cuMemcpyDtoDAsync(output, input, s.tensors[0].second, stream), "cuMemcpyDtoDAsync of " + s.what);
    } else if (s.direct) {
      Communicator& group = communicatorOf(c, s.name, mesh, comm);
      const ShardMovePlan& m = s.move;
      f.deferred[index] = c.kind == CollectiveStep::Kind::AllGather
                              ? group.allGather(ptr(input), ptr(output), m.count, s.dtype, s.name)
                              : group.reduceScatter(ptr(input), ptr(output), m.count, s.dtype,
                                                    reduceOpOf(c.reduce), s.name);
      countCollective(counters, c, m.payloadBytes);
      counters.startSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return;
    } else {
      Communicator& group = communicatorOf(c, s.name, mesh, comm);
      const DType dtype = s.dtype;
      const ShardMovePlan& m = s.move;
      if (m.zeroStaging)  // the padding of an uneven dimension sums zeros
        ck(api->cuMemsetD8Async(staging, 0, static_cast<size_t>(m.count) * s.elementBytes, stream),
           "cuMemsetD8Async of " + s.what);
      enqueueCopies(s, m.pack, input, staging);
      std::unique_ptr<Work> work;
      if (c.kind == CollectiveStep::Kind::AllGather)
        work = group.allGather(ptr(input), ptr(staging), m.count, dtype, s.name);
      else if (c.kind == CollectiveStep::Kind::ReduceScatter)
        work = group.reduceScatter(ptr(staging), ptr(output), m.count, dtype, reduceOpOf(c.reduce), s.name);
      else
        work = group.allToAll(ptr(staging), ptr(staging + static_cast<CUdeviceptr>(m.recvOffset) * s.elementBytes),
                              m.count, dtype, s.name);
      countCollective(counters, c, m.payloadBytes);
      work->wait();
      enqueueCopies(s, m.unpack, staging, output);
    }
    counters.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  /// Makes the compute stream wait for the direct shard moves due before step `index` (the
  /// end of the function when index == steps).
  void waitFor(Fn& f, size_t index) {
    for (size_t issued : f.waitsBefore[index])
      if (std::unique_ptr<Work>& work = f.deferred[issued]) {
        auto t0 = std::chrono::steady_clock::now();
        work->wait();  // the stream waits for the collective's event; CommError if it failed
        work.reset();
        counters.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
  }

  void enqueue(Fn& f) {
    for (size_t index = 0; index < f.steps.size(); ++index) {
      const Step& s = f.steps[index];
      waitFor(f, index);
      switch (s.kind) {
        case Step::Kernel:
          ck(api->cuLaunchKernel(s.function, s.launch.grid[0], s.launch.grid[1], s.launch.grid[2], s.launch.block[0],
                                 s.launch.block[1], s.launch.block[2], s.launch.sharedBytes, stream,
                                 const_cast<void**>(s.params.data()), nullptr),
             "cuLaunchKernel of " + s.what);
          break;
        case Step::Gemm:
          s.gemm->enqueue(stream);
          break;
        case Step::Copy:
          ck(api->cuMemcpyDtoDAsync(s.dst, s.src, s.bytes, stream), "cuMemcpyDtoDAsync of " + s.what);
          break;
        case Step::Collective:
          collective(f, s, index);
          break;
      }
      if (syncEachStep)
        ck(api->cuStreamSynchronize(stream), fmt::format("@{} {}", f.function->name, s.what));
    }
    waitFor(f, f.steps.size());
  }

  /// Captures `f` into a graph; on failure reports it once and turns graphs off.
  void capture(Fn& f) {
    std::string error;
    CUresult rc = api->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (rc != CUDA_SUCCESS) {
      error = "cuStreamBeginCapture: " + cuda::errorText(*api, rc);
    } else {
      try {
        enqueue(f);
      } catch (const std::exception& e) {
        error = e.what();
      }
      CUgraph graph = nullptr;
      rc = api->cuStreamEndCapture(stream, &graph);
      if (error.empty() && rc != CUDA_SUCCESS) error = "cuStreamEndCapture: " + cuda::errorText(*api, rc);
      if (error.empty()) {
        rc = api->cuGraphInstantiate(&f.graph, graph, 0);
        if (rc != CUDA_SUCCESS) {
          error = "cuGraphInstantiate: " + cuda::errorText(*api, rc);
          f.graph = nullptr;
        }
      }
      if (graph) api->cuGraphDestroy(graph);
    }
    if (!error.empty()) {
      std::fprintf(stderr, "tessel: capturing @%s into a CUDA graph failed (%s); running eagerly\n",
                   f.function->name.c_str(), error.c_str());
      graphs = false;
    }
  }

  void sync() {
    CUresult rc = api->cuStreamSynchronize(stream);
    if (rc != CUDA_SUCCESS)
      throw std::runtime_error(fmt::format(
          "the GPU failed while running @{}: {} (rerun with TESSEL_CUDA_SYNC=1 to find the step)",
          lastRun.empty() ? "?" : lastRun, cuda::errorText(*api, rc)));
    for (const Timing& t : pending) {
      float ms = 0;
      if (api->cuEventElapsedTime(&ms, t.start, t.stop) == CUDA_SUCCESS) functions[t.function].milliseconds += ms;
      pool.emplace_back(t.start, t.stop);
    }
    pending.clear();
    size_t free = 0, total = 0;
    if (api->cuMemGetInfo(&free, &total) == CUDA_SUCCESS) {
      memory.deviceTotal = static_cast<int64_t>(total);
      memory.devicePeakUsed = std::max(memory.devicePeakUsed, static_cast<int64_t>(total - free));
    }
  }
};

}  // namespace tessel::rt
