// The GPU executor's real host path (runtime/cuda/CudaExecutor.cpp, CudaGemm.cpp, CUDA-graph
// capture) trains the small GPT on the stand-in CUDA driver and cuBLASLt (ctest sets
// TESSEL_CUDA_LIBRARY_PATH to their folder) and matches the CPU executor (--device cpu's
// path: the program lowered for the CPU, C++ kernels, OpenBLAS) step by step, in f32 and
// bf16, with and without CUDA graphs.
#include "examples/gpt/model.h"
#include "test/support/SmallGpt.h"
#include "codegen/Nvrtc.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/Driver.h"
#include "runtime/train/Loop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <chrono>
#include <cstdio>
#include <ostream>

namespace tessel {
namespace {

constexpr int64_t kSteps = 5;
constexpr double kU = 1.0 / (1 << 24);  // the unit roundoff of f32

/// The GPT of the SIMT tests (test/support/SmallGpt.h) compiled at `precision`, attention
/// decomposed as the GPU trainer compiles it (dsl/trainer/App.cpp).
Program compileGpt(DType precision) {
  gpt::GPT model(test::smallGpt());
  gpt::build(model, test::kSmallGptBatch);
  return model.compile({.precision = precision, .decompose_attention = true});
}

/// kSteps AdamW steps and a validation pass (test/support/SmallGpt.h trainSmallGpt).
std::vector<trainer::StepStats> trainSteps(rt::ProgramExecutor& ex) { return test::trainSmallGpt(ex, kSteps); }

/// The relative tolerance of the loss and gradient norm (cited from the SIMT tests):
/// - f32: 11 * 256 u (test/unit/SimtExecutorTest.cpp): the two sides differ only in the order
///   of the row reductions (SIMT block trees vs the C++ kernels' loops), each within n u of its
///   sum of magnitudes (test/unit/CudaKernelsTestUtil.h relativeTolerance), and the loss
///   passes through about 4L + 3 = 11 of length <= V = 256; the AdamW updates that follow are
///   continuous in the gradients, so the bound carries over the steps. The stand-in's GEMMs are
///   OpenBLAS sgemm, as the CPU's.
/// - bf16: plus 2^-7 (CudaKernelsTestUtil.h relativeTolerance for a bf16 result): where the two
///   f32 values differ they may round to neighbouring bf16 values, one bf16 ulp apart.
double tolerance(DType precision) { return 11 * 256 * kU + (precision == DType::BF16 ? 1.0 / 128 : 0.0); }

/// The GPT lowered for the GPU and its cubin.
std::pair<rt::Program, rt::CudaBinary> gpuProgram(const Program& program) {
  rt::Program lowered = program.lower(/*cuda_kernels=*/true);
  CudaCompileOptions co;
  co.lineInfo = false;
  CudaModule module = compileCuda(lowered.cudaSource, co);
  return {std::move(lowered), rt::CudaBinary{"sm_90", std::string(module.cubin.begin(), module.cubin.end()), module.ptx}};
}

struct Case {
  DType precision;
  bool graphs;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.precision == DType::BF16 ? "bf16" : "f32") << (c.graphs ? " with CUDA graphs" : " eager");
}

class StandinGpt : public ::testing::TestWithParam<Case> {};

TEST_P(StandinGpt, TrainsLikeTheCpu) {
  const Case c = GetParam();
  const rt::CudaDriverStatus& driver = rt::probeCudaDriver();
  ASSERT_TRUE(driver.loaded && driver.devices > 0) << "the stand-in driver did not load: " << driver.why;
  Program program = compileGpt(c.precision);
  auto [lowered, binary] = gpuProgram(program);
  rt::CudaExecutor gpu(std::move(lowered), binary, rt::CudaExecutorOptions{-1, c.graphs});
  EXPECT_EQ(gpu.usingGraphs(), c.graphs);
  NativeProgram cpu = program.native();
  auto start = std::chrono::steady_clock::now();
  std::vector<trainer::StepStats> got = trainSteps(gpu);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<trainer::StepStats> want = trainSteps(cpu.executor());
  const double tol = tolerance(c.precision);
  double worst = 0;
  for (int64_t s = 0; s < kSteps; ++s) {
    const double dl = std::abs(got[s].loss - want[s].loss) / std::abs(want[s].loss);
    const double dn = std::abs(got[s].gradNorm - want[s].gradNorm) / std::abs(want[s].gradNorm);
    worst = std::max({worst, dl, dn});
    std::printf("[ standin  ] step %lld: loss %.7f cpu %.7f (rel %.2e), grad norm %.6f cpu %.6f (rel %.2e)\n",
                static_cast<long long>(s + 1), got[s].loss, want[s].loss, dl, got[s].gradNorm, want[s].gradNorm, dn);
    EXPECT_LE(dl, tol) << "loss at step " << s + 1;
    EXPECT_LE(dn, tol) << "gradient norm at step " << s + 1;
  }
  const double dv = std::abs(got.back().valLoss - want.back().valLoss) / std::abs(want.back().valLoss);
  EXPECT_LE(dv, tol) << "validation loss";
  std::printf("[ standin  ] %s%s: max relative difference %.2e (tolerance %.2e), %lld steps on the stand-in in %.1f s\n",
              c.precision == DType::BF16 ? "bf16" : "f32", c.graphs ? " with CUDA graphs" : "", std::max(worst, dv), tol,
              static_cast<long long>(kSteps), seconds);
}

INSTANTIATE_TEST_SUITE_P(Precisions, StandinGpt,
                         ::testing::Values(Case{DType::F32, false}, Case{DType::F32, true}, Case{DType::BF16, false},
                                           Case{DType::BF16, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.precision == DType::BF16 ? "Bf16" : "F32") +
                                  (i.param.graphs ? "Graphs" : "Eager");
                         });

TEST(StandinGptFaults, AWrongLeadingDimensionInOneGemmIsCaught) {
  // Planted fault (TESSEL_STANDIN_FAULT=gemm-ld, read by the stand-in cuBLASLt): one GEMM
  // operand's leading dimension is one too large. All buffers share one allocation, so the
  // reads stay inside it: the wrong result must show as a loss, gradient norm or validation
  // loss outside the tolerance the correct runs meet. (Which function's GEMM is hit depends
  // on the order the executor prepares them in; the run covers both training and evaluation.)
  ::setenv("TESSEL_STANDIN_FAULT", "gemm-ld", 1);
  Program program = compileGpt(DType::F32);
  auto [lowered, binary] = gpuProgram(program);
  rt::CudaExecutor gpu(std::move(lowered), binary);
  NativeProgram cpu = program.native();
  std::vector<trainer::StepStats> got = trainSteps(gpu), want = trainSteps(cpu.executor());
  const double tol = tolerance(DType::F32);
  auto outside = [&](double g, double w) { return std::abs(g - w) > tol * std::abs(w); };
  bool caught = outside(got.back().valLoss, want.back().valLoss);
  for (int64_t s = 0; s < kSteps; ++s)
    caught |= outside(got[s].loss, want[s].loss) || outside(got[s].gradNorm, want[s].gradNorm);
  std::printf("[ standin  ] wrong ld: step 1 loss %.7f vs %.7f, validation loss %.7f vs %.7f\n", got[0].loss,
              want[0].loss, got.back().valLoss, want.back().valLoss);
  EXPECT_TRUE(caught) << "a wrong leading dimension went unnoticed";
}

TEST(StandinGptFaults, AKernelStepWithAnArgumentMissingIsRefused) {
  // Planted fault: a kernel's steps and its entry in the program's kernel table lose their
  // last argument while the CUDA kernel keeps its parameter, as a lowering whose kernel table
  // disagrees with the emitted kernel would make them. The program is consistent in itself
  // (validateProgram accepts it); on a GPU cuLaunchKernel would read past the steps'
  // arguments. The executor counts the kernel's parameters (cuFuncGetParamInfo) and refuses.
  Program program = compileGpt(DType::F32);
  auto [lowered, binary] = gpuProgram(program);
  std::string symbol;
  for (auto& [name, args] : lowered.kernels)
    if (symbol.empty() && args.size() >= 2) {
      symbol = name;
      args.pop_back();
    }
  ASSERT_FALSE(symbol.empty());
  for (rt::Function& f : lowered.functions)
    for (rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s); k && k->symbol == symbol) k->args.pop_back();
  rt::validateProgram(lowered, "the planted program");  // consistent: only the kernel disagrees
  try {
    rt::CudaExecutor gpu(std::move(lowered), binary);
    ADD_FAILURE() << "a step with an argument missing was accepted";
  } catch (const std::runtime_error& e) {
    std::printf("[ standin  ] %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find("kernel " + symbol), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("arguments but the step passes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel
