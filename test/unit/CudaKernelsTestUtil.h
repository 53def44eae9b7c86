// The harness of CudaKernelsTest.cpp: the kernels of compiled programs, their CUDA and C++
// sources, the SIMT library that runs the CUDA kernels on the CPU, and the comparison.
//
// - Programs: a model is compiled with the training pipeline (Model::compile), and its IR
//   (Program::ir with locations) is parsed back into a context of our own, so the test
//   walks the module without reaching into Program's internals.
// - Kernels: every top-level op of every function with hasCudaKernel gets a CUDA kernel
//   and the C++ kernel of the same op (CppEmitter / FusedEmitter); ops whose kernels are
//   identical up to comments (the same op in every block) share one symbol, as in Lowering.
// - SIMT library: the generated CUDA text compiled as host C++ after test/simt/Simt.h, with
//   one trampoline per kernel, `extern "C" void <symbol>_simt(void** args)`, which unpacks
//   args (results, then operands: the C++ kernels' convention) into the kernel's typed
//   parameters and calls simt::launch with the kernel's CudaLaunch. The harness itself
//   (the text of test/simt/Simt.cpp) is compiled into the same library, so the library is
//   self-contained; a hash of Simt.h is part of the source, so the cache follows it.
#pragma once

#include "codegen/CppEmitter.h"
#include "codegen/CudaEmitter.h"
#include "codegen/FusedEmitter.h"
#include "codegen/HostCompiler.h"
#include "codegen/KernelCommon.h"
#include "codegen/Nvrtc.h"
#include "compiler/TesselDialect.h"
#include "runtime/numeric/BFloat16.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace tessel::cudatest {

/// 2^-24: the unit roundoff of f32.
constexpr double kU = 1.0 / (1 << 24);

/// One kernel: the op it computes, its symbol, its CUDA kernel and the C++ kernel of the op.
struct Kernel {
  mlir::Operation* op;
  std::string symbol;
  CudaKernel cuda;
  std::string cpp;
  int uses = 1;  // ops sharing this kernel
};

/// Parsed modules, owned together with their context.
class Modules {
 public:
  Modules() {
    registerTesselDialects(registry_);
    context_ = std::make_unique<mlir::MLIRContext>(registry_);
  }
  mlir::ModuleOp parse(const std::string& ir) {
    modules_.push_back(mlir::parseSourceString<mlir::ModuleOp>(ir, context_.get()));
    if (!modules_.back()) throw std::runtime_error("the program's IR does not parse back");
    return *modules_.back();
  }

 private:
  mlir::DialectRegistry registry_;
  std::unique_ptr<mlir::MLIRContext> context_;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules_;
};

/// Source without comments: the key under which identical kernels share a symbol.
inline std::string withoutComments(const std::string& src) {
  std::istringstream in(src);
  std::string line, out;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find("//"));
    if (line.find_first_not_of(' ') != std::string::npos) out += line + "\n";
  }
  return out;
}

inline std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

/// The kernels of every function of `module`, symbols "<prefix>k<n>_<op>" (for a fused
/// region "<prefix>k<n>_fused_<ops>", as Lowering names them).
inline std::vector<Kernel> collectKernels(mlir::ModuleOp module, const std::string& prefix) {
  std::vector<Kernel> kernels;
  std::map<std::string, size_t> seen;
  for (auto f : module.getOps<mlir::func::FuncOp>())
    for (mlir::Operation& op : f.getBody().front()) {
      EXPECT_TRUE(!hasCppKernel(&op) || hasCudaKernel(&op))
          << op.getName().getStringRef().str() << " has a C++ kernel but no CUDA kernel";
      if (!hasCudaKernel(&op)) continue;
      CudaKernel cuda = emitCudaKernel(&op, "TESSEL_KERNEL");
      std::string key = withoutComments(cuda.source);
      if (auto it = seen.find(key); it != seen.end()) {
        ++kernels[it->second].uses;
        continue;
      }
      auto fused = mlir::dyn_cast<FusedOp>(op);
      std::string symbol = fmt::format("{}k{}_{}", prefix, kernels.size(),
                                       fused ? kernelcommon::fusedKernelName(fused)
                                             : op.getName().stripDialect().str());
      cuda.source = replaceAll(cuda.source, "TESSEL_KERNEL", symbol);
      std::string cpp = fused ? emitFusedCppKernel(fused, symbol) : emitCppKernel(&op, symbol);
      seen.emplace(key, kernels.size());
      kernels.push_back({&op, symbol, std::move(cuda), std::move(cpp)});
    }
  return kernels;
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// preamble + kernels: one CUDA translation unit.
inline std::string cudaSource(const std::vector<Kernel>& kernels) {
  std::string src = cudaKernelPreamble();
  for (const Kernel& k : kernels) src += k.cuda.source + "\n";
  return src;
}

/// The SIMT library's source for `cuda` (preamble + kernels) and the kernels' launches.
inline std::string simtSource(const std::string& cuda, const std::vector<Kernel>& kernels) {
  const std::string dir = TESSEL_SOURCE_DIR;
  std::string src = fmt::format(
      "// SIMT build of generated CUDA kernels (harness Simt.h hash {:x})\n"
      "#include \"test/simt/Simt.h\"\n"
      "#include <cstddef>\n"
      "#include <utility>\n"
      "// Calls `kernel` with args[i] cast to its i-th parameter type.\n"
      "template <typename... P, std::size_t... I>\n"
      "static void tessel_simt_call(void (*kernel)(P...), void** args, std::index_sequence<I...>) "
      "{{\n"
      "  kernel(static_cast<P>(args[I])...);\n"
      "}}\n",
      std::hash<std::string>{}(readFile(dir + "/test/simt/Simt.h")));
  src += cuda;
  for (const Kernel& k : kernels) {
    // <symbol>_simt launches the kernel's grid; <symbol>_simt_one_block a single block (the
    // kernels must not depend on the grid: they stride over their work).
    const CudaLaunch& l = k.cuda.launch;
    for (auto [suffix, gx, gy, gz] :
         {std::tuple{"", l.grid[0], l.grid[1], l.grid[2]}, {"_one_block", 1u, 1u, 1u}})
      src += fmt::format(
          "extern \"C\" void {0}_simt{8}(void** args) {{\n"
          "  simt::launch(dim3({1}, {2}, {3}), dim3({4}, {5}, {6}), [&] {{\n"
          "    tessel_simt_call({0}, args, std::make_index_sequence<{7}>{{}});\n"
          "  }});\n"
          "}}\n",
          k.symbol, gx, gy, gz, l.block[0], l.block[1], l.block[2],
          k.op->getNumResults() + k.op->getNumOperands() + (k.cuda.scratchBytes > 0 ? 1 : 0),
          suffix);
  }
  return src + "\n// ---- the harness (test/simt/Simt.cpp) ----\n" +
         readFile(dir + "/test/simt/Simt.cpp");
}

inline KernelLibrary buildSimtLibrary(const std::string& source) {
  HostCompileOptions o;
  // -O1: the launches' cost is fiber switching, not the kernels' code. -ffp-contract=off, as
  // the C++ library below: both sides round every operation (GCC contracts a*b+c into an FMA
  // by default for C++ where the target has one, NVRTC does too; that is the compiler's
  // choice, not the kernels'), so "the same operations" can be checked bit for bit.
  o.flags = {"-O1",
             "-std=c++17",
             "-ffp-contract=off",
             "-shared",
             "-fPIC",
             "-w",
             "-I" + std::string(TESSEL_SOURCE_DIR)};
  o.cacheDir = ::testing::TempDir() + "tessel_cuda_kernels_simt";
  return buildKernelLibrary(source, o);
}

inline KernelLibrary buildCppLibrary(const std::vector<Kernel>& kernels) {
  std::string src = cppKernelPreamble() + fusedKernelPreamble();
  for (const Kernel& k : kernels) src += k.cpp + "\n";
  HostCompileOptions o;
  o.flags.push_back("-ffp-contract=off");  // see buildSimtLibrary
  o.cacheDir = ::testing::TempDir() + "tessel_cuda_kernels_cpp";
  return buildKernelLibrary(src, o);
}

/// A tensor buffer, f32, i32 or bf16 (`h`: bit patterns), whose data starts `at` elements into
/// its storage (1 gives pointers that are 4 but not 16-byte aligned).
struct Buffer {
  std::vector<float> f;
  std::vector<int32_t> i;
  std::vector<uint16_t> h;
  size_t at = 0;
  void* data() {
    if (!h.empty()) return h.data() + at;
    return i.empty() ? static_cast<void*>(f.data() + at) : i.data() + at;
  }
  /// The float values (bf16 widened exactly).
  std::vector<float> floats() const {
    if (h.empty()) return f;
    std::vector<float> out(h.size());
    numeric::bf16ToFloat(h.data(), out.data(), static_cast<int64_t>(h.size()));
    return out;
  }
};

inline bool isI32(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType().isInteger(32);
}
inline bool isBF16(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType().isBF16();
}
inline int64_t numelOf(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getNumElements();
}
inline int64_t dimOf(mlir::Value v, int64_t d) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  return t.getDimSize(d < 0 ? t.getRank() + d : d);
}

/// Values in [lo, hi) (f32), or indices in [0, hi) (i32).
struct Dist {
  double lo = -1, hi = 1;
};

/// The distribution of operand `index` of `user`: realistic values where the op needs them
/// (indices in range, optimizer hyper-parameters, non-negative second moments).
inline std::optional<Dist> distFor(mlir::Operation* user, unsigned index) {
  if (mlir::isa<EmbeddingOp>(user) && index == 1)
    return Dist{0, double(dimOf(user->getOperand(0), 0))};
  if (mlir::isa<CrossEntropyOp, CrossEntropyGradOp, FusedClassifierOp>(user)) {
    if (index == 1) return Dist{0, double(dimOf(user->getOperand(0), -1))};
    if (index == 2) return Dist{1, 1};  // dloss
  }
  if (mlir::isa<EmbeddingGradOp>(user) && index == 0)
    return Dist{0, double(dimOf(user->getResult(0), 0))};
  // The vocab-parallel ops: ids over three shards' worth of entries, offsets anywhere that
  // leaves the shard inside them, so that ids fall in, before and after the shard.
  if (auto e = mlir::dyn_cast<EmbeddingShardOp>(user); e && index > 0)
    return Dist{0, double(index == 1 ? e.getVocab() : e.getVocab() - dimOf(e.getTable(), 0) + 1)};
  if (auto t = mlir::dyn_cast<TargetLogitOp>(user); t && index > 0)
    return Dist{0, double(index == 1 ? t.getVocab() : t.getVocab() - dimOf(t.getLogits(), -1) + 1)};
  if (mlir::isa<EmbeddingShardGradOp, TargetLogitGradOp>(user) && index < 2) {
    int64_t local = mlir::isa<EmbeddingShardGradOp>(user) ? dimOf(user->getResult(0), 0)
                                                           : dimOf(user->getResult(0), -1);
    return Dist{0, double(index == 0 ? 3 * local : 2 * local + 1)};
  }
  if (mlir::isa<CrossEntropyFromStatsOp>(user) && index == 1) return Dist{0.5, 100};  // sums
  if (mlir::isa<CrossEntropyFromStatsGradOp>(user))
    return index == 0 ? Dist{0.5, 100} : Dist{1, 1};
  if (mlir::isa<AdamWOp>(user)) {
    static const Dist adamw[] = {{-1, 1},    {-1, 1},        {-0.1, 0.1},  {0, 0.01},  {1e-3, 1e-3},
                                 {0.9, 0.9}, {0.999, 0.999}, {1e-8, 1e-8}, {0.1, 0.1}, {3, 3}};
    return adamw[index];
  }
  if (mlir::isa<SGDOp>(user)) {
    static const Dist sgd[] = {{-1, 1},    {-1, 1},    {-1, 1}, {0.05, 0.05},
                               {0.9, 0.9}, {0.1, 0.1}, {3, 3}};
    return sgd[index];
  }
  if (mlir::isa<ClipCoefficientOp>(user)) return index == 0 ? Dist{1.5, 1.5} : Dist{1, 1};
  if (mlir::isa<SoftmaxGradOp>(user) && index == 0) return Dist{0, 1};
  return std::nullopt;
}

