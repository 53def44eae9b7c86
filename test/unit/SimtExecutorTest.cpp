// The CUDA target of a whole program, run end to end without a GPU: the GPT (L=2, C=64,
// NH=4, T=32, B=4) is lowered with CUDA kernels (codegen/Lowering.h LoweringOptions::cuda),
// its one CUDA translation unit (Program::cudaSource) is compiled as host C++ against the
// SIMT harness (test/simt/Simt.h), and the CPU executor runs the program's steps in order
// with every KernelStep launched on the SIMT harness with the launch configuration stored
// on the step (GEMMs and copies as on the CPU). A few AdamW steps then match the same
// program on the C++ kernels. This checks the CUDA lowering, the stored launches, the
// argument order and the step sequence: everything of a GPU run except the driver calls.
#include "test/unit/CudaKernelsTestUtil.h"

#include "examples/gpt/model.h"
#include "test/support/SmallGpt.h"
#include "test/support/TinyLlamaMlp.h"
#include "test/unit/TinyLlamaAttention.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Loop.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

namespace tessel::cudatest {
namespace {

using test::smallGpt;
constexpr int64_t kBatch = test::kSmallGptBatch;

/// Attention decomposed, as the GPU trainer compiles it (dsl/trainer/App.cpp); the fused
/// attention kernels are checked one by one in CudaKernelOpsTest and CudaKernelsTest.
rt::Program lowerGpt(bool cuda) {
  gpt::GPT model(smallGpt());
  gpt::build(model, kBatch);
  return model.compile({.decompose_attention = true}).lower(cuda);
}

/// Host C++ for the program's CUDA source: the kernels, then one `<symbol>_simt(void** args)`
/// per symbol launching it on the SIMT harness with the grid and block of its steps.
std::string simtProgramSource(const rt::Program& p) {
  std::map<std::string, std::pair<rt::LaunchConfig, size_t>> symbols;  // launch, argument count
  for (const rt::Function& f : p.functions)
    for (const rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s)) symbols.emplace(k->symbol, std::pair{*k->launch, k->args.size()});
  std::string src = fmt::format(
      "// SIMT build of a program's CUDA source (harness Simt.h hash {:x})\n"
      "#include \"test/simt/Simt.h\"\n#include <cstddef>\n#include <utility>\n"
      "template <typename... P, std::size_t... I>\n"
      "static void tessel_simt_call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {{\n"
      "  kernel(static_cast<P>(args[I])...);\n}}\n",
      std::hash<std::string>{}(readFile(std::string(TESSEL_SOURCE_DIR) + "/test/simt/Simt.h")));
  src += p.cudaSource;
  for (const auto& [symbol, info] : symbols) {
    const auto& [l, args] = info;
    src += fmt::format(
        "extern \"C\" void {0}_simt(void** args) {{\n"
        "  simt::launch(dim3({1}, {2}, {3}), dim3({4}, {5}, {6}), [&] {{\n"
        "    tessel_simt_call({0}, args, std::make_index_sequence<{7}>{{}});\n  }});\n}}\n",
        symbol, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], args);
  }
  return src + "\n// ---- the harness (test/simt/Simt.cpp) ----\n" +
         readFile(std::string(TESSEL_SOURCE_DIR) + "/test/simt/Simt.cpp");
}

/// A program's kernels built twice, on the SIMT harness and as C++ (without FMA contraction,
/// as the SIMT build: both round every operation), and an executor on each.
struct SimtAndCpu {
  KernelLibrary simt, native;
  rt::Executor onSimt, onCpu;
  explicit SimtAndCpu(const rt::Program& program)
      : simt(buildSimtLibrary(simtProgramSource(program))),
        native(buildKernelLibrary(program.kernelSource, cppOptions())),
        onSimt(program, [this](const std::string& s) { return simt.symbol(s + "_simt"); }),
        onCpu(program, [this](const std::string& s) { return native.symbol(s); }) {}
  static HostCompileOptions cppOptions() {
    HostCompileOptions o;
    o.flags.push_back("-ffp-contract=off");
    o.cacheDir = ::testing::TempDir() + "tessel_simt_executor_cpp";
    return o;
  }
};

std::vector<trainer::StepStats> trainSteps(rt::Executor& ex, int64_t steps) { return test::trainSmallGpt(ex, steps); }

