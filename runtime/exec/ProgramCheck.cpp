// validateProgram: every invariant a Program must satisfy before the Executor may run it.
//
// Promise: a program that passes never makes the executor read or write outside a buffer.
// Checks, in order, each failing with "<context>: <field>: <problem>", followed inside a
// function by "(function '<name>')":
//  1. buffers: non-empty unique names; positive dims whose byte size fits in 2^48; Parameter
//     buffers are f32 with init normal/zeros/ones and a finite stddev >= 0; only Parameters
//     have an init; only Temps have an offset.
//  2. Temps: offset >= 0, 64-byte aligned, offset + bytes <= the shared arena (the max over
//     functions of arenaBytes, because one Temp has one offset whichever function runs).
//  3. functions: non-empty unique names, arenaBytes >= 0, batch_shards in [0, 2^40], inputs are distinct Input buffers,
//     one output name per output, every referenced id in range.
//  4. steps: kernel symbols are C identifiers with a signature in Program::kernels, and
//     every kernel step passes exactly its arguments (count, dtype and element count each:
//     the kernel's shapes are constants, so a smaller buffer would be overrun); GEMM
//     operands are f32, dims in [1, 2^31), strides >= 0, (batch-1)*stride + rows*cols <= numel for A, B and C, C aliases neither A
//     nor B (by id or arena range), and a batched C either has disjoint batches or stride 0
//     with accumulate (a reduction over the batch); copies join distinct, non-overlapping
//     buffers of equal byte size; collectives: bucket numbers are 0 .. n-1 (each started once
//     and then waited for once), the bucket buffer is an f32 Temp of exactly its tensors'
//     elements (an in_place bucket's tensors are f32 temps lying exactly where packing would
//     put them: Program.h), and a wait matches its start; all_gather / reduce_scatter / all_to_all steps:
//     input and output of one dtype (f32 or bf16), distinct and apart from the staging temp
//     of that dtype, shapes that agree along `dim` (and `concatDim`) with the group (output =
//     input x group, or / group, the divided dimension divisible), a staging temp of the
//     size Program.h states, reduce sum or avg.
//  5. every Temp a function uses (in a step or as an output) lies within that function's
//     arenaBytes, and no two Temps that are live at the same step (from the first step
//     that names one to the last, function outputs to the end) share arena bytes: what the
//     memory plan guarantees, so an edited offset cannot make one temp overwrite another.
//     The views of in-place buckets are live outside their start-to-wait window, the bucket
//     inside it (tempLiveness), and no step names
//     a bucket or its views while the communicator owns them (checkInPlaceBuckets).
//  6. the mesh, each sharded buffer and each collective's axes against it
//     (runtime/exec/ProgramMesh.cpp, checkProgramMesh); a synchronous collective's wait is
//     the step right after its start.
//  7. the pipeline parts: the pipeline record, send_recv steps and action spans
//     (runtime/exec/PipelineCheck.cpp, checkProgramPipeline).
//  8. launches: with CUDA kernels (cudaSource non-empty) every kernel step has one, and
//     without them none does; grid x in [1, 2^31), grid y and z in [1, 65535], a block of
//     1 to 1024 threads with z <= 64, dynamic shared memory <= 227 KiB (sm_90's opt-in
//     maximum per block); all steps of one symbol share one launch (a kernel's static shared
//     arrays are sized for its block).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "runtime/exec/PipelineRuntime.h"  // defines: checkProgramPipeline
#include "runtime/exec/ProgramCheckParts.h"  // defines: checkLiveTemps
#include "runtime/exec/Program.h"
#include "runtime/exec/Sharding.h"

namespace tessel::rt {
namespace {

/// Largest buffer accepted, in bytes (256 TiB): far above any real buffer, and small enough
/// that offset + bytes and stride products below cannot overflow int64.
constexpr int64_t kMaxBufferBytes = int64_t{1} << 48;

class Checker {
 public:
  Checker(const Program& p, const std::string& context) : p_(p), context_(context) {}

  void run() {
    checkProgramMesh(p_, context_);
    checkProgramPipeline(p_, context_);
    arena_ = p_.arenaBytes();
    for (size_t i = 0; i < p_.buffers.size(); ++i) checkBuffer(static_cast<int>(i));
    std::set<std::string> names;
    for (size_t f = 0; f < p_.functions.size(); ++f) {
      const Function& fn = p_.functions[f];
      std::string field = fmt::format("functions[{}]", f);
      if (fn.name.empty()) fail(field + ".name", "empty function name");
      if (!names.insert(fn.name).second)
        fail(field + ".name", fmt::format("duplicate function name '{}'", fn.name));
      function_ = fn.name;
      checkFunction(fn, field);
      function_.clear();
    }
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw std::runtime_error(fmt::format("{}: {}: {}{}", context_, field, problem,
                                         function_.empty() ? "" : fmt::format(" (function '{}')", function_)));
  }

  std::string describe(int id) const {
    return fmt::format("buffer {} '{}'", id, p_.buffers[static_cast<size_t>(id)].name);
  }

  const Buffer& buffer(int id, const std::string& field) const {
    if (id < 0 || static_cast<size_t>(id) >= p_.buffers.size())
      fail(field, fmt::format("buffer id {} out of range [0, {})", id, p_.buffers.size()));
    return p_.buffers[static_cast<size_t>(id)];
  }

  void checkBuffer(int id) {
    const Buffer& b = p_.buffers[static_cast<size_t>(id)];
    std::string field = fmt::format("buffers[{}]", id);
    if (b.name.empty()) fail(field + ".name", "empty buffer name");
    if (!names_.insert(b.name).second)
      fail(field + ".name", fmt::format("duplicate buffer name '{}'", b.name));
    int64_t bytes = dtypeBytes(b.dtype);
    for (size_t d = 0; d < b.shape.size(); ++d) {
      if (b.shape[d] <= 0)
        fail(fmt::format("{}.shape[{}]", field, d),
             fmt::format("dimension {} of '{}' is not positive", b.shape[d], b.name));
      if (b.shape[d] > kMaxBufferBytes / bytes)
        fail(field + ".shape", fmt::format("'{}' is larger than 2^48 bytes", b.name));
      bytes *= b.shape[d];
    }
    if (b.kind == BufferKind::Coordinate) {
      if (b.dtype != DType::I32 || !b.shape.empty())
        fail(field + ".dtype", fmt::format("coordinate '{}' is not an i32 scalar", b.name));
      if (b.coordinateAxes.empty() || b.coordinateStride < 1 || b.coordinateStride > (int64_t{1} << 30))
        fail(field + ".coordinate",
             fmt::format("coordinate '{}' needs at least one axis and a stride in 1 to 2^30", b.name));
    } else if (!b.coordinateAxes.empty()) {
      fail(field + ".coordinate", fmt::format("'{}' is not a coordinate but names coordinate axes", b.name));
    }
    if (b.kind == BufferKind::Parameter) {
      if (b.dtype != DType::F32) fail(field + ".dtype", fmt::format("parameter '{}' is not f32", b.name));
      if (b.init != "normal" && b.init != "zeros" && b.init != "ones")
        fail(field + ".init",
             fmt::format("parameter '{}' has init '{}' (expected normal, zeros or ones)", b.name, b.init));
      if (!std::isfinite(b.stddev) || b.stddev < 0)
        fail(field + ".stddev", fmt::format("parameter '{}' has stddev {}", b.name, b.stddev));
    } else if (!b.init.empty()) {
      fail(field + ".init", fmt::format("'{}' is not a parameter but has init '{}'", b.name, b.init));
    }
    if (b.kind != BufferKind::Temp) {
      if (b.offset != 0)
        fail(field + ".offset", fmt::format("'{}' is not a temp but has offset {}", b.name, b.offset));
      return;
    }
    if (b.offset < 0 || b.offset % 64 != 0)
      fail(field + ".offset",
           fmt::format("temp '{}' offset {} is not a non-negative multiple of 64", b.name, b.offset));
    if (b.offset > arena_ - bytes)
      fail(field + ".offset",
           fmt::format("temp '{}' [{}, {}) lies past the arena of {} bytes (max arenaBytes)", b.name,
                       b.offset, b.offset + bytes, arena_));
  }

  void checkFunction(const Function& fn, const std::string& field) {
    if (fn.arenaBytes < 0) fail(field + ".arenaBytes", fmt::format("negative ({})", fn.arenaBytes));
    if (fn.batchShards < 0 || fn.batchShards > (int64_t{1} << 40))
      fail(field + ".batch_shards", fmt::format("{} is not in 0 to 2^40", fn.batchShards));
    std::vector<std::pair<int, std::string>> used;  // (buffer, field), for the arena check
    std::map<int, const CollectiveStep*> open;       // started, not yet waited buckets
    std::map<int, const CollectiveStep*> openGathers;  // started, not yet waited all_gathers (slots)
    int buckets = 0;                                 // starts seen
    std::unordered_set<int> seen;
    for (size_t i = 0; i < fn.inputs.size(); ++i) {
      std::string f = fmt::format("{}.inputs[{}]", field, i);
      const Buffer& b = buffer(fn.inputs[i], f);
      if (b.kind != BufferKind::Input) fail(f, fmt::format("{} is not an input buffer", describe(fn.inputs[i])));
      if (!seen.insert(fn.inputs[i]).second) fail(f, fmt::format("{} listed twice", describe(fn.inputs[i])));
    }
    if (fn.outputNames.size() != fn.outputs.size())
      fail(field + ".outputNames",
           fmt::format("{} names for {} outputs", fn.outputNames.size(), fn.outputs.size()));
    for (size_t i = 0; i < fn.outputs.size(); ++i) {
      std::string f = fmt::format("{}.outputs[{}]", field, i);
      buffer(fn.outputs[i], f);
      used.emplace_back(fn.outputs[i], f);
    }
    for (size_t s = 0; s < fn.steps.size(); ++s) {
      std::string f = fmt::format("{}.steps[{}]", field, s);
      if (auto* k = std::get_if<KernelStep>(&fn.steps[s])) {
        checkKernel(*k, f, used);
      } else if (auto* g = std::get_if<GemmStep>(&fn.steps[s])) {
        checkGemm(*g, f);
        for (auto [id, name] : {std::pair{g->a, ".a"}, {g->b, ".b"}, {g->c, ".c"}}) used.emplace_back(id, f + name);
      } else if (auto* c = std::get_if<CopyStep>(&fn.steps[s])) {
        checkCopy(*c, f);
        used.emplace_back(c->src, f + ".src");
        used.emplace_back(c->dst, f + ".dst");
      } else {
        const auto& col = std::get<CollectiveStep>(fn.steps[s]);
        if (col.kind == CollectiveStep::Kind::SendRecv) {  // checkProgramPipeline checks the rest
          for (size_t i = 0; i < col.tensors.size(); ++i) {
            buffer(col.tensors[i], fmt::format("{}.tensors[{}]", f, i));
            used.emplace_back(col.tensors[i], fmt::format("{}.tensors[{}]", f, i));
          }
          continue;
        }
        if (col.inPlace && col.movesShards()) fail(f + ".in_place", "only an all-reduce bucket can be in place");
        if (col.movesShards()) {
          checkShardMove(col, f);
          checkAsyncGather(col, f, openGathers);
        } else
          checkCollective(col, f, open);
        const auto* next = s + 1 < fn.steps.size() ? std::get_if<CollectiveStep>(&fn.steps[s + 1]) : nullptr;
        if (col.synchronous && col.kind == CollectiveStep::Kind::AllReduceStart &&
            !(next && next->kind == CollectiveStep::Kind::AllReduceWait && next->bucket == col.bucket))
          fail(f + ".synchronous", fmt::format("the synchronous all-reduce of bucket {} is not waited for in the "
                                               "next step", col.bucket));
        buckets += col.kind == CollectiveStep::Kind::AllReduceStart;
        used.emplace_back(col.buffer, f + ".buffer");
        for (size_t i = 0; i < col.tensors.size(); ++i)
          used.emplace_back(col.tensors[i], fmt::format("{}.tensors[{}]", f, i));
      }
    }
    if (!open.empty())
      fail(field + ".steps", fmt::format("bucket {} is started but never waited for", open.begin()->first));
    if (!openGathers.empty())
      fail(field + ".steps", fmt::format("the all_gather of slot {} is started but never waited for",
                                         openGathers.begin()->first));
    // Numbers 0 .. n-1: starts are unique and all waited, so a number >= n leaves a gap.
    for (size_t s = 0; s < fn.steps.size(); ++s)
      if (auto* c = std::get_if<CollectiveStep>(&fn.steps[s]);
          c && !c->movesShards() && c->kind != CollectiveStep::Kind::SendRecv && c->bucket >= buckets)
        fail(fmt::format("{}.steps[{}].bucket", field, s),
             fmt::format("bucket number {} is not in [0, {}) (the function's bucket count)", c->bucket, buckets));
    for (const auto& [id, f] : used) {
      const Buffer& b = p_.buffers[static_cast<size_t>(id)];
      if (b.kind == BufferKind::Temp && b.offset + b.bytes() > fn.arenaBytes)
        fail(f, fmt::format("temp '{}' [{}, {}) lies past function '{}' arenaBytes {}", b.name, b.offset,
                            b.offset + b.bytes(), fn.name, fn.arenaBytes));
    }
    const CheckFailure failure = [&](const std::string& f, const std::string& problem) { fail(f, problem); };
    checkInPlaceBuckets(p_, fn, failure);
    checkLiveTemps(p_, fn, failure);
  }

