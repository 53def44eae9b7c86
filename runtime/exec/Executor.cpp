// The CPU executor; see Executor.h.
//
// Construction allocates every block through the AllocationCounter, then
// turns every step into a Prepared record holding raw pointers (resolved kernel address,
// argument pointer array, GEMM operand bases, copy size) and the step's Temp
// high-water mark (max offset + bytes of the Temps it touches), so run() is a loop with no
// lookups and no allocation.
#include "runtime/exec/Executor.h"

#include "runtime/numeric/BFloat16.h"

#include <cblas.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <unistd.h>
#include <cstring>
#include <stdexcept>

#include "runtime/Init.h"
#include "runtime/exec/BlockLayout.h"
#include "runtime/exec/CpuGemm.h"
#include "runtime/exec/GemmEpilogue.h"
#include "runtime/exec/MemoryBreakdown.h"
#include "runtime/exec/PipelineRuntime.h"  // defines: runSendRecv, ActionTracer, checkPipelineStage
#include "runtime/exec/Sharding.h"

namespace tessel::rt {
struct Executor::Prepared {
  enum Kind { Kernel, Gemm, Copy, Collective } kind;
  int64_t tempEnd = 0;  // max offset + bytes of the Temps this step touches
  // Kernel
  void (*fn)(void**) = nullptr;
  std::vector<void*> args;
  // Gemm (the step itself, for dims, strides and flags) and operand bases.
  const GemmStep* gemm = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  std::shared_ptr<const CpuGemm> cpuGemm;  // bound to the operands and its backend (CpuGemm.h)
  GemmEpilogueOperands epilogue;  // the fused epilogue's buffers (GemmEpilogue.h), if any
  // Copy
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
  // Collective: the step, the bucket, each tensor's pointer and bytes, the name it is issued
  // under ("bucket 3 of @train_step").
  const CollectiveStep* collective = nullptr;
  float* bucket = nullptr;
  std::vector<std::pair<void*, size_t>> tensors;
  std::string name;
  // A shard move (`bucket` is its staging buffer): its copies and call (BlockLayout.h).
  ShardMovePlan move;
  size_t elementBytes = 0;
};

struct Executor::PreparedFunction {
  const Function* function = nullptr;
  std::vector<Prepared> steps;
  int64_t outputsTempEnd = 0;
  mutable std::vector<std::unique_ptr<Work>> inFlight;  // per bucket index, start to wait
};

Executor::Executor(Program program, const KernelResolver& resolve, ExecutorOptions options)
    : program_(std::move(program)),
      options_(options) {
  validateProgram(program_, "Executor");
  if (options.threads < 0)
    throw std::runtime_error(fmt::format("Executor: threads {} is negative", options.threads));
  if (options.threads > 0) setCpuGemmThreads(options.threads);  // CpuGemm.h: only what changes

  // Memory: a block per persistent buffer, Temps at their planned offsets in the arena; all of
  // it through counter_, so its peak measures what was really allocated.
  const MemoryBreakdown planned = memoryBreakdown(program_);
  const GemmScratch scratch = gemmScratchOf(program_);
  gemmScratchA_ = scratch.a;
  gemmScratchB_ = scratch.b;
  gemmScratchC_ = scratch.c;
  // Check the total against the machine before touching any memory: a plan that cannot fit
  // is an error with numbers, not a kill by the OOM killer halfway through zero-filling.
  const double total = static_cast<double>(planned.total());
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (physical > 0 && total > physical)
    throw std::runtime_error(fmt::format(
        "the program needs {:.2f} GiB ({:.2f} GiB of parameters, state, inputs and GEMM scratch, {:.2f} GiB of "
        "planned arena) but this machine has {:.2f} GiB of memory; reduce the model or the batch",
        total / (1 << 30), (total - static_cast<double>(program_.arenaBytes())) / (1 << 30),
        static_cast<double>(program_.arenaBytes()) / (1 << 30), physical / (1 << 30)));
  // Each persistent buffer is a block of its own, the GEMM scratch one, the arena one: the
  // counter sees every allocation as made, whatever the breakdown predicted.
  auto block = [&](int64_t bytes, MemoryRole role) {
    blocks_.push_back(counter_.allocate(bytes, role));
    return blocks_.back().get();
  };
  std::byte* arena = program_.arenaBytes() > 0 ? block(program_.arenaBytes(), MemoryRole::Arena) : nullptr;
  if (gemmScratchBytes() > 0) scratch_ = reinterpret_cast<float*>(block(gemmScratchBytes(), MemoryRole::GemmScratch));
  for (const Buffer& b : program_.buffers)
    pointers_.push_back(b.kind == BufferKind::Temp ? arena + b.offset : block(b.bytes(), persistentRole(b)));

  auto tempEnd = [&](int id) {
    const Buffer& b = program_.buffers[static_cast<size_t>(id)];
    return b.kind == BufferKind::Temp ? b.offset + b.bytes() : int64_t{0};
  };
  std::unordered_map<std::string, void (*)(void**)> resolved;
  functions_.reserve(program_.functions.size());
  for (const Function& f : program_.functions) {
    PreparedFunction pf;
    pf.function = &f;
    for (int id : f.outputs) pf.outputsTempEnd = std::max(pf.outputsTempEnd, tempEnd(id));
    for (const Step& step : f.steps) {
      Prepared p{};
      if (auto* k = std::get_if<KernelStep>(&step)) {
        p.kind = Prepared::Kernel;
        auto it = resolved.find(k->symbol);
        if (it == resolved.end()) {
          void* address = nullptr;
          std::string why = "the resolver returned null";
          try {
            address = resolve(k->symbol);
          } catch (const std::exception& e) {
            why = e.what();
          }
          if (!address)
            throw std::runtime_error(fmt::format("Executor: kernel '{}' (function '{}', at {}) cannot be resolved: {}",
                                                 k->symbol, f.name, k->location.empty() ? "?" : k->location, why));
          it = resolved.emplace(k->symbol, reinterpret_cast<void (*)(void**)>(address)).first;
        }
        p.fn = it->second;
        for (int id : k->args) {
          p.args.push_back(pointers_[static_cast<size_t>(id)]);
          p.tempEnd = std::max(p.tempEnd, tempEnd(id));
        }
      } else if (auto* g = std::get_if<GemmStep>(&step)) {
        p.kind = Prepared::Gemm;
        p.gemm = g;
        p.a = pointers_[static_cast<size_t>(g->a)];
        p.b = pointers_[static_cast<size_t>(g->b)];
        p.c = pointers_[static_cast<size_t>(g->c)];
        const GemmDTypes types{dtypeOf(g->a), dtypeOf(g->b), dtypeOf(g->c)};
        if (g->backend == GemmBackend::OneDnn && !gemmContext_) gemmContext_ = std::make_unique<CpuGemmContext>();
        p.tempEnd = std::max({tempEnd(g->a), tempEnd(g->b), tempEnd(g->c)});
        const GemmEpilogue& e = g->epilogue;
        auto epilogueBuffer = [&](int id, bool* bf16) -> void* {
          if (id < 0) return nullptr;
          if (bf16) *bf16 = dtypeOf(id) == DType::BF16;
          p.tempEnd = std::max(p.tempEnd, tempEnd(id));
          return pointers_[static_cast<size_t>(id)];
        };
        p.epilogue.bias = epilogueBuffer(e.bias, &p.epilogue.biasBF16);
        p.epilogue.preActivation = epilogueBuffer(e.preActivation, &p.epilogue.preActivationBF16);
        p.epilogue.residual = epilogueBuffer(e.residual, &p.epilogue.residualBF16);
        p.epilogue.biasGradient = static_cast<float*>(epilogueBuffer(e.biasGradient, nullptr));
        p.cpuGemm = std::make_shared<const CpuGemm>(  // it applies the epilogue too
            *g, types, g->backend, p.a, p.b, p.c,
            GemmF32Scratch{scratch_, GemmScratch{gemmScratchA_, gemmScratchB_, gemmScratchC_}}, gemmContext_.get(),
            p.epilogue);
      } else if (auto* c = std::get_if<CopyStep>(&step)) {
        p.kind = Prepared::Copy;
        p.src = pointers_[static_cast<size_t>(c->src)];
        p.dst = pointers_[static_cast<size_t>(c->dst)];
        p.bytes = static_cast<size_t>(program_.buffers[static_cast<size_t>(c->src)].bytes());
        p.tempEnd = std::max(tempEnd(c->src), tempEnd(c->dst));
      } else {
        const auto& col = std::get<CollectiveStep>(step);
        p.kind = Prepared::Collective;
        p.collective = &col;
        const bool p2p = col.kind == CollectiveStep::Kind::SendRecv;  // no bucket: bytes = the bytes sent
        p.bucket = p2p ? nullptr : static_cast<float*>(pointers_[static_cast<size_t>(col.buffer)]);
        p.bytes = p2p ? 0 : static_cast<size_t>(program_.buffers[static_cast<size_t>(col.buffer)].bytes());
        p.tempEnd = p2p ? 0 : tempEnd(col.buffer);
        for (size_t i = 0; p2p && i < static_cast<size_t>(col.sends); ++i)
          p.bytes += static_cast<size_t>(program_.buffers[static_cast<size_t>(col.tensors[i])].bytes());
        for (int id : col.tensors) {
          p.tensors.emplace_back(pointers_[static_cast<size_t>(id)],
                                 static_cast<size_t>(program_.buffers[static_cast<size_t>(id)].bytes()));
          p.tempEnd = std::max(p.tempEnd, tempEnd(id));
        }
        p.name = collectiveName(col, f.name);
        if (col.movesShards()) {
          p.move = shardMovePlan(program_, col);
          p.elementBytes = static_cast<size_t>(dtypeBytes(program_.buffers[static_cast<size_t>(col.buffer)].dtype));
        }
        if (pf.inFlight.size() <= static_cast<size_t>(col.bucket)) pf.inFlight.resize(static_cast<size_t>(col.bucket) + 1);
      }
      pf.steps.push_back(std::move(p));
    }
    functionIndex_.emplace(f.name, functions_.size());
    functions_.push_back(std::move(pf));
  }
}

Executor::~Executor() = default;

DType Executor::dtypeOf(int buffer) const { return program_.buffers[static_cast<size_t>(buffer)].dtype; }

int64_t Executor::gemmScratchBytes() const {
  return GemmScratch{gemmScratchA_, gemmScratchB_, gemmScratchC_}.bytes();
}

void Executor::initParameters(uint64_t seed) {
  std::vector<int> coordinates;
  if (mesh_) coordinates = mesh_->layout().coordinates(mesh_->world().rank());
  for (size_t i = 0; i < program_.buffers.size(); ++i) {
    const Buffer& b = program_.buffers[i];
    if (b.kind == BufferKind::State) {
      zeroBlockRange(pointers_[i], b.bytes());  // optimizer state: faulted in by the first step
    } else if (b.kind == BufferKind::Parameter) {
      initParameterShard(b, mesh_ ? &mesh_->layout() : nullptr, coordinates, seed, static_cast<float*>(pointers_[i]));
    } else if (b.kind == BufferKind::Coordinate) {
      *static_cast<int32_t*>(pointers_[i]) = coordinateValue(b, mesh_ ? &mesh_->layout() : nullptr, coordinates);
    }
  }
}

void Executor::setMesh(DeviceMesh* mesh) {
  if (mesh && mesh->layout().axes() != program_.mesh)
    throw std::runtime_error(fmt::format("Executor: the device mesh {} is not the program's mesh",
                                         mesh->layout().describe()));
  mesh_ = mesh;
  if (!mesh_) return;
  checkPipelineStage(program_, mesh_->layout(), mesh_->world().rank());
  if (program_.pipeline) return formPipelineGroups(program_, *mesh_, &mesh_->world());  // stages differ
  for (const Function& f : program_.functions)
    for (const Step& step : f.steps)
      if (auto* c = std::get_if<CollectiveStep>(&step)) mesh_->group(c->axes);
}

void* Executor::raw(int buffer) {
  if (buffer < 0 || static_cast<size_t>(buffer) >= pointers_.size())
    throw std::out_of_range(fmt::format("Executor: buffer id {} out of range [0, {})", buffer, pointers_.size()));
  return pointers_[static_cast<size_t>(buffer)];
}

float* Executor::data(int buffer) {
  void* p = raw(buffer);
  const Buffer& b = program_.buffers[static_cast<size_t>(buffer)];
  if (b.dtype != DType::F32)
    throw std::runtime_error(fmt::format("Executor: buffer {} '{}' is not f32 (use raw())", buffer, b.name));
  return static_cast<float*>(p);
}

void Executor::readBuffer(int buffer, void* out) const {
  void* p = const_cast<Executor*>(this)->raw(buffer);
  std::memcpy(out, p, static_cast<size_t>(program_.buffers[static_cast<size_t>(buffer)].bytes()));
}

void Executor::writeBuffer(int buffer, const void* in) {
  std::memcpy(raw(buffer), in, static_cast<size_t>(program_.buffers[static_cast<size_t>(buffer)].bytes()));
}

int Executor::bufferId(const std::string& name) const {
  int id = program_.findBuffer(name);
  if (id < 0) throw std::runtime_error(fmt::format("Executor: no buffer named '{}'", name));
  return id;
}

const Executor::PreparedFunction& Executor::prepared(const std::string& function) const {
  auto it = functionIndex_.find(function);
  if (it == functionIndex_.end()) throw std::runtime_error(fmt::format("Executor: no function named '{}'", function));
  return functions_[it->second];
}

void Executor::setInput(const std::string& function, size_t index, const void* data, size_t bytes) {
  const Function& f = *prepared(function).function;
  if (index >= f.inputs.size())
    throw std::out_of_range(
        fmt::format("Executor: function '{}' has {} inputs, not input {}", function, f.inputs.size(), index));
  int id = f.inputs[index];
  const Buffer& b = program_.buffers[static_cast<size_t>(id)];
  if (bytes != static_cast<size_t>(b.bytes()))
    throw std::runtime_error(fmt::format("Executor: input {} '{}' of function '{}' takes {} bytes, got {}", index,
                                         b.name, function, b.bytes(), bytes));
  if (bytes > 0) std::memcpy(pointers_[static_cast<size_t>(id)], data, bytes);
}

std::vector<double> Executor::stepSeconds(const std::string& function) const {
  auto it = profile_.find(function);
  return it == profile_.end() ? std::vector<double>() : it->second;
}

void Executor::run(const std::string& function) {
  const PreparedFunction& pf = prepared(function);
  std::vector<double>* times = nullptr;
  if (options_.profile) {
    times = &profile_[function];
    times->resize(pf.steps.size(), 0.0);
  }
  const bool tracing = trace_ && trace_->active();
  ActionTracer actions(pf.function->actions, tracing ? trace_ : nullptr);
  for (size_t si = 0; si < pf.steps.size(); ++si) {
    const Prepared& p = pf.steps[si];
    actions.beforeStep(si);
    auto t0 = times || tracing ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    highWater_ = std::max(highWater_, p.tempEnd);
    switch (p.kind) {
      case Prepared::Kernel:
        p.fn(const_cast<void**>(p.args.data()));
        break;
      case Prepared::Gemm:
        p.cpuGemm->run();  // with the epilogue (CpuGemm.h)
        break;
      case Prepared::Copy:
        std::memcpy(p.dst, p.src, p.bytes);
        break;
      case Prepared::Collective:
        collective(pf, p);
        break;
    }
    if (times)
      (*times)[si] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (tracing) traceStep(*pf.function, si, p, t0);
    actions.afterStep(si);
  }
  highWater_ = std::max(highWater_, pf.outputsTempEnd);
}

void Executor::traceStep(const Function& f, size_t index, const Prepared& p,
                         std::chrono::steady_clock::time_point start) const {
  const auto end = std::chrono::steady_clock::now();
  const Step& step = f.steps[index];
  switch (p.kind) {
    case Prepared::Kernel: {
      const auto& k = std::get<KernelStep>(step);
      trace_->complete(k.symbol, "kernel", start, end, k.location);
      return;
    }
    case Prepared::Gemm: {
      const GemmStep& g = *p.gemm;
      trace_->complete(fmt::format("gemm {}x{}x{}{}", g.m, g.n, g.k, g.batch > 1 ? fmt::format(" x{}", g.batch) : ""),
                       "gemm", start, end, g.location);
      return;
    }
    case Prepared::Copy: trace_->complete("copy", "copy", start, end, fmt::format("{} bytes", p.bytes)); return;
    case Prepared::Collective: {
      const CollectiveStep& c = *p.collective;
      const char* category = c.kind == CollectiveStep::Kind::SendRecv ? "p2p"
                             : c.movesShards() && c.phase == CollectiveStep::Phase::Whole ? "collective"
                             : c.movesShards() ? (c.phase == CollectiveStep::Phase::Start ? "collective_start"
                                                                                          : "collective_wait")
                             : c.kind == CollectiveStep::Kind::AllReduceStart ? "collective_start"
                                                                              : "collective_wait";
      trace_->complete(p.name, category, start, end,
                       fmt::format("{} bytes{}", p.bytes, c.unit.empty() ? "" : ", unit " + c.unit));
      return;
    }
  }
}

void Executor::collective(const PreparedFunction& pf, const Prepared& p) {
  const CollectiveStep& c = *p.collective;
  if (c.kind == CollectiveStep::Kind::SendRecv) {  // synchronous: all of its time is exposed
    auto t0 = std::chrono::steady_clock::now();
    Communicator& group = communicatorOf(c, p.name, mesh_, comm_);
    countCollective(counters_, c, runSendRecv(c, program_, p.tensors, group, pf.function->name));
    counters_.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return;
  }
  if (c.movesShards() && c.phase == CollectiveStep::Phase::Whole) {
    shardMove(p);
    return;
  }
  std::unique_ptr<Work>& work = pf.inFlight[static_cast<size_t>(c.bucket)];
  if (c.movesShards()) {
    asyncAllGather(p, work);
    return;
  }
  auto t0 = std::chrono::steady_clock::now();
  if (c.kind == CollectiveStep::Kind::AllReduceStart) {
    if (!c.inPlace) {  // an in-place bucket's tensors already lie in it
      auto* at = reinterpret_cast<std::byte*>(p.bucket);
      for (auto [ptr, bytes] : p.tensors) {
        std::memcpy(at, ptr, bytes);
        at += bytes;
      }
      counters_.bucketCopyBytes += static_cast<int64_t>(p.bytes);
    }
    if (c.group > 1) {
      Communicator& comm = communicatorOf(c, p.name, mesh_, comm_);
      work = comm.allReduce(p.bucket, static_cast<int64_t>(p.bytes / sizeof(float)), DType::F32,
                            reduceOpOf(c.reduce), p.name);
      countCollective(counters_, c, static_cast<int64_t>(p.bytes));
    }
    counters_.startSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return;
  }
  if (work) {
    work->wait();
    work.reset();
  }
  if (!c.inPlace) {
    const auto* at = reinterpret_cast<const std::byte*>(p.bucket);
    for (auto [ptr, bytes] : p.tensors) {
      std::memcpy(ptr, at, bytes);
      at += bytes;
    }
    counters_.bucketCopyBytes += static_cast<int64_t>(p.bytes);
  }
  counters_.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Executor::shardMove(const Prepared& p) {
  // Synchronous: the step issues, waits and repacks, so all of its time is exposed (a wait).
  const CollectiveStep& c = *p.collective;
  auto t0 = std::chrono::steady_clock::now();
  void* input = p.tensors[0].first;
  void* output = p.tensors[1].first;
  void* staging = p.bucket;
  if (c.group == 1) {
    std::memcpy(output, input, p.tensors[0].second);  // one rank: every kind is the identity
  } else {
    Communicator& comm = communicatorOf(c, p.name, mesh_, comm_);
    const DType dtype = program_.buffers[static_cast<size_t>(c.buffer)].dtype;
    const ShardMovePlan& m = p.move;
    if (m.zeroStaging) std::memset(staging, 0, static_cast<size_t>(m.count) * p.elementBytes);
    copyStrided(m.pack, input, staging, p.elementBytes);
    std::unique_ptr<Work> work;
    if (c.kind == CollectiveStep::Kind::AllGather)
      work = comm.allGather(input, staging, m.count, dtype, p.name);
    else if (c.kind == CollectiveStep::Kind::ReduceScatter)
      work = comm.reduceScatter(staging, output, m.count, dtype, reduceOpOf(c.reduce), p.name);
    else  // received blocks land in staging's second half
      work = comm.allToAll(staging, static_cast<std::byte*>(staging) + m.recvOffset * p.elementBytes, m.count, dtype,
                           p.name);
    countCollective(counters_, c, m.payloadBytes);
    work->wait();
    copyStrided(m.unpack, staging, output, p.elementBytes);
  }
  counters_.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Executor::asyncAllGather(const Prepared& p, std::unique_ptr<Work>& work) {
  // Start: the communicator gathers the input into staging in the background (its time is
  // a start's); Wait: blocks until it is done (exposed) and unpacks staging into the output.
  const CollectiveStep& c = *p.collective;
  auto t0 = std::chrono::steady_clock::now();
  void* input = p.tensors[0].first;
  void* output = p.tensors[1].first;
  if (c.phase == CollectiveStep::Phase::Start) {
    if (c.group == 1) {
      std::memcpy(output, input, p.tensors[0].second);  // one rank: the identity
    } else {
      Communicator& comm = communicatorOf(c, p.name, mesh_, comm_);
      const DType dtype = program_.buffers[static_cast<size_t>(c.buffer)].dtype;
      work = comm.allGather(input, p.bucket, p.move.count, dtype, p.name);
      countCollective(counters_, c, p.move.payloadBytes);
    }
    counters_.startSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return;
  }
  if (work) {
    work->wait();
    work.reset();
    copyStrided(p.move.unpack, p.bucket, output, p.elementBytes);
  }
  counters_.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<OutputView> Executor::outputs(const std::string& function) const {
  const Function& f = *prepared(function).function;
  std::vector<OutputView> out;
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const Buffer& b = program_.buffers[static_cast<size_t>(f.outputs[i])];
    out.push_back({f.outputNames[i], f.outputs[i], b.dtype, b.shape, pointers_[static_cast<size_t>(f.outputs[i])],
                   b.numel()});
  }
  return out;
}

}  // namespace tessel::rt