TEST(SimtExecutor, CudaLoweringKeepsTheCpuStepsAndAddsALaunchToEveryKernel) {
  // The CUDA lowering is the CPU one plus, in a function with two-level sums, one scratch
  // temp that each of them takes as its last argument, and a step before the first of them
  // that resets the scratch: with those removed, the buffers (but for their arena offsets)
  // and the steps are the same.
  rt::Program cpu = lowerGpt(false), cuda = lowerGpt(true);
  EXPECT_TRUE(cpu.cudaSource.empty());
  ASSERT_FALSE(cuda.cudaSource.empty());
  std::set<int> scratch;
  for (const rt::Function& f : cuda.functions) {
    int resets = 0;
    for (const rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s); k && k->symbol.ends_with("_reset_scratch")) {
        scratch.insert(k->args.at(0));
        ++resets;
      }
    EXPECT_LE(resets, 1) << f.name << ": one scratch per function, reset once";
  }
  EXPECT_FALSE(scratch.empty()) << "the GPT has two-level sums (layer_norm_grad, global_norm)";
  std::vector<int> toCpu(cuda.buffers.size(), -1);  // CUDA buffer id -> CPU buffer id
  int next = 0;
  for (size_t b = 0; b < cuda.buffers.size(); ++b) {
    if (scratch.count(static_cast<int>(b))) continue;
    ASSERT_LT(next, static_cast<int>(cpu.buffers.size()));
    rt::Buffer x = cuda.buffers[b], y = cpu.buffers[next];
    x.offset = y.offset = 0;  // the memory plan has the scratch temps too
    if (x.kind == rt::BufferKind::Temp) x.name = y.name = "";  // "%<id>": ids shift
    EXPECT_EQ(x, y) << "buffer " << b;
    toCpu[b] = next++;
  }
  EXPECT_EQ(next, static_cast<int>(cpu.buffers.size()));
  auto mapped = [&](std::vector<int> ids) {
    for (int& id : ids) id = toCpu.at(id);
    return ids;
  };
  ASSERT_EQ(cuda.functions.size(), cpu.functions.size());
  for (size_t f = 0; f < cpu.functions.size(); ++f) {
    const std::vector<rt::Step>& steps = cuda.functions[f].steps;
    size_t c = 0;
    int reset = -1;  // the function's scratch, once reset
    for (size_t s = 0; s < steps.size(); ++s, ++c) {
      const auto* k = std::get_if<rt::KernelStep>(&steps[s]);
      if (k && k->symbol.ends_with("_reset_scratch")) {
        reset = k->args.at(0);
        ASSERT_LT(s + 1, steps.size());
        k = std::get_if<rt::KernelStep>(&steps[++s]);
        ASSERT_NE(k, nullptr) << "a reset step must precede a kernel";
        ASSERT_EQ(k->args.back(), reset) << k->symbol << " must take the scratch last";
      }
      ASSERT_LT(c, cpu.functions[f].steps.size());
      const rt::Step& a = cpu.functions[f].steps[c];
      ASSERT_EQ(a.index(), steps[s].index()) << "step " << s;
      if (k) {
        EXPECT_TRUE(k->launch.has_value()) << k->symbol;
        std::vector<int> args = k->args;
        if (scratch.count(args.back())) {
          EXPECT_EQ(args.back(), reset) << k->symbol << " uses a scratch before its reset";
          args.pop_back();
        }
        EXPECT_EQ(mapped(args), std::get<rt::KernelStep>(a).args) << k->symbol;
        EXPECT_NE(cuda.cudaSource.find(" " + k->symbol + "("), std::string::npos) << k->symbol;
      } else if (auto* g = std::get_if<rt::GemmStep>(&steps[s])) {
        EXPECT_EQ(mapped({g->a, g->b, g->c}),
                  (std::vector<int>{std::get<rt::GemmStep>(a).a, std::get<rt::GemmStep>(a).b,
                                    std::get<rt::GemmStep>(a).c}));
      }
    }
    EXPECT_EQ(c, cpu.functions[f].steps.size());
  }
  rt::validateProgram(cuda, "test");
}

TEST(SimtExecutor, KernelSymbolsSayWhatTheyComputeAndAreShortCIdentifiers) {
  // Fused kernels are named by the ops they fuse, each once in body order, at most four
  // names and then the count of the others: a valid C identifier of bounded length.
  rt::Program cuda = lowerGpt(true);
  std::set<std::string> symbols, fused;
  for (const rt::Function& f : cuda.functions)
    for (const rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s)) symbols.insert(k->symbol);
  const std::regex identifier("k[0-9]+_[a-z_]+(_and_[0-9]+_more)?");
  for (const std::string& symbol : symbols) {
    EXPECT_TRUE(std::regex_match(symbol, identifier)) << symbol;
    EXPECT_LE(symbol.size(), 64u) << symbol;  // k<n>_fused_ + 4 op names + _and_<n>_more
    if (symbol.find("_fused") == std::string::npos) continue;
    fused.insert(symbol);
    EXPECT_FALSE(std::regex_match(symbol, std::regex("k[0-9]+_fused"))) << "names no op";
  }
  // The GPT's residual add + layer norm and its bias + GELU are fused (tessel-fuse).
  EXPECT_TRUE(std::any_of(fused.begin(), fused.end(), [](const std::string& s) {
    return s.find("_fused_add_layer_norm") != std::string::npos;
  })) << "fused kernels: " << fused.size();
  // Identical kernels still share one symbol: far fewer symbols than kernel steps.
  size_t steps = 0;
  for (const rt::Function& f : cuda.functions)
    for (const rt::Step& s : f.steps) steps += std::holds_alternative<rt::KernelStep>(s);
  EXPECT_LT(symbols.size() * 2, steps);
}

TEST(SimtExecutor, GptTrainingStepsOnTheSimtHarnessMatchTheCppKernels) {
  rt::Program program = lowerGpt(true);
  SimtAndCpu both(program);
  rt::Executor &onSimt = both.onSimt, &onCpu = both.onCpu;
  const int64_t steps = 3;
  auto start = std::chrono::steady_clock::now();
  std::vector<trainer::StepStats> got = trainSteps(onSimt, steps);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<trainer::StepStats> want = trainSteps(onCpu, steps);
  // Tolerance: the two sides run the same operations except the order of the row reductions
  // (block trees vs sequential loops), each within n u of its sum of magnitudes
  // (CudaKernelsTestUtil.h relativeTolerance). The loss passes through about 4L + 3 = 11 such
  // reductions of length <= V = 256 (layer norms over C = 64, softmax over T = 32, the
  // cross-entropy over V = 256, its mean over B*T = 128), so a first-order bound on its relative
  // difference at step 1 is 11 * 256 u = 1.7e-4; the two AdamW updates that follow are
  // continuous in the gradients and the check stays at that bound for the 3 steps. A wrong
  // launch, argument or step order changes the loss in its first digits.
  const double tol = 11 * 256 * kU;
  for (int64_t s = 0; s < steps; ++s) {
    std::printf("[ simt     ] step %lld: loss simt %.7f cpu %.7f (rel %.2e), grad norm simt %.6f cpu %.6f\n",
                static_cast<long long>(s + 1), got[s].loss, want[s].loss,
                std::abs(got[s].loss - want[s].loss) / std::abs(want[s].loss), got[s].gradNorm, want[s].gradNorm);
    EXPECT_NEAR(got[s].loss, want[s].loss, tol * std::abs(want[s].loss)) << "step " << s + 1;
    EXPECT_NEAR(got[s].gradNorm, want[s].gradNorm, tol * std::abs(want[s].gradNorm)) << "step " << s + 1;
  }
  EXPECT_NEAR(got.back().valLoss, want.back().valLoss, tol * std::abs(want.back().valLoss));
  std::printf("[ simt     ] %lld train steps + 1 eval on the SIMT harness: %.1f s\n", static_cast<long long>(steps),
              seconds);
}

// The Llama block's ops in a whole program: RMSNorm, the fused SwiGLU gate and its backward,
// rms_norm_grad's two-level dweight sums and the untied head, lowered with CUDA kernels and
// trained on the SIMT harness against the C++ kernels. The model (L = 2 MLP blocks, C = 64,
// H = 96, V = 256) takes the small GPT's batches (B = 4, T = 32, bytes), so the same training
// schedule feeds it. Tolerance as in the GPT test: the loss passes through about 2L + 3 = 7
// row reductions of length <= V = 256 (the RMS norms over C = 64, the cross-entropy over V,
// its mean over B*T = 128) that differ in order only, so 7 * 256 u relative.
TEST(SimtExecutor, LlamaMlpTrainingStepsOnTheSimtHarnessMatchTheCppKernels) {
  test::TinyLlamaMlp model(2, 256, 64, 96);
  model.build(kBatch, smallGpt().seq);
  rt::Program program = model.compile({.decompose_attention = true}).lower(true);
  std::set<std::string> kinds;
  for (const rt::Function& f : program.functions)
    for (const rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s)) kinds.insert(k->symbol.substr(k->symbol.find('_') + 1));
  EXPECT_TRUE(kinds.count("fused_silu_mul")) << "the SwiGLU gate is not one fused kernel";
  EXPECT_TRUE(kinds.count("rms_norm_grad"));
  SimtAndCpu both(program);
  rt::Executor &onSimt = both.onSimt, &onCpu = both.onCpu;
  const int64_t steps = 3;
  std::vector<trainer::StepStats> got = trainSteps(onSimt, steps), want = trainSteps(onCpu, steps);
  const double tol = 7 * 256 * kU;
  for (int64_t s = 0; s < steps; ++s) {
    std::printf("[ simt     ] llama mlp step %lld: loss simt %.7f cpu %.7f (rel %.2e)\n",
                static_cast<long long>(s + 1), got[s].loss, want[s].loss,
                std::abs(got[s].loss - want[s].loss) / std::abs(want[s].loss));
    EXPECT_NEAR(got[s].loss, want[s].loss, tol * std::abs(want[s].loss)) << "step " << s + 1;
    EXPECT_NEAR(got[s].gradNorm, want[s].gradNorm, tol * std::abs(want[s].gradNorm)) << "step " << s + 1;
  }
}