/// Random operands for `op` (for a fused op, by how its block arguments are used), starting
/// `at` elements into their buffers.
inline std::vector<Buffer> randomOperands(mlir::Operation* op, std::mt19937& rng, size_t at = 0) {
  std::vector<Buffer> out;
  for (auto [j, v] : llvm::enumerate(op->getOperands())) {
    std::optional<Dist> d;
    if (auto fused = mlir::dyn_cast<FusedOp>(op)) {
      for (mlir::OpOperand& use : fused.getBody().front().getArgument(j).getUses())
        if ((d = distFor(use.getOwner(), use.getOperandNumber()))) break;
    } else {
      d = distFor(op, static_cast<unsigned>(j));
    }
    bool scalar = mlir::cast<mlir::RankedTensorType>(v.getType()).getRank() == 0;
    Dist dist = d ? *d : scalar ? Dist{0.7, 0.7} : Dist{};
    Buffer b;
    b.at = at;
    b.f.assign(isI32(v) ? 0 : at, 0.0f);
    b.i.assign(isI32(v) ? at : 0, 0);
    if (isI32(v)) {
      int32_t bound = d ? static_cast<int32_t>(d->hi) : 100;  // indices in [0, bound)
      std::uniform_int_distribution<int32_t> u(0, std::max<int32_t>(bound - 1, 0));
      for (int64_t k = 0; k < numelOf(v); ++k) b.i.push_back(u(rng));
    } else {
      std::uniform_real_distribution<double> u(dist.lo, dist.hi);
      for (int64_t k = 0; k < numelOf(v); ++k)
        b.f.push_back(dist.lo == dist.hi ? float(dist.lo) : float(u(rng)));
    }
    if (b.f.size() + b.i.size() == at) b.f.push_back(0);  // an empty tensor still has an address
    if (isBF16(v)) {  // the same values rounded to bf16
      b.h.resize(b.f.size());
      numeric::floatToBF16(b.f.data(), b.h.data(), static_cast<int64_t>(b.f.size()));
      b.f.clear();
    }
    out.push_back(std::move(b));
  }
  return out;
}

/// Result buffers filled with a sentinel (NaN, -77), so an element never written shows.
inline std::vector<Buffer> resultBuffers(mlir::Operation* op, size_t at = 0) {
  std::vector<Buffer> out;
  for (mlir::Value v : op->getResults()) {
    Buffer b;
    b.at = at;
    if (isI32(v))
      b.i.assign(std::max<int64_t>(numelOf(v), 1) + at, -77);
    else if (isBF16(v))
      b.h.assign(std::max<int64_t>(numelOf(v), 1) + at, 0x7FC0);  // NaN
    else
      b.f.assign(std::max<int64_t>(numelOf(v), 1) + at, NAN);
    out.push_back(std::move(b));
  }
  return out;
}

/// A CUDA kernel's scratch (CudaKernel::scratchBytes; the counter zeroed, as the lowering's
/// reset step leaves it), 8-byte aligned; empty for a kernel without one.
struct Scratch {
  std::vector<double> words;
  explicit Scratch(const Kernel& k) : words((k.cuda.scratchBytes + 7) / 8, 0.0) {}
  void* data() { return words.empty() ? nullptr : words.data(); }
  /// The count of finished blocks (0 once the kernel has ended).
  unsigned counter() const {
    unsigned c = 0;
    if (!words.empty()) std::memcpy(&c, words.data(), sizeof c);
    return c;
  }
};

/// Runs the kernel `fn` (void(void**)) on results then operands, then `scratch` if any.
inline void run(void* fn, std::vector<Buffer>& results, std::vector<Buffer>& operands,
                void* scratch = nullptr) {
  std::vector<void*> args;
  for (Buffer& b : results) args.push_back(b.data());
  for (Buffer& b : operands) args.push_back(b.data());
  if (scratch) args.push_back(scratch);
  reinterpret_cast<void (*)(void**)>(fn)(args.data());
}

/// The accepted |simt - cpp| of a kernel's result, relative to max |cpp| over the result:
/// 0 where both compute the same operations in the same order (elementwise, layout, fused
///   elementwise regions, embedding_grad's f32 sums in index order, clip in double);
/// 2 u for sums accumulated in double on both sides (only the final rounding may differ);
/// n u for row reductions of length n in f32 (different summation order: each partial sum's
///   rounding error is at most n u of the sum of magnitudes, and the outputs scale with them).
inline double relativeToleranceF32(const Kernel& k) {
  mlir::Operation* op = k.op;
  // The fused attention kernels: both are within the attention bound of
  // CppEmitterAttentionCases.h of the exact result (relative to its largest value), in a
  // different order of operations (a division by the row sum on the host, exp(s - lse) on
  // the device), so they agree within twice that bound.
  if (mlir::isa<CausalAttentionOp, GroupedAttentionOp, CausalAttentionGradOp, GroupedAttentionGradOp>(op)) {
    auto heads = mlir::cast<mlir::IntegerAttr>(op->getAttr("num_heads")).getInt();
    auto kvAttr = op->getAttrOfType<mlir::IntegerAttr>("num_kv_heads");
    int64_t kvHeads = kvAttr ? kvAttr.getInt() : heads;
    bool packed = mlir::isa<CausalAttentionOp, CausalAttentionGradOp>(op);
    double d = static_cast<double>(dimOf(op->getOperand(0), -1) / (packed ? 3 : 1) / heads);
    double rows = static_cast<double>(heads / kvHeads * dimOf(op->getOperand(0), 1));
    return 2 * (16 * (d + 1) * std::sqrt(d) + 8 * rows) * kU;
  }
  switch (k.cuda.kind) {
    case CudaKernelKind::Elementwise:
    case CudaKernelKind::Layout:
    case CudaKernelKind::Scalar:
    case CudaKernelKind::FusedElementwise:
      return 0;
    case CudaKernelKind::Reduction:
      return mlir::isa<EmbeddingGradOp, EmbeddingShardGradOp>(op) ? 0 : 2 * kU;
    case CudaKernelKind::Row:
    case CudaKernelKind::FusedRow: {
      int64_t n =
          mlir::isa<FusedOp>(op) ? dimOf(op->getResult(0), -1) : dimOf(op->getOperand(0), -1);
      return static_cast<double>(n) * kU;
    }
  }
  return 0;
}

/// A bf16 result adds 2^-7: where the two f32 values differ (row reductions), they may round
/// to neighbouring bf16 values, one bf16 ulp apart (at most 2^-7 of the value). Where they
/// are equal (tolerance 0), so are the bf16 values.
inline double relativeTolerance(const Kernel& k) {
  double f32 = relativeToleranceF32(k);
  bool bf16 = llvm::any_of(k.op->getResults(), [](mlir::Value v) { return isBF16(v); });
  return bf16 && f32 > 0 ? f32 + 1.0 / 128 : f32;
}

/// The comparison of one result.
struct Diff {
  double maxDiff = 0, maxWant = 0;
  int64_t mismatches = 0;  // elements outside the tolerance (NaN on one side only counts)
};

inline Diff compare(const Buffer& got, const Buffer& want, double relTol) {
  Diff d;
  if (!want.i.empty()) {
    for (size_t k = want.at; k < want.i.size(); ++k) d.mismatches += got.i[k] != want.i[k];
    return d;
  }
  const std::vector<float> wantF = want.floats(), gotF = got.floats();
  for (float w : wantF)
    if (std::isfinite(w)) d.maxWant = std::max(d.maxWant, std::abs(double(w)));
  double tol = relTol * d.maxWant;
  for (size_t k = want.at; k < wantF.size(); ++k) {
    double g = gotF[k], w = wantF[k];
    if (std::isnan(g) || std::isnan(w)) {
      d.mismatches += std::isnan(g) != std::isnan(w);
      continue;
    }
    double diff = g == w ? 0.0 : std::abs(g - w);  // equal infinities differ by 0
    d.maxDiff = std::max(d.maxDiff, diff);
    d.mismatches += diff > tol;
  }
  return d;
}

inline bool nvrtcRequired() {
  const char* v = std::getenv("TESSEL_REQUIRE_NVRTC");
  return v && std::string(v) == "1";
}

/// Skips the test without NVRTC, or fails it if TESSEL_REQUIRE_NVRTC=1 (set by CMake).
#define REQUIRE_NVRTC()                                                                        \
  do {                                                                                         \
    std::string why;                                                                           \
    if (!::tessel::nvrtcAvailable(&why)) {                                                     \
      if (::tessel::cudatest::nvrtcRequired()) FAIL() << "TESSEL_REQUIRE_NVRTC=1 but " << why; \
      GTEST_SKIP() << "NVRTC is not available: " << why;                                       \
    }                                                                                          \
  } while (0)

/// Elementwise, row (normalization) and fused kernels must not spill: their per-thread
/// state does not grow with the shapes.
inline bool mustNotSpill(CudaKernelKind kind) {
  return kind == CudaKernelKind::Elementwise || kind == CudaKernelKind::Row ||
         kind == CudaKernelKind::FusedElementwise || kind == CudaKernelKind::FusedRow;
}

/// Compiles every kernel in one NVRTC program to an sm_90 cubin (cached under `cacheName`),
/// prints a table of their resources, and fails on a spill of a kernel that mustNotSpill.
inline void compileAndReport(const std::vector<Kernel>& kernels, const std::string& cacheName) {
  CudaCompileOptions options;
  options.arch = "sm_90";
  options.cacheDir = ::testing::TempDir() + cacheName;
  std::string source = cudaSource(kernels);
  if (const char* dump = std::getenv("TESSEL_DUMP_CUDA"))
    std::ofstream(dump) << source;  // for reading
  CudaModule module = compileCuda(source, options);
  EXPECT_FALSE(module.cubin.empty());
  EXPECT_EQ(module.kernels.size(), kernels.size());
  std::map<std::string, const CudaKernelInfo*> info;
  for (const CudaKernelInfo& k : module.kernels) info[k.name] = &k;
  std::printf("%-30s %-18s %-22s %5s %12s %6s %6s %5s  %s\n", "kernel", "kind", "grid x block",
              "regs", "spill st/ld", "smem", "stack", "uses", "op");
  for (const Kernel& k : kernels) {
    auto it = info.find(k.symbol);
    ASSERT_NE(it, info.end()) << k.symbol << " is not in the ptxas report:\n" << module.log;
    const CudaKernelInfo& i = *it->second;
    const CudaLaunch& l = k.cuda.launch;
    std::string launch = fmt::format("({},{},{})x({},{},{})", l.grid[0], l.grid[1], l.grid[2],
                                     l.block[0], l.block[1], l.block[2]);
    std::printf("%-30s %-18s %-22s %5d %5d/%-6d %6d %6d %5d  %s\n", k.symbol.c_str(),
                kindName(k.cuda.kind), launch.c_str(), i.registers, i.spillStoreBytes,
                i.spillLoadBytes, i.sharedBytes, i.stackBytes, k.uses,
                k.op->getName().getStringRef().str().c_str());
    if (mustNotSpill(k.cuda.kind)) {
      EXPECT_EQ(i.spillStoreBytes, 0) << k.symbol << " (" << kindName(k.cuda.kind) << ") spills";
    }
  }
}

/// Runs every kernel of `kernels` (those `select` accepts) in the SIMT harness and with its
/// C++ twin on the same random inputs, `at` elements into their buffers, and checks that
/// they agree within relativeTolerance. Prints one line per result. With `oneBlock`, the
/// kernels run on a grid of one block instead of their own.
inline void checkInSimt(const std::vector<Kernel>& kernels, size_t at = 0,
                        const std::function<bool(const Kernel&)>& select = {},
                        bool oneBlock = false) {
  KernelLibrary simt = buildSimtLibrary(simtSource(cudaSource(kernels), kernels));
  KernelLibrary cpp = buildCppLibrary(kernels);
  std::mt19937 rng(20261129);
  for (const Kernel& k : kernels) {
    if (select && !select(k)) continue;
    SCOPED_TRACE(k.symbol);
    std::vector<Buffer> operands = randomOperands(k.op, rng, at);
    std::vector<Buffer> want = resultBuffers(k.op, at), got = resultBuffers(k.op, at);
    run(cpp.symbol(k.symbol), want, operands);
    auto start = std::chrono::steady_clock::now();
    Scratch scratch(k);
    run(simt.symbol(k.symbol + (oneBlock ? "_simt_one_block" : "_simt")), got, operands,
        scratch.data());
    EXPECT_EQ(scratch.counter(), 0u) << k.symbol << " left its block counter set";
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double tol = relativeTolerance(k);
    for (size_t r = 0; r < want.size(); ++r) {
      Diff d = compare(got[r], want[r], tol);
      double units = d.maxWant > 0 ? d.maxDiff / (kU * d.maxWant) : 0;
      std::printf(
          "[ simt     ] %-30s %-18s result %zu: max |simt - cpp| %.3g = %.2f u x max|cpp| (%.3g); "
          "tolerance %.0f u; %.2f s\n",
          k.symbol.c_str(), kindName(k.cuda.kind), r, d.maxDiff, units, d.maxWant, tol / kU,
          seconds);
      EXPECT_EQ(d.mismatches, 0) << k.symbol << " result " << r << ": max diff " << d.maxDiff
                                 << ", tolerance " << tol * d.maxWant << "\n"
                                 << k.cuda.source;
    }
  }
}

}  // namespace tessel::cudatest