  void checkKernel(const KernelStep& k, const std::string& field, std::vector<std::pair<int, std::string>>& used) {
    bool ident = !k.symbol.empty() && !std::isdigit(static_cast<unsigned char>(k.symbol[0])) &&
                 std::all_of(k.symbol.begin(), k.symbol.end(),
                             [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!ident) fail(field + ".symbol", fmt::format("'{}' is not a C identifier", k.symbol));
    checkLaunch(k, field);
    auto signature = p_.kernels.find(k.symbol);
    if (signature == p_.kernels.end())
      fail(field + ".symbol", fmt::format("kernel '{}' has no signature in the program's kernel table{}", k.symbol,
                                          at(k.location)));
    const std::vector<KernelArg>& want = signature->second;
    if (k.args.size() != want.size())
      fail(field + ".args", fmt::format("kernel '{}' takes {} arguments but the step passes {}{}", k.symbol,
                                        want.size(), k.args.size(), at(k.location)));
    for (size_t i = 0; i < k.args.size(); ++i) {
      std::string f = fmt::format("{}.args[{}]", field, i);
      const Buffer& b = buffer(k.args[i], f);
      const bool sizeOk = want[i].atLeast ? b.numel() >= want[i].numel : b.numel() == want[i].numel;
      if (b.dtype != want[i].dtype || !sizeOk)
        fail(f, fmt::format("kernel '{}' argument {} is {}{} elements of {} but {} has {} of {}{}", k.symbol, i,
                            want[i].atLeast ? "at least " : "", want[i].numel, dtypeName(want[i].dtype),
                            describe(k.args[i]), b.numel(),
                            dtypeName(b.dtype), at(k.location)));
      used.emplace_back(k.args[i], f);
    }
  }

  void checkLaunch(const KernelStep& k, const std::string& field) {
    const bool cuda = !p_.cudaSource.empty();
    if (!cuda) {
      if (k.launch) fail(field + ".launch", fmt::format("'{}' has a launch but the program has no CUDA kernels", k.symbol));
      return;
    }
    if (!k.launch) fail(field + ".launch", fmt::format("'{}' has no launch but the program has CUDA kernels", k.symbol));
    const LaunchConfig& l = *k.launch;
    constexpr uint32_t kMaxGridX = 0x7fffffffu, kMaxGridYZ = 65535, kMaxShared = 227 * 1024;
    if (l.grid[0] < 1 || l.grid[0] > kMaxGridX || l.grid[1] < 1 || l.grid[1] > kMaxGridYZ || l.grid[2] < 1 ||
        l.grid[2] > kMaxGridYZ)
      fail(field + ".launch.grid", fmt::format("grid ({}, {}, {}) is out of CUDA's range", l.grid[0], l.grid[1], l.grid[2]));
    uint64_t threads = uint64_t{l.block[0]} * l.block[1] * l.block[2];
    if (l.block[0] < 1 || l.block[1] < 1 || l.block[2] < 1 || l.block[2] > 64 || threads > 1024)
      fail(field + ".launch.block",
           fmt::format("block ({}, {}, {}) is not 1 to 1024 threads", l.block[0], l.block[1], l.block[2]));
    if (l.sharedBytes > kMaxShared)
      fail(field + ".launch.shared", fmt::format("{} bytes of dynamic shared memory (max {})", l.sharedBytes, kMaxShared));
    auto [it, fresh] = launches_.emplace(k.symbol, l);
    if (!fresh && !(it->second == l))
      fail(field + ".launch", fmt::format("'{}' is launched with two different configurations", k.symbol));
  }

  /// Fails unless (batch-1)*stride + rows*cols elements fit in the operand's buffer.
  void checkExtent(const GemmStep& g, int id, int64_t stride, int64_t rows, int64_t cols,
                   const std::string& field) const {
    const Buffer& b = p_.buffers[static_cast<size_t>(id)];
    // rows*cols < 2^62 since dims < 2^31, but (batch-1)*stride is unbounded: check overflow.
    int64_t span = 0, need = 0;
    bool overflow = __builtin_mul_overflow(g.batch - 1, stride, &span) ||
                    __builtin_add_overflow(span, rows * cols, &need);
    if (overflow || need > b.numel())
      fail(field, fmt::format("GEMM needs {} batch(es) of {}x{} f32 with stride {} ({} elements) but {} "
                              "has {}{}", g.batch, rows, cols, stride, overflow ? "> 2^63" : std::to_string(need),
                              describe(id), b.numel(), at(g.location)));
  }


  static std::string at(const std::string& location) {
    return location.empty() ? "" : " (at " + location + ")";
  }

  bool overlaps(int x, int y) const {
    if (x == y) return true;
    const Buffer& a = p_.buffers[static_cast<size_t>(x)];
    const Buffer& b = p_.buffers[static_cast<size_t>(y)];
    if (a.kind != BufferKind::Temp || b.kind != BufferKind::Temp) return false;
    return a.offset < b.offset + b.bytes() && b.offset < a.offset + a.bytes();
  }

  void checkGemm(const GemmStep& g, const std::string& field) const {
    for (auto [id, name] : {std::pair{g.a, ".a"}, {g.b, ".b"}, {g.c, ".c"}}) {
      if (buffer(id, field + name).dtype == DType::I32)
        fail(field + name, fmt::format("GEMM operand {} is not f32 or bf16{}", describe(id), at(g.location)));
    }
    if (g.batch < 1) fail(field + ".batch", fmt::format("batch {} < 1{}", g.batch, at(g.location)));
    for (auto [v, name] : {std::pair{g.m, ".m"}, {g.n, ".n"}, {g.k, ".k"}}) {
      if (v < 1 || v > INT_MAX) fail(field + name, fmt::format("{} is not in [1, 2^31){}", v, at(g.location)));
    }
    for (auto [v, name] : {std::pair{g.strideA, ".strideA"}, {g.strideB, ".strideB"}, {g.strideC, ".strideC"}}) {
      if (v < 0) fail(field + name, fmt::format("negative stride {}{}", v, at(g.location)));
    }
    checkExtent(g, g.a, g.strideA, g.m, g.k, field + ".a");
    checkExtent(g, g.b, g.strideB, g.k, g.n, field + ".b");
    checkExtent(g, g.c, g.strideC, g.m, g.n, field + ".c");
    if (overlaps(g.c, g.a) || overlaps(g.c, g.b))
      fail(field + ".c", fmt::format("GEMM output {} overlaps an input{}", describe(g.c), at(g.location)));
    if (g.batch > 1 && g.strideC == 0 && !g.accumulate)
      fail(field + ".strideC",
           fmt::format("stride 0 over {} batches without accumulate keeps only the last batch{}", g.batch,
                       at(g.location)));
    if (g.batch > 1 && g.strideC > 0 && g.strideC < g.m * g.n)
      fail(field + ".strideC", fmt::format("stride {} makes the {}x{} output batches overlap{}", g.strideC, g.m,
                                           g.n, at(g.location)));
    checkEpilogue(g, field + ".epilogue");
  }

  /// Program.h GemmEpilogue's rules: sizes, dtypes, no overlap with the GEMM's operands.
  void checkEpilogue(const GemmStep& g, const std::string& field) const {
    const GemmEpilogue& e = g.epilogue;
    if (e.preActivation >= 0 && !e.gelu)
      fail(field + ".pre_activation", fmt::format("a pre-activation output without gelu{}", at(g.location)));
    if (e.residual >= 0 && g.accumulate)
      fail(field + ".residual", fmt::format("a residual on an accumulating GEMM{}", at(g.location)));
    auto exact = [&](int id, int64_t numel, const char* name, bool f32Only) {
      if (id < 0) return;
      const Buffer& b = buffer(id, field + name);
      if (b.dtype == DType::I32 || (f32Only && b.dtype != DType::F32))
        fail(field + name, fmt::format("{} is not {}{}", describe(id), f32Only ? "f32" : "f32 or bf16", at(g.location)));
      if (b.numel() != numel)
        fail(field + name, fmt::format("{} has {} elements, the epilogue needs {}{}", describe(id), b.numel(), numel,
                                       at(g.location)));
    };
    exact(e.bias, g.n, ".bias", false);
    exact(e.biasGradient, g.m, ".bias_gradient", true);
    for (auto [id, name] : {std::pair{e.preActivation, ".pre_activation"}, {e.residual, ".residual"}}) {
      if (id < 0) continue;
      if (buffer(id, field + name).dtype == DType::I32)
        fail(field + name, fmt::format("{} is not f32 or bf16{}", describe(id), at(g.location)));
      checkExtent(g, id, g.strideC, g.m, g.n, field + name);
    }
    const std::pair<int, const char*> parts[] = {{e.bias, ".bias"}, {e.preActivation, ".pre_activation"},
                                                 {e.residual, ".residual"}, {e.biasGradient, ".bias_gradient"}};
    for (size_t i = 0; i < std::size(parts); ++i) {
      auto [id, name] = parts[i];
      if (id < -1) fail(field + name, fmt::format("buffer id {} (-1 means none){}", id, at(g.location)));
      if (id >= 0 && (overlaps(id, g.a) || overlaps(id, g.b) || overlaps(id, g.c)))
        fail(field + name, fmt::format("{} overlaps a GEMM operand{}", describe(id), at(g.location)));
      // Written outputs (pre_activation, bias_gradient) may share bytes with nothing else of
      // the epilogue: the row loop reads the residual after writing the pre-activation.
      for (size_t j = 0; j < i; ++j)
        if (id >= 0 && parts[j].first >= 0 && overlaps(id, parts[j].first))
          fail(field + name, fmt::format("{} overlaps the epilogue's {}{}", describe(id), parts[j].second + 1,
                                         at(g.location)));
    }
  }

  /// A bucket: an f32 buffer holding exactly its f32 tensors; a start opens it, the wait
  /// with the same index, bucket buffer and tensor sizes closes it.
  void checkCollective(const CollectiveStep& c, const std::string& field,
                       std::map<int, const CollectiveStep*>& open) const {
    const Buffer& bucket = buffer(c.buffer, field + ".buffer");
    if (bucket.dtype != DType::F32) fail(field + ".buffer", fmt::format("{} is not f32", describe(c.buffer)));
    if (bucket.kind != BufferKind::Temp)
      fail(field + ".buffer", fmt::format("{} is not a temp (a bucket lives in the arena)", describe(c.buffer)));
    if (c.bucket < 0) fail(field + ".bucket", fmt::format("negative bucket number {}", c.bucket));
    if (c.reduce != "sum" && c.reduce != "avg" && c.reduce != "max")
      fail(field + ".reduce", fmt::format("'{}' (expected sum, avg or max)", c.reduce));
    if (c.group < 1) fail(field + ".group", fmt::format("{} ranks", c.group));
    if (c.tensors.empty()) fail(field + ".tensors", "empty bucket");
    int64_t total = 0;
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      const Buffer& t = buffer(c.tensors[i], fmt::format("{}.tensors[{}]", field, i));
      if (t.dtype != DType::F32) fail(fmt::format("{}.tensors[{}]", field, i), fmt::format("{} is not f32", describe(c.tensors[i])));
      if (c.inPlace) {  // a view: exactly where packing would have put it
        const int64_t want = bucket.offset + total * dtypeBytes(DType::F32);
        if (t.kind != BufferKind::Temp || t.offset != want)
          fail(fmt::format("{}.tensors[{}]", field, i),
               fmt::format("{} is not a view of the in-place bucket: it must be a temp at offset {} (the bucket's "
                           "offset plus its earlier tensors' bytes), not {}",
                           describe(c.tensors[i]), want, t.kind == BufferKind::Temp ? std::to_string(t.offset)
                                                                                     : std::string("a non-temp")));
      } else if (overlaps(c.tensors[i], c.buffer)) {
        fail(fmt::format("{}.tensors[{}]", field, i), fmt::format("{} overlaps the bucket", describe(c.tensors[i])));
      }
      total += t.numel();
    }
    if (total != bucket.numel())
      fail(field + ".buffer", fmt::format("{} holds {} elements but its tensors {}", describe(c.buffer),
                                          bucket.numel(), total));
    if (c.kind == CollectiveStep::Kind::AllReduceStart) {
      if (c.names.size() != c.tensors.size() && !c.names.empty())
        fail(field + ".names", fmt::format("{} names for {} tensors", c.names.size(), c.tensors.size()));
      if (!open.emplace(c.bucket, &c).second) fail(field + ".bucket", fmt::format("bucket {} started twice", c.bucket));
      return;
    }
    auto it = open.find(c.bucket);
    if (it == open.end()) fail(field + ".bucket", fmt::format("wait for bucket {}, which is not started", c.bucket));
    const CollectiveStep& start = *it->second;
    bool sameSizes = start.tensors.size() == c.tensors.size();
    for (size_t i = 0; sameSizes && i < c.tensors.size(); ++i)
      sameSizes = p_.buffers[static_cast<size_t>(start.tensors[i])].numel() ==
                  p_.buffers[static_cast<size_t>(c.tensors[i])].numel();
    if (start.buffer != c.buffer || !sameSizes || start.reduce != c.reduce || start.group != c.group ||
        start.axes != c.axes || start.synchronous != c.synchronous || start.inPlace != c.inPlace)
      fail(field, fmt::format("the wait for bucket {} does not match its start (buffer, tensor sizes, "
                              "reduce, axes, group, synchronous or in_place)", c.bucket));
    open.erase(it);
  }

