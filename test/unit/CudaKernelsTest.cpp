// The CUDA kernels Tessel generates (codegen/CudaEmitter.h), checked without a GPU:
// (a) every kernel of the GPT and MLP training programs compiles with NVRTC, all in one
//     program, to an sm_90 cubin; a table of registers and spills is printed, and no
//     elementwise, row (normalization) or fused kernel may spill;
// (b) the same CUDA text, compiled as host C++ with the SIMT harness (test/simt/Simt.h),
//     runs every kernel on random inputs and matches the C++ kernel of the same op
//     (tolerances: relativeTolerance in CudaKernelsTestUtil.h);
// (c) a planted bug, one __syncthreads() removed from a block reduction, is caught;
// (d) no kernel keeps state in module-scope __device__ variables: the two-level sums take
//     their scratch as an argument and run twice on separate scratch with the same results.
//
// Programs: the GPT (L=2, C=64, NH=4, T=32, B=4), and the MLP (784-256-256-10, B=32) with
// AdamW and with SGD; (a) also for a GPT at GPT-2 small's widths. Every op at awkward sizes,
// misaligned pointers and one-block grids: CudaKernelOpsTest.cpp. Without NVRTC (a) skips,
// unless TESSEL_REQUIRE_NVRTC=1 (set by CMake).
#include "test/unit/CudaKernelsTestUtil.h"

#include "examples/gpt/model.h"
#include "examples/mlp/model.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace tessel::cudatest {
namespace {

/// The programs under test and their kernels, built once per process.
struct Programs {
  Modules modules;
  std::vector<Kernel> gpt, mlp, mlpSgd;
  std::vector<Kernel> gptBf16, mlpBf16;  // precision = bf16 (passes/MixedPrecision.cpp)
};

Programs& programs() {
  static Programs* p = [] {
    auto* p = new Programs;
    gpt::Config cfg;
    cfg.layers = 2;
    cfg.channels = 64;
    cfg.heads = 4;
    cfg.seq = 32;
    gpt::GPT g(cfg);
    gpt::build(g, 4);
    p->gpt = collectKernels(p->modules.parse(g.compile().ir(true)), "gpt_");
    mlp::Mlp m(mlp::Config{});
    mlp::build(m, 32);
    p->mlp = collectKernels(p->modules.parse(m.compile().ir(true)), "mlp_");
    mlp::Mlp s(mlp::Config{});
    mlp::build(s, 32);
    CompileOptions sgd;
    sgd.optimizer = "sgd";
    p->mlpSgd = collectKernels(p->modules.parse(s.compile(sgd).ir(true)), "mlpsgd_");
    CompileOptions bf16;
    bf16.precision = DType::BF16;
    gpt::GPT gb(cfg);
    gpt::build(gb, 4);
    p->gptBf16 = collectKernels(p->modules.parse(gb.compile(bf16).ir(true)), "gptbf16_");
    mlp::Mlp mb(mlp::Config{});
    mlp::build(mb, 32);
    p->mlpBf16 = collectKernels(p->modules.parse(mb.compile(bf16).ir(true)), "mlpbf16_");
    return p;
  }();
  return *p;
}

TEST(CudaKernels, GptAndMlpKernelsCompileToOneSm90CubinWithoutSpills) {
  REQUIRE_NVRTC();
  Programs& p = programs();
  std::vector<Kernel> all;
  for (auto* set : {&p.gpt, &p.mlp, &p.mlpSgd, &p.gptBf16, &p.mlpBf16})
    all.insert(all.end(), set->begin(), set->end());
  compileAndReport(all, "tessel_cuda_kernels_nvrtc");
}

TEST(CudaKernels, Gpt2SizedKernelsCompileWithoutSpills) {
  // GPT-2 small's widths (C = 768, NH = 12, T = 1024; two blocks, B = 4): the launches and
  // the chunked sums scale with the shapes, and still nothing that must not spill does.
  REQUIRE_NVRTC();
  gpt::Config cfg;
  cfg.layers = 2;
  cfg.channels = 768;
  cfg.heads = 12;
  cfg.seq = 1024;
  gpt::GPT g(cfg);
  gpt::build(g, 4);
  Modules modules;
  compileAndReport(collectKernels(modules.parse(g.compile().ir(true)), "gpt2_"),
                   "tessel_cuda_kernels_gpt2_nvrtc");
  gpt::GPT gb(cfg);
  gpt::build(gb, 4);
  CompileOptions bf16;
  bf16.precision = DType::BF16;
  compileAndReport(collectKernels(modules.parse(gb.compile(bf16).ir(true)), "gpt2bf16_"),
                   "tessel_cuda_kernels_gpt2_bf16_nvrtc");
}

// passes/FuseClassifier.cpp: every training program computes its loss and the logits
// gradient with one fused_classifier kernel, so the whole-program checks here (and in
// SimtExecutorTest, NativeTest) run it; @forward keeps its cross_entropy.
TEST(CudaKernels, TrainingProgramsUseTheFusedClassifier) {
  for (const auto* kernels : {&programs().gpt, &programs().gptBf16, &programs().mlp,
                              &programs().mlpSgd, &programs().mlpBf16}) {
    std::set<std::string> ops;
    for (const Kernel& k : *kernels) ops.insert(k.op->getName().getStringRef().str());
    SCOPED_TRACE(kernels->front().symbol);
    EXPECT_TRUE(ops.count("tessel.fused_classifier"));
    EXPECT_TRUE(ops.count("tessel.cross_entropy"));  // @forward's loss
    EXPECT_FALSE(ops.count("tessel.cross_entropy_grad"));
  }
}

TEST(CudaKernels, GptKernelsInSimtMatchTheCppKernels) { checkInSimt(programs().gpt); }

TEST(CudaKernels, Bf16GptAndMlpKernelsInSimtMatchTheCppKernels) {
  // Mixed precision has bf16 kernels of every kind the f32 programs have.
  size_t bf16Kernels = 0;
  for (const Kernel& k : programs().gptBf16)
    bf16Kernels += llvm::any_of(k.op->getResults(), [](mlir::Value v) { return isBF16(v); });
  EXPECT_GT(bf16Kernels, programs().gptBf16.size() / 2);
  checkInSimt(programs().gptBf16);
  checkInSimt(programs().mlpBf16);
}

TEST(CudaKernels, MlpKernelsInSimtMatchTheCppKernels) {
  checkInSimt(programs().mlp);
  checkInSimt(programs().mlpSgd);
}

TEST(CudaKernels, MissingSyncthreadsInABlockReductionIsCaught) {
  // The GPT's fused residual-add + layer_norm: one block per row, two block reductions.
  std::vector<Kernel>& kernels = programs().gpt;
  const Kernel* ln = nullptr;
  for (const Kernel& k : kernels)
    if (k.cuda.kind == CudaKernelKind::FusedRow &&
        k.cuda.source.find("tessel.layer_norm at") != std::string::npos)
      ln = &k;
  ASSERT_NE(ln, nullptr);
  ASSERT_GE(ln->cuda.launch.block[0], 64u) << "a one-warp block would hide the race";
  Kernel bad = *ln;
  bad.symbol = ln->symbol + "_planted";
  bad.cuda.source = replaceAll(ln->cuda.source, ln->symbol, bad.symbol);
  // The first barrier: between the warps writing their partial sums and everyone reading them.
  size_t at = bad.cuda.source.find("__syncthreads();");
  ASSERT_NE(at, std::string::npos);
  bad.cuda.source.replace(at, 16, "/* planted bug: __syncthreads() removed */");
  std::vector<Kernel> both{*ln, bad};
  KernelLibrary simt = buildSimtLibrary(simtSource(cudaSource(both), both));
  KernelLibrary cpp = buildCppLibrary({*ln});
  std::mt19937 rng(7);
  std::vector<Buffer> operands = randomOperands(ln->op, rng);
  std::vector<Buffer> want = resultBuffers(ln->op), good = resultBuffers(ln->op),
                      racy = resultBuffers(ln->op);
  run(cpp.symbol(ln->symbol), want, operands);
  run(simt.symbol(ln->symbol + "_simt"), good, operands);
  run(simt.symbol(bad.symbol + "_simt"), racy, operands);
  double tol = relativeTolerance(*ln);
  int64_t goodMismatches = 0, racyMismatches = 0;
  double racyDiff = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    goodMismatches += compare(good[r], want[r], tol).mismatches;
    Diff d = compare(racy[r], want[r], tol);
    racyMismatches += d.mismatches;
    racyDiff = std::max(racyDiff, d.maxDiff);
  }
  std::printf(
      "[ planted  ] %s without its first __syncthreads: %lld elements wrong, max diff %.3g\n",
      ln->symbol.c_str(), static_cast<long long>(racyMismatches), racyDiff);
  EXPECT_EQ(goodMismatches, 0);
  EXPECT_GT(racyMismatches, 0) << "the race went unnoticed";
}

