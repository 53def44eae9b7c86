// Programs and bundles for the CUDA target, checked without a GPU:
// - the program format v4 (launches, kernels.cu) round trips and refuses inconsistent input;
// - NVRTC compiles the whole CUDA source of the GPT and MLP training programs to one sm_90
//   cubin holding every kernel symbol the steps launch;
// - CUDA bundles round trip (cubin, PTX, arch) and damaged ones are refused;
// - the GPU executor's GPU-independent decisions (runtime/cuda/CudaPlan.h): the GEMM operand
//   mapping onto column-major cuBLASLt, checked against the row-major definition on random
//   data; the cubin/PTX choice; the device choice;
// - every driver symbol the executor resolves exists in the toolkit's stub libcuda.so, every
//   cuBLASLt symbol in libcublasLt.so.13, and without a usable driver construction fails with
//   the driver's reason.
#include "test/unit/CudaKernelsTestUtil.h"

#include "examples/gpt/model.h"
#include "examples/mlp/model.h"
#include "runtime/bundle/Bundle.h"
#if __has_include(<cuda.h>)
#include "runtime/cuda/CudaApi.h"
#define TESSEL_TEST_CUDA_API 1
#endif
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/CudaPlan.h"

#include <cstdlib>
#include <filesystem>

namespace tessel::cudatest {
namespace {

namespace fs = std::filesystem;

/// Attention decomposed, as the GPU trainer compiles it (dsl/trainer/App.cpp).
rt::Program gptProgram() {
  gpt::GPT model({.layers = 2, .channels = 64, .heads = 4, .seq = 32});
  gpt::build(model, 4);
  return model.compile({.decompose_attention = true}).lower(/*cuda_kernels=*/true);
}

std::string freshDir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / name;
  fs::remove_all(d);
  return d.string();
}

template <typename F>
void expectError(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << parts.front();
  } catch (const std::exception& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

void writeText(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

TEST(CudaProgram, FormatVersionRoundTripsLaunchesAndKernelsCu) {
  rt::Program p = gptProgram();
  std::string dir = freshDir("cuda_program_v2");
  rt::saveProgram(p, dir);
  const std::string cudaVersion = "\"version\": " + std::to_string(rt::kProgramFormatVersion);
  const std::string cpuVersion = "\"version\": " + std::to_string(rt::kProgramFormatVersionCpu);
  EXPECT_NE(readFile(dir + "/program.json").find(cudaVersion), std::string::npos);
  EXPECT_EQ(readFile(dir + "/kernels.cu"), p.cudaSource);
  EXPECT_EQ(rt::loadProgram(dir), p);
  // A CPU-only program keeps the CPU version and no kernels.cu, also when saved over a CUDA one.
  rt::Program cpu = p;
  cpu.cudaSource.clear();
  for (rt::Function& f : cpu.functions)
    for (rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s)) k->launch.reset();
  rt::saveProgram(cpu, dir);
  EXPECT_NE(readFile(dir + "/program.json").find(cpuVersion), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/kernels.cu"));
  EXPECT_EQ(rt::loadProgram(dir), cpu);
}

TEST(CudaProgram, InconsistentLaunchesAreRefused) {
  rt::Program p = gptProgram();
  auto firstKernel = [](rt::Program& q) -> rt::KernelStep& {
    for (rt::Step& s : q.functions[0].steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s)) return *k;
    throw std::logic_error("no kernel");
  };
  rt::Program noLaunch = p;
  firstKernel(noLaunch).launch.reset();
  expectError([&] { rt::validateProgram(noLaunch, "t"); }, {"has no launch but the program has CUDA kernels"});
  rt::Program big = p;
  firstKernel(big).launch->block = {2048, 1, 1};
  expectError([&] { rt::validateProgram(big, "t"); }, {"launch.block", "(2048, 1, 1)"});
  rt::Program shared = p;
  firstKernel(shared).launch->sharedBytes = 300 * 1024;
  expectError([&] { rt::validateProgram(shared, "t"); }, {"launch.shared"});
  rt::Program stray = p;
  stray.cudaSource.clear();
  expectError([&] { rt::validateProgram(stray, "t"); }, {"has a launch but the program has no CUDA kernels"});
  // Two steps of one symbol with different launches.
  rt::Program twice = p;
  std::map<std::string, int> seen;
  bool changed = false;
  for (rt::Function& f : twice.functions)
    for (rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s); k && !changed && ++seen[k->symbol] == 2) {
        k->launch->grid[0] += 1;
        changed = true;
      }
  ASSERT_TRUE(changed) << "no symbol is used twice";
  expectError([&] { rt::validateProgram(twice, "t"); }, {"launched with two different configurations"});

  // On disk: a CUDA-version program without kernels.cu, a launch with four dimensions, a
  // CPU-version program with a launch.
  std::string dir = freshDir("cuda_program_bad");
  rt::saveProgram(p, dir);
  fs::remove(dir + "/kernels.cu");
  expectError([&] { rt::loadProgram(dir); }, {"kernels.cu", "cannot open"});
  rt::saveProgram(p, dir);
  std::string json = readFile(dir + "/program.json");
  size_t at = json.find("\"grid\": [");
  ASSERT_NE(at, std::string::npos);
  std::string bad = json;
  bad.replace(at, 9, "\"grid\": [7,");  // four dimensions
  writeText(dir + "/program.json", bad);
  expectError([&] { rt::loadProgram(dir); }, {"program.json", ".launch.grid", "expected 3 dimensions"});
  bad = replaceAll(json, "\"version\": " + std::to_string(rt::kProgramFormatVersion),
                   "\"version\": " + std::to_string(rt::kProgramFormatVersionCpu));
  writeText(dir + "/program.json", bad);
  expectError([&] { rt::loadProgram(dir); }, {"program.json", "unknown field 'launch'"});
}

TEST(CudaProgram, WholeProgramsCompileWithNvrtcToOneSm90Cubin) {
  REQUIRE_NVRTC();
  mlp::Mlp m(mlp::Config{});
  mlp::build(m, 32);
  for (const rt::Program& p : {gptProgram(), m.compile().lower(true)}) {
    CudaCompileOptions o;
    o.cacheDir = ::testing::TempDir() + "tessel_cuda_program_nvrtc";
    CudaModule module = compileCuda(p.cudaSource, o);
    ASSERT_GE(module.cubin.size(), 4u);
    EXPECT_EQ(std::string(module.cubin.begin(), module.cubin.begin() + 4), "\x7f" "ELF");
    std::set<std::string> compiled;
    for (const CudaKernelInfo& k : module.kernels) compiled.insert(k.name);
    std::set<std::string> launched;
    for (const rt::Function& f : p.functions)
      for (const rt::Step& s : f.steps)
        if (auto* k = std::get_if<rt::KernelStep>(&s)) launched.insert(k->symbol);
    EXPECT_EQ(compiled, launched);
    std::printf("[ nvrtc    ] %zu kernels, cubin %zu bytes, PTX %zu bytes\n", launched.size(), module.cubin.size(),
                module.ptx.size());
  }
}

/// A CUDA bundle of `p` in `dir` (kernels.so: any file; its checksum is what is verified).
rt::CudaBinary writeCudaBundle(const rt::Program& p, const std::string& dir) {
  std::string lib = ::testing::TempDir() + "cuda_program_fake_kernels.so";
  writeText(lib, "not really a library");
  rt::CudaBinary bin{"sm_90", std::string("\x7f" "ELF", 4) + std::string(100, 'c'), ".version 9.0\n"};
  rt::BundleInfo info;
  info.model = "gpt";
  // gptProgram()'s config: readBundle checks it against the program's shapes.
  info.config = {{"layers", 2}, {"channels", 64}, {"heads", 4}, {"seq", 32}, {"vocab", 256}};
  info.seq = 32;
  info.batch = 4;
  info.optimizer = "adamw";
  rt::writeBundle(p, lib, info, dir, &bin);
  return bin;
}

TEST(CudaProgram, CudaBundlesRoundTripAndDamagedOnesAreRefused) {
  rt::Program p = gptProgram();
  std::string dir = freshDir("cuda_bundle");
  rt::CudaBinary bin = writeCudaBundle(p, dir);
  rt::Bundle b = rt::readBundle(dir);
  EXPECT_EQ(b.program, p);
  ASSERT_TRUE(b.cuda.has_value());
  EXPECT_EQ(b.cuda->arch, "sm_90");
  EXPECT_EQ(b.cuda->cubin, bin.cubin);
  EXPECT_EQ(b.cuda->ptx, bin.ptx);

  std::string trunc = freshDir("cuda_bundle_trunc");
  fs::copy(dir, trunc);
  fs::resize_file(trunc + "/kernels.cubin", 50);
  expectError([&] { rt::readBundle(trunc); }, {"kernels.cubin", "does not match"});
  std::string noCubin = freshDir("cuda_bundle_nocubin");
  fs::copy(dir, noCubin);
  fs::remove(noCubin + "/kernels.cubin");
  expectError([&] { rt::readBundle(noCubin); }, {"kernels.cubin", "cannot open"});
  std::string noCuda = freshDir("cuda_bundle_nocuda");
  fs::copy(dir, noCuda);
  std::string meta = readFile(noCuda + "/bundle.json");
  writeText(noCuda + "/bundle.json", replaceAll(meta, "\"cuda\"", "\"cuda_gone\""));
  expectError([&] { rt::readBundle(noCuda); }, {"bundle.json", "has no \"cuda\" module"});
  std::string arch = freshDir("cuda_bundle_arch");
  fs::copy(dir, arch);
  writeText(arch + "/bundle.json", replaceAll(meta, "\"sm_90\"", "\"gfx90a\""));
  expectError([&] { rt::readBundle(arch); }, {"bundle.json", "cuda.arch 'gfx90a'"});
  // A cubin for a program without CUDA kernels, and a CUDA program without a cubin.
  rt::Program cpu = rt::loadProgram(dir);
  cpu.cudaSource.clear();
  for (rt::Function& f : cpu.functions)
    for (rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s)) k->launch.reset();
  expectError([&] { writeCudaBundle(cpu, freshDir("cuda_bundle_cpu")); }, {"a cubin was given"});
  expectError([&] { rt::writeBundle(p, dir + "/kernels.so", {}, freshDir("cuda_bundle_none")); },
              {"no cubin was given"});
}

