// The GPU executor; see CudaExecutor.h. Written against the CUDA 13 driver API and cuBLASLt
// documentation; never run on a GPU so far, only on the tests' stand-in driver (see the
// header's promise for what is tested).
#include "runtime/cuda/CudaExecutor.h"

#include "runtime/Init.h"
#include "runtime/comm/StreamCommunicator.h"
#include "runtime/exec/BlockLayout.h"
#include "runtime/exec/Executor.h"  // communicatorOf, reduceOpOf, countCollective
#include "runtime/exec/Sharding.h"
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/CudaGemm.h"
#include "runtime/cuda/CudaOverlap.h"
#include "runtime/cuda/CudaPlan.h"
#include "runtime/cuda/CudaExecutorState.h"
#include "runtime/numeric/BFloat16.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

namespace tessel::rt {
namespace {

using cuda::check;
using cuda::DriverApi;

constexpr int64_t kDeviceAlign = 256;  // cudaMalloc's alignment; cuBLASLt's best case

int64_t roundUp(int64_t bytes) { return (bytes + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign; }

std::string gib(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

/// The number of parameters of `f`: cuFuncGetParamInfo answers CUDA_ERROR_INVALID_VALUE past
/// the last one; any other error is thrown, naming `what`.
size_t parameterCount(const DriverApi& api, CUfunction f, const std::string& what) {
  size_t n = 0, offset = 0, size = 0;
  CUresult rc;
  while ((rc = api.cuFuncGetParamInfo(f, n, &offset, &size)) == CUDA_SUCCESS) ++n;
  if (rc != CUDA_ERROR_INVALID_VALUE) check(api, rc, "cuFuncGetParamInfo of " + what);
  return n;
}

}  // namespace

CudaExecutor::CudaExecutor(Program program, const CudaBinary& module, CudaExecutorOptions options)
    : program_(std::move(program)), state_(std::make_unique<State>()) {
  validateProgram(program_, "CudaExecutor");
  if (program_.cudaSource.empty())
    throw std::runtime_error("the program has no CUDA kernels; compile it for the GPU (tessel-gpt --emit-bundle DIR "
                             "--device cuda)");
  State& s = *state_;
  s.program = &program_;
  s.api = &cuda::driverApi();
  const DriverApi& api = *s.api;
  s.ck(api.cuInit(0), "cuInit");
  int count = 0;
  s.ck(api.cuDeviceGetCount(&count), "cuDeviceGetCount");
  s.ordinal = selectCudaDevice(options.device, count);
  s.ck(api.cuDeviceGet(&s.device, s.ordinal), "cuDeviceGet");
  char name[256] = {};
  s.ck(api.cuDeviceGetName(name, sizeof name - 1, s.device), "cuDeviceGetName");
  s.name = name;
  s.ck(api.cuDeviceGetAttribute(&s.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s.device), "cuDeviceGetAttribute");
  s.ck(api.cuDeviceGetAttribute(&s.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s.device), "cuDeviceGetAttribute");
  s.image = selectCudaImage(module.arch, !module.ptx.empty(), s.major, s.minor);
  s.ck(api.cuDevicePrimaryCtxRetain(&s.context, s.device), "cuDevicePrimaryCtxRetain");
  s.ck(api.cuCtxSetCurrent(s.context), "cuCtxSetCurrent");
  s.ck(api.cuStreamCreate(&s.stream, CU_STREAM_DEFAULT), "cuStreamCreate");
  const void* image = s.image == CudaImage::Cubin ? static_cast<const void*>(module.cubin.data())
                                                  : static_cast<const void*>(module.ptx.c_str());
  s.ck(api.cuModuleLoadData(&s.module, image),
       fmt::format("cuModuleLoadData ({} for {})", s.image == CudaImage::Cubin ? "cubin" : "PTX JIT", module.arch));
  const char* syncEnv = std::getenv("TESSEL_CUDA_SYNC");
  s.syncEachStep = syncEnv && std::string(syncEnv) == "1";
  s.graphs = options.graphs && !s.syncEachStep;

  // One allocation: persistent buffers, then the arena, then the cuBLASLt workspace.
  std::vector<int64_t> offsets(program_.buffers.size(), 0);
  int64_t persistent = 0;
  for (size_t i = 0; i < program_.buffers.size(); ++i)
    if (program_.buffers[i].kind != BufferKind::Temp) {
      offsets[i] = persistent;
      persistent += roundUp(program_.buffers[i].bytes());
    }
  CudaMemoryReport& m = s.memory;
  m.persistent = persistent;
  m.arena = roundUp(program_.arenaBytes());
  m.workspace = roundUp(std::max<int64_t>(options.workspaceBytes, 0));
  m.allocated = std::max<int64_t>(m.persistent + m.arena + m.workspace, kDeviceAlign);
  size_t free = 0, total = 0;
  s.ck(api.cuMemGetInfo(&free, &total), "cuMemGetInfo");
  if (static_cast<uint64_t>(m.allocated) > free)
    throw std::runtime_error(fmt::format(
        "the program needs {} on the GPU ({} of parameters, state and inputs, {} of planned arena, {} of cuBLASLt "
        "workspace) but {} ({}) has {} free of {}; reduce the model or the batch",
        gib(m.allocated), gib(m.persistent), gib(m.arena), gib(m.workspace), deviceName(), s.ordinal,
        gib(static_cast<int64_t>(free)), gib(static_cast<int64_t>(total))));
  s.ck(api.cuMemAlloc(&s.base, static_cast<size_t>(m.allocated)), fmt::format("cuMemAlloc of {}", gib(m.allocated)));
  s.ck(api.cuMemsetD8Async(s.base, 0, static_cast<size_t>(m.allocated), s.stream), "cuMemsetD8Async");
  const CUdeviceptr arena = s.base + static_cast<CUdeviceptr>(m.persistent);
  const CUdeviceptr workspace = arena + static_cast<CUdeviceptr>(m.arena);
  for (size_t i = 0; i < program_.buffers.size(); ++i) {
    const Buffer& b = program_.buffers[i];
    s.pointers.push_back(b.kind == BufferKind::Temp ? arena + static_cast<CUdeviceptr>(b.offset)
                                                    : s.base + static_cast<CUdeviceptr>(offsets[i]));
  }

  s.lt = &cuda::blasLtApi();
  check(*s.lt, s.lt->cublasLtCreate(&s.handle), "cublasLtCreate");

  auto tempEnd = [&](int id) {
    const Buffer& b = program_.buffers[static_cast<size_t>(id)];
    return b.kind == BufferKind::Temp ? b.offset + b.bytes() : int64_t{0};
  };
  std::unordered_map<std::string, CUfunction> resolved;
  for (const Function& f : program_.functions) {
    State::Fn fn;
    fn.function = &f;
    for (int id : f.outputs) fn.outputsTempEnd = std::max(fn.outputsTempEnd, tempEnd(id));
    for (size_t si = 0; si < f.steps.size(); ++si) {
      State::Step st;
      const Step& step = f.steps[si];
      if (auto* k = std::get_if<KernelStep>(&step)) {
        st.kind = State::Step::Kernel;
        st.what = fmt::format("step {} (kernel {} at {})", si, k->symbol, k->location.empty() ? "?" : k->location);
        auto it = resolved.find(k->symbol);
        if (it == resolved.end()) {
          CUfunction fnc = nullptr;
          s.ck(api.cuModuleGetFunction(&fnc, s.module, k->symbol.c_str()), "cuModuleGetFunction of " + st.what);
          it = resolved.emplace(k->symbol, fnc).first;
        }
        st.function = it->second;
        // cuLaunchKernel reads as many arguments as the kernel has parameters, whatever the
        // step holds: a count that differs would read past the step's arguments on a GPU.
        if (size_t params = parameterCount(api, st.function, st.what); params != k->args.size())
          throw std::runtime_error(fmt::format("{}: the kernel takes {} arguments but the step passes {}", st.what,
                                               params, k->args.size()));
        st.launch = *k->launch;
        if (st.launch.sharedBytes > 48 * 1024)  // above the default limit needs an opt-in
          s.ck(api.cuFuncSetAttribute(st.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(st.launch.sharedBytes)),
               "cuFuncSetAttribute of " + st.what);
        for (int id : k->args) {
          st.args.push_back(s.pointers[static_cast<size_t>(id)]);
          st.tempEnd = std::max(st.tempEnd, tempEnd(id));
        }
      } else if (auto* g = std::get_if<GemmStep>(&step)) {
        st.kind = State::Step::Gemm;
        st.what = fmt::format("step {} (gemm at {})", si, g->location.empty() ? "?" : g->location);
        auto ptr = [&](int id) { return s.pointers[static_cast<size_t>(id)]; };
        auto dt = [&](int id) { return program_.buffers[static_cast<size_t>(id)].dtype; };
        st.tempEnd = std::max({tempEnd(g->a), tempEnd(g->b), tempEnd(g->c)});
        auto epilogueBuffer = [&](int id) -> CUdeviceptr {
          if (id < 0) return 0;
          st.tempEnd = std::max(st.tempEnd, tempEnd(id));
          return ptr(id);
        };
        const cuda::LtEpilogueBuffers ep{epilogueBuffer(g->epilogue.bias), epilogueBuffer(g->epilogue.preActivation),
                                         epilogueBuffer(g->epilogue.residual), epilogueBuffer(g->epilogue.biasGradient)};
        st.gemm = std::make_unique<cuda::LtGemm>(*s.lt, s.handle, *g, ptr(g->a), dt(g->a), ptr(g->b), dt(g->b),
                                                 ptr(g->c), dt(g->c), workspace, static_cast<size_t>(m.workspace), ep);
      } else if (auto* col = std::get_if<CollectiveStep>(&step)) {
        st.kind = State::Step::Collective;
        st.collective = col;
        st.name = collectiveName(*col, f.name);
        st.what = fmt::format("step {} ({} {})", si,
                              col->kind == CollectiveStep::Kind::AllReduceStart ? "packing" : "unpacking", st.name);
        if (col->kind == CollectiveStep::Kind::SendRecv) {  // no bucket (PipelineRuntime.h)
          st.what = fmt::format("step {} ({})", si, st.name);
        } else {
          st.src = s.pointers[static_cast<size_t>(col->buffer)];  // the bucket
          st.bytes = static_cast<size_t>(program_.buffers[static_cast<size_t>(col->buffer)].bytes());
          st.tempEnd = tempEnd(col->buffer);
        }
        for (int id : col->tensors) {
          st.tensors.emplace_back(s.pointers[static_cast<size_t>(id)],
                                  static_cast<size_t>(program_.buffers[static_cast<size_t>(id)].bytes()));
          st.tempEnd = std::max(st.tempEnd, tempEnd(id));
        }
        if (col->movesShards()) {
          st.what = fmt::format("step {} ({})", si, st.name);
          st.move = shardMovePlan(program_, *col);
          st.dtype = program_.buffers[static_cast<size_t>(col->buffer)].dtype;
          st.elementBytes = static_cast<size_t>(dtypeBytes(st.dtype));
          // With a wait after every step, the deferred wait would hide a fault's step.
          st.direct = !s.syncEachStep && directShardMove(program_, *col);
        }
        if (col->group > 1) fn.capturable = false;
        if (fn.inFlight.size() <= static_cast<size_t>(col->bucket)) fn.inFlight.resize(static_cast<size_t>(col->bucket) + 1);
      } else {
        const auto& c = std::get<CopyStep>(step);
        st.kind = State::Step::Copy;
        st.what = fmt::format("step {} (copy)", si);
        st.src = s.pointers[static_cast<size_t>(c.src)];
        st.dst = s.pointers[static_cast<size_t>(c.dst)];
        st.bytes = static_cast<size_t>(program_.buffers[static_cast<size_t>(c.src)].bytes());
        st.tempEnd = std::max(tempEnd(c.src), tempEnd(c.dst));
      }
      fn.steps.push_back(std::move(st));
    }
    fn.waitsBefore = shardMoveWaits(program_, f);
    fn.deferred.resize(f.steps.size());
    // kernelParams point into each step's own args, which no longer move.
    for (State::Step& st : fn.steps)
      for (CUdeviceptr& a : st.args) st.params.push_back(&a);
    if (s.graphs && !fn.capturable)
      std::fprintf(stderr, "tessel: @%s all-reduces across ranks, so it runs eagerly (not as a CUDA graph)\n",
                   f.name.c_str());
    s.index.emplace(f.name, s.functions.size());
    s.functions.push_back(std::move(fn));
  }
  s.sync();
}

CudaExecutor::~CudaExecutor() = default;  // State's destructor releases everything

std::string CudaExecutor::deviceName() const {
  return fmt::format("cuda:{} ({}, sm_{}{})", state_->ordinal, state_->name, state_->major, state_->minor);
}

void CudaExecutor::initParameters(uint64_t seed) {
  State& s = *state_;
  s.sync();
  for (size_t i = 0; i < program_.buffers.size(); ++i) {
    const Buffer& b = program_.buffers[i];
    if (b.kind == BufferKind::State) {
      s.ck(s.api->cuMemsetD8Async(s.pointers[i], 0, static_cast<size_t>(b.bytes()), s.stream), "cuMemsetD8Async");
    } else if (b.kind == BufferKind::Coordinate) {
      std::vector<int> coordinates;
      if (s.mesh) coordinates = s.mesh->layout().coordinates(s.mesh->world().rank());
      int32_t value = coordinateValue(b, s.mesh ? &s.mesh->layout() : nullptr, coordinates);
      writeBuffer(static_cast<int>(i), &value);
    } else if (b.kind == BufferKind::Parameter) {
      std::vector<float> values(static_cast<size_t>(b.numel()));
      std::vector<int> coordinates;
      if (s.mesh) coordinates = s.mesh->layout().coordinates(s.mesh->world().rank());
      initParameterShard(b, s.mesh ? &s.mesh->layout() : nullptr, coordinates, seed, values.data());
      if (b.dtype == DType::BF16) {
        std::vector<uint16_t> half(values.size());
        std::transform(values.begin(), values.end(), half.begin(), numeric::bf16FromFloat);
        writeBuffer(static_cast<int>(i), half.data());
      } else {
        writeBuffer(static_cast<int>(i), values.data());
      }
    }
  }
  s.sync();
}

void CudaExecutor::setInput(const std::string& function, size_t index, const void* data, size_t bytes) {
  State& s = *state_;
  const Function& f = *s.fn(function).function;
  if (index >= f.inputs.size())
    throw std::out_of_range(
        fmt::format("CudaExecutor: function '{}' has {} inputs, not input {}", function, f.inputs.size(), index));
  const int id = f.inputs[index];
  const Buffer& b = program_.buffers[static_cast<size_t>(id)];
  if (bytes != static_cast<size_t>(b.bytes()))
    throw std::runtime_error(fmt::format("CudaExecutor: input {} '{}' of function '{}' takes {} bytes, got {}", index,
                                         b.name, function, b.bytes(), bytes));
  if (bytes > 0)
    s.ck(s.api->cuMemcpyHtoDAsync(s.pointers[static_cast<size_t>(id)], data, bytes, s.stream),
         fmt::format("cuMemcpyHtoDAsync of input '{}'", b.name));
}

void CudaExecutor::run(const std::string& function) {
  State& s = *state_;
  State::Fn& f = s.fn(function);
  s.lastRun = function;
  for (const State::Step& st : f.steps) highWater_ = std::max(highWater_, st.tempEnd);
  highWater_ = std::max(highWater_, f.outputsTempEnd);
  const bool graph = s.graphs && f.capturable;
  if (graph && !f.graph) s.capture(f);
  if (s.pool.empty()) {
    CUevent a = nullptr, b = nullptr;
    s.ck(s.api->cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
    s.ck(s.api->cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
    s.pool.emplace_back(a, b);
  }
  auto [start, stop] = s.pool.back();
  s.pool.pop_back();
  s.pending.push_back({s.index.at(function), start, stop});
  s.ck(s.api->cuEventRecord(start, s.stream), "cuEventRecord");
  if (graph && s.graphs && f.graph)
    s.ck(s.api->cuGraphLaunch(f.graph, s.stream), fmt::format("cuGraphLaunch of @{}", function));
  else
    s.enqueue(f);
  s.ck(s.api->cuEventRecord(stop, s.stream), "cuEventRecord");
}

void CudaExecutor::synchronize() const { state_->sync(); }

std::vector<OutputView> CudaExecutor::outputs(const std::string& function) const {
  State& s = *state_;
  const Function& f = *s.fn(function).function;
  s.sync();
  s.hostOutputs.resize(std::max(s.hostOutputs.size(), f.outputs.size()));
  std::vector<OutputView> out;
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const int id = f.outputs[i];
    const Buffer& b = program_.buffers[static_cast<size_t>(id)];
    std::vector<std::byte>& host = s.hostOutputs[i];
    host.resize(static_cast<size_t>(b.bytes()));
    s.ck(s.api->cuMemcpyDtoH(host.data(), s.pointers[static_cast<size_t>(id)], host.size()),
         fmt::format("cuMemcpyDtoH of output '{}'", f.outputNames[i]));
    out.push_back({f.outputNames[i], id, b.dtype, b.shape, host.data(), b.numel()});
  }
  return out;
}

void CudaExecutor::readBuffer(int buffer, void* out) const {
  if (buffer < 0 || static_cast<size_t>(buffer) >= program_.buffers.size())
    throw std::out_of_range(fmt::format("CudaExecutor: buffer id {} out of range", buffer));
  State& s = *state_;
  s.sync();
  const Buffer& b = program_.buffers[static_cast<size_t>(buffer)];
  s.ck(s.api->cuMemcpyDtoH(out, s.pointers[static_cast<size_t>(buffer)], static_cast<size_t>(b.bytes())),
       fmt::format("cuMemcpyDtoH of '{}'", b.name));
}

void CudaExecutor::writeBuffer(int buffer, const void* in) {
  if (buffer < 0 || static_cast<size_t>(buffer) >= program_.buffers.size())
    throw std::out_of_range(fmt::format("CudaExecutor: buffer id {} out of range", buffer));
  State& s = *state_;
  s.sync();
  const Buffer& b = program_.buffers[static_cast<size_t>(buffer)];
  s.ck(s.api->cuMemcpyHtoD(s.pointers[static_cast<size_t>(buffer)], in, static_cast<size_t>(b.bytes())),
       fmt::format("cuMemcpyHtoD of '{}'", b.name));
}

double CudaExecutor::deviceMilliseconds(const std::string& function) const { return state_->fn(function).milliseconds; }

CudaMemoryReport CudaExecutor::memory() const {
  state_->sync();
  return state_->memory;
}

bool CudaExecutor::usingGraphs() const { return state_->graphs; }

void CudaExecutor::setMesh(DeviceMesh* mesh) {
  State& s = *state_;
  if (mesh && mesh->layout().axes() != program_.mesh)
    throw std::runtime_error(fmt::format("CudaExecutor: the device mesh {} is not the program's mesh",
                                         mesh->layout().describe()));
  s.mesh = mesh;
  if (!mesh) return;
  checkPipelineStage(program_, mesh->layout(), mesh->world().rank());
  if (program_.pipeline) formPipelineGroups(program_, *mesh, nullptr);  // stages differ: canonical order
  for (const Function& f : program_.functions)
    for (const rt::Step& step : f.steps)
      if (auto* c = std::get_if<CollectiveStep>(&step)) useDeviceCommunicator(&mesh->group(c->axes));
}

void CudaExecutor::setCommunicator(Communicator* comm) {
  useDeviceCommunicator(comm);
  state_->comm = comm;
}

void CudaExecutor::useDeviceCommunicator(Communicator* comm) {
  State& s = *state_;
  if (comm && comm->worldSize() > 1) {
    auto* device = dynamic_cast<StreamCommunicator*>(comm);
    if (!device)
      throw std::runtime_error("CudaExecutor: the communicator of a GPU run must take device memory (NCCL); a host "
                               "communicator (MPI) cannot read the GPU's buffers");
    if (device->device() != s.ordinal)
      throw std::runtime_error(fmt::format("CudaExecutor: the communicator uses cuda:{} but this executor runs on "
                                           "cuda:{}; both must use the device of the local rank",
                                           device->device(), s.ordinal));
    device->setComputeStream(s.stream);
  }
}

const CollectiveCounters& CudaExecutor::collectiveCounters() const { return state_->counters; }

}  // namespace tessel::rt