  /// The phases of an asynchronous all_gather (Program.h): only an all_gather has them; a
  /// start opens its slot once, and its wait closes it with the same buffers.
  void checkAsyncGather(const CollectiveStep& c, const std::string& field,
                        std::map<int, const CollectiveStep*>& open) const {
    if (c.phase == CollectiveStep::Phase::Whole) return;
    if (c.kind != CollectiveStep::Kind::AllGather)
      fail(field + ".phase", "only an all_gather is split in a start and a wait");
    if (c.phase == CollectiveStep::Phase::Start) {
      if (!open.emplace(c.bucket, &c).second)
        fail(field + ".bucket", fmt::format("the all_gather of slot {} is started twice", c.bucket));
      return;
    }
    auto it = open.find(c.bucket);
    if (it == open.end())
      fail(field + ".bucket", fmt::format("wait for the all_gather of slot {}, which is not started", c.bucket));
    const CollectiveStep& start = *it->second;
    if (start.tensors != c.tensors || start.buffer != c.buffer || start.dim != c.dim || start.axes != c.axes ||
        start.group != c.group)
      fail(field, fmt::format("the wait for the all_gather of slot {} does not match its start (tensors, buffer, "
                              "dim, axes or group)", c.bucket));
    open.erase(it);
  }

  /// An all_gather, reduce_scatter or all_to_all (Program.h): shapes, dtypes and staging.
  void checkShardMove(const CollectiveStep& c, const std::string& field) const {
    const char* what = collectiveKindName(collectiveKindIndex(c));
    if (c.tensors.size() != 2)
      fail(field + ".tensors", fmt::format("{} takes [input, output], got {} tensors", what, c.tensors.size()));
    const Buffer& in = buffer(c.tensors[0], field + ".tensors[0]");
    const Buffer& out = buffer(c.tensors[1], field + ".tensors[1]");
    const Buffer& staging = buffer(c.buffer, field + ".buffer");
    if (in.dtype != DType::F32 && in.dtype != DType::BF16)
      fail(field + ".tensors[0]", fmt::format("{} is not f32 or bf16", describe(c.tensors[0])));
    if (out.dtype != in.dtype || staging.dtype != in.dtype)
      fail(field, fmt::format("{}: the input, output and staging buffers differ in dtype", what));
    if (staging.kind != BufferKind::Temp)
      fail(field + ".buffer", fmt::format("{} is not a temp (staging lives in the arena)", describe(c.buffer)));
    // Ranks are ints; the bound also keeps input x group (the gathered size) from overflowing.
    if (c.group < 1 || c.group > INT_MAX) fail(field + ".group", fmt::format("{} ranks", c.group));
    if (c.reduce != "sum" && c.reduce != "avg")
      fail(field + ".reduce", fmt::format("'{}' (expected sum or avg)", c.reduce));
    for (auto [a, b] : {std::pair{0, 1}, {0, 2}, {1, 2}}) {
      int ids[3] = {c.tensors[0], c.tensors[1], c.buffer};
      if (ids[a] == ids[b] || overlaps(ids[a], ids[b]))
        fail(field, fmt::format("{}: {} and {} share memory", what, describe(ids[a]), describe(ids[b])));
    }
    const int64_t rank = static_cast<int64_t>(in.shape.size());
    auto checkDim = [&](int64_t d, const char* name) {
      if (d < 0 || d >= rank)
        fail(field + "." + name, fmt::format("dimension {} of a rank-{} tensor", d, rank));
    };
    checkDim(c.dim, "dim");
    if (c.kind == CollectiveStep::Kind::AllToAll) checkDim(c.concatDim, "concat_dim");
    // The output's shape follows from the input's (TesselGatherScatterOps.td's shape rules).
    std::vector<int64_t> expect = in.shape;
    const size_t d = static_cast<size_t>(c.dim);
    auto divide = [&](size_t at) {
      if (expect[at] % c.group != 0)
        fail(field + ".dim", fmt::format("{}: dimension {} of {} ({}) is not divisible by the group of {}", what,
                                         at, describe(c.tensors[0]), expect[at], c.group));
      expect[at] /= c.group;
    };
    int64_t stagingNumel = in.numel();
    if (c.kind == CollectiveStep::Kind::AllGather) {
      expect[d] *= c.group;
      stagingNumel = in.numel() * c.group;
      // Gather-then-trim: an output up to group - 1 shorter drops the padding of an uneven
      // dimension (BlockLayout.h).
      if (out.shape.size() == expect.size() && out.shape[d] <= expect[d] && out.shape[d] > expect[d] - c.group) {
        std::vector<int64_t> trimmed = expect;
        trimmed[d] = out.shape[d];
        if (out.shape == trimmed) expect = trimmed;
      }
    } else if (c.kind == CollectiveStep::Kind::ReduceScatter) {
      // An uneven dimension is padded with zeros to group x ceil(size / group) in staging.
      expect[d] = (expect[d] + c.group - 1) / c.group;
      stagingNumel = in.numel() / std::max<int64_t>(in.shape[d], 1) * expect[d] * c.group;
    } else {
      divide(d);
      expect[static_cast<size_t>(c.concatDim)] *= c.group;
      stagingNumel = 2 * in.numel();
    }
    if (out.shape != expect)
      fail(field + ".tensors[1]", fmt::format("{} over {} ranks along dimension {} makes [{}] of [{}], not [{}]", what,
                                              c.group, c.dim, fmt::join(expect, ", "), fmt::join(in.shape, ", "),
                                              fmt::join(out.shape, ", ")));
    if (staging.numel() != stagingNumel)
      fail(field + ".buffer", fmt::format("{}: staging {} holds {} elements, not {}", what, describe(c.buffer),
                                          staging.numel(), stagingNumel));
  }

  void checkCopy(const CopyStep& c, const std::string& field) const {
    const Buffer& src = buffer(c.src, field + ".src");
    const Buffer& dst = buffer(c.dst, field + ".dst");
    if (src.bytes() != dst.bytes())
      fail(field, fmt::format("copy from {} ({} bytes) to {} ({} bytes)", describe(c.src), src.bytes(),
                              describe(c.dst), dst.bytes()));
    if (overlaps(c.src, c.dst))
      fail(field, fmt::format("copy from {} to {} overlaps itself", describe(c.src), describe(c.dst)));
  }

  const Program& p_;
  const std::string& context_;
  int64_t arena_ = 0;
  std::set<std::string> names_;
  std::map<std::string, LaunchConfig> launches_;
  std::string function_;  // the function being checked, for messages
};

}  // namespace

void validateProgram(const Program& program, const std::string& context) {
  Checker(program, context).run();
}

}  // namespace tessel::rt