// The Llama attention in a whole program: rope (forward and its inverse in the backward pass)
// and the decomposed grouped-query attention (NH = 4, NKV = 2, D = 16: the G*T reshapes
// around the causal softmax), with a tied head, lowered with CUDA kernels and trained on the
// SIMT harness against the C++ kernels on the small GPT's batches (B = 4, T = 32). Tolerance
// as in the GPT test: the loss passes through about 3 row reductions of length <= V = 256
// (the causal softmax over T = 32, the cross-entropy over V, its mean over B*T = 128) that
// differ in order only; rope's kernels compute the same float operations on both sides. So
// 3 * 256 u relative.
TEST(SimtExecutor, LlamaAttentionTrainingStepsOnTheSimtHarnessMatchTheCppKernels) {
  test::TinyLlamaAttention model(4, 2, 16);
  model.build(kBatch, smallGpt().seq);
  rt::Program program = model.compile({.decompose_attention = true}).lower(true);
  int ropes = 0;
  for (const rt::Function& f : program.functions)
    for (const rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s)) ropes += k->symbol.ends_with("_rope");
  EXPECT_GE(ropes, 4) << "rope of q and k, and their inverses in the backward pass";
  SimtAndCpu both(program);
  const int64_t steps = 3;
  std::vector<trainer::StepStats> got = trainSteps(both.onSimt, steps), want = trainSteps(both.onCpu, steps);
  const double tol = 3 * 256 * kU;
  for (int64_t s = 0; s < steps; ++s) {
    std::printf("[ simt     ] llama attention step %lld: loss simt %.7f cpu %.7f (rel %.2e)\n",
                static_cast<long long>(s + 1), got[s].loss, want[s].loss,
                std::abs(got[s].loss - want[s].loss) / std::abs(want[s].loss));
    EXPECT_NEAR(got[s].loss, want[s].loss, tol * std::abs(want[s].loss)) << "step " << s + 1;
    EXPECT_NEAR(got[s].gradNorm, want[s].gradNorm, tol * std::abs(want[s].gradNorm)) << "step " << s + 1;
  }
}

TEST(SimtExecutor, AWrongLaunchOnAStepIsCaught) {
  // The check above must be able to fail: the block of every kernel launched with 64 threads
  // or more is halved, as a lowering that stored the wrong launch would do. Elementwise
  // kernels stride over their work and stay right; block reductions (layer norm, softmax,
  // cross-entropy, sized for the stored block) do not, so the first loss or gradient norm
  // leaves the tolerance.
  rt::Program program = lowerGpt(true);
  int changed = 0;
  for (rt::Function& f : program.functions)
    for (rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s);
          k && k->launch->block[0] >= 64) {
        k->launch->block[0] /= 2;
        ++changed;
      }
  ASSERT_GT(changed, 0) << "no kernel with a block of 64 or more";
  SimtAndCpu both(program);
  rt::Executor &onSimt = both.onSimt, &onCpu = both.onCpu;
  trainer::StepStats got = trainSteps(onSimt, 1).at(0), want = trainSteps(onCpu, 1).at(0);
  std::printf("[ simt     ] halved blocks (%d steps): loss %.7f vs %.7f, grad norm %.6f vs %.6f\n", changed,
              got.loss, want.loss, got.gradNorm, want.gradNorm);
  const double tol = 11 * 256 * kU;
  EXPECT_FALSE(std::abs(got.loss - want.loss) <= tol * std::abs(want.loss) &&
               std::abs(got.gradNorm - want.gradNorm) <= tol * std::abs(want.gradNorm));
}

}  // namespace
}  // namespace tessel::cudatest