/// The module-scope variables of a CUDA source: declarations outside every function and
/// struct (brace depth 0, comments stripped) marked __device__, __constant__ or __managed__
/// that declare no function (no parenthesis).
std::vector<std::string> moduleScopeVariables(const std::string& source) {
  std::vector<std::string> found;
  std::istringstream in(source);
  std::string line;
  int depth = 0;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find("//"));
    bool deviceSpace = line.find("__device__") != std::string::npos ||
                       line.find("__constant__") != std::string::npos ||
                       line.find("__managed__") != std::string::npos;
    if (depth == 0 && deviceSpace && line.find('(') == std::string::npos) found.push_back(line);
    for (char c : line) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
  }
  return found;
}

TEST(CudaKernels, NoKernelKeepsStateInModuleScopeVariables) {
  // A __device__ global makes a kernel unsafe to run twice at once (two streams, graph
  // replay): every cross-block scratch must be an argument. The check itself must see one.
  EXPECT_EQ(moduleScopeVariables("__device__ float k_partial[4];\n__device__ unsigned int k_done = 0;\n"
                                 "__device__ __forceinline__ float f(float x) { return x; }\n")
                .size(),
            2u);
  size_t withScratch = 0;
  for (const std::vector<Kernel>* kernels :
       {&programs().gpt, &programs().mlp, &programs().mlpSgd, &programs().gptBf16,
        &programs().mlpBf16}) {
    EXPECT_EQ(moduleScopeVariables(cudaSource(*kernels)), std::vector<std::string>{});
    for (const Kernel& k : *kernels) {
      if (k.cuda.scratchBytes == 0) continue;
      ++withScratch;
      EXPECT_NE(k.cuda.source.find("unsigned char* scratch) {"), std::string::npos)
          << k.symbol << ": the scratch must be the last parameter";
    }
  }
  EXPECT_GT(withScratch, 0u) << "no two-level sum left to check";
}