/// C = op(A) op(B) (+ C) as cuBLAS defines it on column-major operands described by `s`.
void ltReference(const rt::LtGemmShape& s, const float* a, const float* b, float* d) {
  auto at = [](const rt::LtOperand& o, const float* x, int64_t batch, int64_t i, int64_t j) {
    // Element (i, j) of op(X): X(j, i) if transposed; X stored column-major with ld.
    return o.trans ? x[batch * o.stride + j + i * o.ld] : x[batch * o.stride + i + j * o.ld];
  };
  for (int64_t t = 0; t < s.batch; ++t)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < s.k; ++l) acc += double(at(s.a, a, t, i, l)) * at(s.b, b, t, l, j);
        float& out = d[t * s.d.stride + i + j * s.d.ld];
        out = static_cast<float>(acc + (s.beta != 0 ? double(out) : 0.0));
      }
}

TEST(CudaPlan, GemmStepsMapOntoColumnMajorCublasLtExactly) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool sharedB : {false, true})
        for (bool acc : {false, true}) {
          rt::GemmStep g;
          g.transA = ta;
          g.transB = tb;
          g.accumulate = acc;
          g.batch = 3;
          g.m = 5;
          g.n = 7;
          g.k = 4;
          g.strideA = g.m * g.k;
          g.strideB = sharedB ? 0 : g.k * g.n;
          g.strideC = g.m * g.n;
          std::vector<float> A(g.batch * g.m * g.k), B(g.batch * g.k * g.n), C(g.batch * g.m * g.n);
          for (auto* v : {&A, &B, &C})
            for (float& x : *v) x = u(rng);
          // Row-major definition: C[t](i, j) = sum_l op(A[t])(i, l) op(B[t])(l, j) (+ C[t](i, j)).
          std::vector<double> want(C.size());
          for (int64_t t = 0; t < g.batch; ++t)
            for (int64_t i = 0; i < g.m; ++i)
              for (int64_t j = 0; j < g.n; ++j) {
                double s = acc ? C[t * g.strideC + i * g.n + j] : 0.0;
                for (int64_t l = 0; l < g.k; ++l) {
                  float x = ta ? A[t * g.strideA + l * g.m + i] : A[t * g.strideA + i * g.k + l];
                  float y = tb ? B[t * g.strideB + j * g.k + l] : B[t * g.strideB + l * g.n + j];
                  s += double(x) * y;
                }
                want[t * g.strideC + i * g.n + j] = s;
              }
          rt::LtGemmShape s = rt::ltGemmShape(g);
          EXPECT_FALSE(s.serialBatches);
          ltReference(s, B.data(), A.data(), C.data());  // cuBLASLt's A is the step's B
          for (size_t i = 0; i < C.size(); ++i)
            ASSERT_NEAR(C[i], want[i], 1e-5) << "transA " << ta << " transB " << tb << " shared " << sharedB
                                             << " accumulate " << acc << " element " << i;
        }
  rt::GemmStep sum;  // a sum over batches into one C
  sum.batch = 4;
  sum.m = sum.n = sum.k = 2;
  sum.strideA = sum.strideB = 4;
  sum.accumulate = true;
  EXPECT_TRUE(rt::ltGemmShape(sum).serialBatches);
}

TEST(CudaPlan, OperandAlignmentIsWhatPointerAndStrideShare) {
  EXPECT_EQ(rt::operandAlignment(0x1000, 0, 1), 256u);
  EXPECT_EQ(rt::operandAlignment(0x1040, 0, 1), 64u);
  EXPECT_EQ(rt::operandAlignment(0x1000, 4 * 3, 2), 4u);  // a 3-float batch stride
  EXPECT_EQ(rt::operandAlignment(0x1000, 4 * 3, 1), 256u);  // no batches: the stride is unused
  EXPECT_EQ(rt::operandAlignment(0x1002, 0, 1), 2u);
}

TEST(CudaPlan, CubinForItsArchPtxForNewerDevicesElseAClearError) {
  EXPECT_EQ(rt::selectCudaImage("sm_90", true, 9, 0), rt::CudaImage::Cubin);
  EXPECT_EQ(rt::selectCudaImage("sm_80", false, 8, 6), rt::CudaImage::Cubin);  // same major, newer minor
  EXPECT_EQ(rt::selectCudaImage("sm_90", true, 10, 0), rt::CudaImage::Ptx);
  expectError([] { rt::selectCudaImage("sm_90", false, 10, 0); }, {"sm_90", "sm_100", "--cuda-arch sm_100"});
  expectError([] { rt::selectCudaImage("sm_90", true, 8, 0); }, {"compiled for sm_90", "this GPU is sm_80"});
  expectError([] { rt::selectCudaImage("compute_90", true, 9, 0); }, {"not sm_XY"});
}

TEST(CudaPlan, DeviceFromTheLocalRank) {
  ::unsetenv("LOCAL_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("SLURM_LOCALID");
  EXPECT_EQ(rt::selectCudaDevice(-1, 4), 0);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "6", 1);
  EXPECT_EQ(rt::selectCudaDevice(-1, 4), 2);
  ::setenv("LOCAL_RANK", "1", 1);  // first in the search order
  EXPECT_EQ(rt::selectCudaDevice(-1, 4), 1);
  EXPECT_EQ(rt::selectCudaDevice(3, 4), 3);
  expectError([] { rt::selectCudaDevice(4, 4); }, {"device 4 requested", "there are 4"});
  ::setenv("LOCAL_RANK", "x", 1);
  expectError([] { rt::selectCudaDevice(-1, 4); }, {"$LOCAL_RANK='x'"});
  expectError([] { rt::selectCudaDevice(-1, 0); }, {"no devices"});
}

#ifdef TESSEL_TEST_CUDA_API
// These set $TESSEL_LIBCUDA before the driver table is first built (once per process): ctest
// runs every TEST in its own process.
const char* kStub = "/usr/local/cuda/lib64/stubs/libcuda.so";

TEST(CudaApi, EveryDriverSymbolExistsInTheToolkitsStubAndTheStubIsRefusedAtCuInit) {
  if (!fs::exists(kStub)) GTEST_SKIP() << kStub << " is not here";
  ::setenv("TESSEL_LIBCUDA", kStub, 1);
  const rt::cuda::DriverApi& api = rt::cuda::driverApi();  // throws naming a missing symbol
  EXPECT_NE(api.cuLaunchKernel, nullptr);
  EXPECT_NE(api.cuGraphInstantiate, nullptr);  // cuGraphInstantiateWithFlags
  // The stub answers every call with an error: construction stops at cuInit with its name.
  rt::CudaBinary bin{"sm_90", "\x7f" "ELF", ""};
  expectError([&] { rt::CudaExecutor ex(gptProgram(), bin); }, {"cuInit"});
}

TEST(CudaApi, EveryCublasLtSymbolExists) {
  if (!fs::exists("/usr/local/cuda/lib64/libcublasLt.so.13")) GTEST_SKIP() << "no libcublasLt.so.13 here";
  const rt::cuda::BlasLtApi& api = rt::cuda::blasLtApi();
  EXPECT_GE(api.cublasLtGetVersion(), 130000u);  // CUDA 13's cuBLASLt (no GPU needed to ask)
}

TEST(CudaApi, WithoutADriverTheExecutorNamesWhy) {
  ::setenv("TESSEL_LIBCUDA", "libcuda-that-does-not-exist.so.1", 1);
  rt::CudaBinary bin{"sm_90", "\x7f" "ELF", ""};
  expectError([&] { rt::CudaExecutor ex(gptProgram(), bin); },
              {"libcuda-that-does-not-exist.so.1 cannot be loaded", "no NVIDIA driver"});
  rt::Program cpu = gptProgram();
  cpu.cudaSource.clear();
  for (rt::Function& f : cpu.functions)
    for (rt::Step& s : f.steps)
      if (auto* k = std::get_if<rt::KernelStep>(&s)) k->launch.reset();
  expectError([&] { rt::CudaExecutor ex(cpu, bin); }, {"has no CUDA kernels", "--device cuda"});
}
#endif  // TESSEL_TEST_CUDA_API

}  // namespace
}  // namespace tessel::cudatest