TEST(CudaKernels, TwoLevelSumsRunTwiceOnSeparateScratchAndMatchTheCppKernels) {
  // Every kernel with a scratch (layer_norm_grad, the loss means, global_norm, bias
  // gradients), run twice in the SIMT harness, each launch on its own scratch: both match
  // the C++ kernel (relativeTolerance), agree bit for bit, hold the same chunk sums in their
  // own scratch, and leave its counter at 0, ready for the next launch.
  std::vector<Kernel> kernels;
  for (const std::vector<Kernel>* all : {&programs().gpt, &programs().mlp})
    for (const Kernel& k : *all)
      if (k.cuda.scratchBytes > 0) kernels.push_back(k);
  ASSERT_FALSE(kernels.empty());
  KernelLibrary simt = buildSimtLibrary(simtSource(cudaSource(kernels), kernels));
  KernelLibrary cpp = buildCppLibrary(kernels);
  std::mt19937 rng(20261201);
  for (const Kernel& k : kernels) {
    SCOPED_TRACE(k.symbol);
    std::vector<Buffer> operands = randomOperands(k.op, rng);
    std::vector<Buffer> want = resultBuffers(k.op), first = resultBuffers(k.op),
                        second = resultBuffers(k.op);
    run(cpp.symbol(k.symbol), want, operands);
    Scratch a(k), b(k);
    run(simt.symbol(k.symbol + "_simt"), first, operands, a.data());
    run(simt.symbol(k.symbol + "_simt"), second, operands, b.data());
    EXPECT_EQ(a.counter(), 0u);
    EXPECT_EQ(b.counter(), 0u);
    EXPECT_EQ(a.words, b.words) << "the two launches' chunk sums differ";
    EXPECT_TRUE(std::any_of(a.words.begin() + kScratchHeaderBytes / 8, a.words.end(),
                            [](double w) { return w != 0.0; }))
        << "the chunk sums never reached the scratch";
    for (size_t r = 0; r < want.size(); ++r) {
      EXPECT_EQ(compare(first[r], want[r], relativeTolerance(k)).mismatches, 0) << "result " << r;
      std::vector<float> x = first[r].floats(), y = second[r].floats();
      EXPECT_TRUE(x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * 4) == 0)
          << "result " << r << " differs between the launches";
    }
  }
}

TEST(CudaKernels, KernelTextNamesTheOpItsLocationShapesAndLaunch) {
  const Kernel* k = nullptr;
  for (const Kernel& g : programs().gpt)
    if (mlir::isa<LayerNormGradOp>(g.op)) k = &g;
  ASSERT_NE(k, nullptr);
  const std::string& src = k->cuda.source;
  for (std::string needle :
       {std::string("// tessel.layer_norm_grad at loc("),
        fmt::format("extern \"C\" __global__ void __launch_bounds__({}, {}) {}(",
                    k->cuda.launch.block[0], 1024 / k->cuda.launch.block[0], k->symbol),
        std::string("float* dinp,"), std::string("// dinp [B, T, C] = [4, 32, 64]"),
        std::string("const float* gamma,"), std::string("// gamma [C] = [64]"),
        std::string("// launch: grid ("), std::string("constexpr idx_t C = 64;")})
    EXPECT_NE(src.find(needle), std::string::npos) << needle << " missing from\n" << src;
  EXPECT_EQ(src.rfind("// tessel.layer_norm_grad at", 0), 0u) << "the header must come first";
}

TEST(CudaKernels, RejectsLibraryCallsAndAliasesAcceptsBf16) {
  mlir::DialectRegistry registry;
  registerTesselDialects(registry);
  mlir::MLIRContext context(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
func.func @f(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<8x8xf32>
  %m = tessel.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = tessel.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %b = tessel.add %h, %h : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %f = tessel.fused (%h) : (tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  ^bb0(%h0: tensor<4x8xbf16>):
    %g = tessel.gelu %h0 : tensor<4x8xbf16>
    tessel.yield %g : tensor<4x8xbf16>
  }
  %ok = tessel.fused (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>):
    %g = tessel.gelu %x0 : tensor<4x8xf32>
    tessel.yield %g : tensor<4x8xf32>
  }
  tessel.assign "w", %w : tensor<8x8xf32>
  return
}
)mlir",
                                                        &context);
  ASSERT_TRUE(module);
  std::vector<std::string> accepted;
  for (mlir::Operation& op : module->lookupSymbol<mlir::func::FuncOp>("f").getBody().front())
    if (hasCudaKernel(&op)) accepted.push_back(op.getName().getStringRef().str());
  EXPECT_EQ(accepted, (std::vector<std::string>{"tessel.add", "tessel.fused", "tessel.fused"}));
  module->walk([&](MatmulOp op) { EXPECT_THROW(emitCudaKernel(op, "k"), std::invalid_argument); });
}

}  // namespace
}  // namespace tessel::cudatest
