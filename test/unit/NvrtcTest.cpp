// The NVRTC driver compiles CUDA C++ to an sm_90 cubin without a GPU, reports each kernel's
// registers, spills and shared memory, caches the result, and explains compile errors with
// the op (and user line) the offending kernel came from.
//
// Without NVRTC these tests skip, unless TESSEL_REQUIRE_NVRTC=1 (set by CMake), when they fail.
#include "codegen/Nvrtc.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

namespace {

namespace fs = std::filesystem;

bool nvrtcRequired() {
  const char* v = std::getenv("TESSEL_REQUIRE_NVRTC");
  return v && std::string(v) == "1";
}

#define REQUIRE_NVRTC()                                                                  \
  do {                                                                                   \
    std::string why;                                                                     \
    if (!tessel::nvrtcAvailable(&why)) {                                                 \
      if (nvrtcRequired()) FAIL() << "TESSEL_REQUIRE_NVRTC=1 but " << why;               \
      GTEST_SKIP() << "NVRTC is not available (set TESSEL_REQUIRE_NVRTC=1 to fail): " << why; \
    }                                                                                    \
  } while (0)

/// A fresh cache folder per test, so the first compile of each test really compiles.
tessel::CudaCompileOptions freshOptions() {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(testing::TempDir()) /
                 (std::string("tessel-nvrtc-") + info->name() + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  tessel::CudaCompileOptions o;
  o.cacheDir = dir.string();
  return o;
}

// Shaped like generated code: each kernel under its header comment.
const char* kKernels = R"(#include <cuda_bf16.h>

// tessel.add at loc("model.h":3:4)
extern "C" __global__ void add(float* out, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// tessel.reduce_sum at loc("model.h":5:4)
// out: [B] bf16, x: [B, C] bf16; one block per row, blockDim.x a multiple of 32 (<= 1024).
extern "C" __global__ void row_sum(__nv_bfloat16* out, const __nv_bfloat16* x, int C) {
  __shared__ float warpSums[32];
  const __nv_bfloat16* row = x + (size_t)blockIdx.x * C;
  float v = 0.f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) v += __bfloat162float(row[c]);
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  if ((threadIdx.x & 31) == 0) warpSums[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < blockDim.x / 32 ? warpSums[threadIdx.x] : 0.f;
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    if (threadIdx.x == 0) out[blockIdx.x] = __float2bfloat16(v);
  }
}
)";

const tessel::CudaKernelInfo* find(const tessel::CudaModule& m, const std::string& name) {
  for (const auto& k : m.kernels)
    if (k.name == name) return &k;
  return nullptr;
}

TEST(Nvrtc, ParsesPtxasReports) {
  // Lines as NVRTC 13.0 prints them; the device function's properties are not a kernel's.
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k0' for 'sm_90'\n"
      "ptxas info    : Function properties for k0\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 24 registers, used 0 barriers, 16 bytes cumulative stack size\n"
      "ptxas info    : Compiling entry function '_Z2tkILi64EEvPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z2tkILi64EEvPf\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 32 registers, used 1 barriers, 256 bytes smem, 368 bytes cmem[0]\n"
      "ptxas info    : Function properties for _Z6helperPfi\n"
      "ptxas         .     64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
  auto ks = tessel::parsePtxasInfo(log);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].name, "k0");
  EXPECT_EQ(ks[0].registers, 24);
  EXPECT_EQ(ks[0].stackBytes, 16);
  EXPECT_EQ(ks[0].spillStoreBytes, 8);
  EXPECT_EQ(ks[0].spillLoadBytes, 4);
  EXPECT_EQ(ks[0].sharedBytes, 0);
  EXPECT_EQ(ks[1].name, "_Z2tkILi64EEvPf");
  EXPECT_EQ(ks[1].registers, 32);
  EXPECT_EQ(ks[1].sharedBytes, 256);
  EXPECT_EQ(ks[1].stackBytes, 0);
}

TEST(Nvrtc, ReportsItsVersion) {
  REQUIRE_NVRTC();
  std::string v = tessel::nvrtcVersion();
  EXPECT_TRUE(std::regex_match(v, std::regex("[0-9]+\\.[0-9]+"))) << v;
  EXPECT_GE(std::atoi(v.c_str()), 12) << v;
}

TEST(Nvrtc, CompilesKernelsToAnSm90CubinAndCachesIt) {
  REQUIRE_NVRTC();
  tessel::CudaCompileOptions o = freshOptions();
  tessel::CudaModule m = tessel::compileCuda(kKernels, o);
  EXPECT_TRUE(m.compiled);
  ASSERT_GE(m.cubin.size(), 4u);
  EXPECT_EQ(std::string(m.cubin.data(), 4), "\x7f" "ELF");
  EXPECT_NE(m.ptx.find(".target sm_90"), std::string::npos) << m.ptx.substr(0, 400);
  EXPECT_NE(m.ptx.find(".entry row_sum"), std::string::npos);
  EXPECT_NE(m.log.find("ptxas info    : Used "), std::string::npos) << m.log;

  const tessel::CudaKernelInfo* add = find(m, "add");
  const tessel::CudaKernelInfo* sum = find(m, "row_sum");
  ASSERT_TRUE(add && sum) << m.log;
  EXPECT_GT(add->registers, 0) << m.log;
  EXPECT_EQ(add->sharedBytes, 0) << m.log;
  EXPECT_GT(sum->registers, 0) << m.log;
  EXPECT_EQ(sum->sharedBytes, 32 * 4) << m.log;  // float warpSums[32]
  EXPECT_EQ(sum->spillStoreBytes, 0) << m.log;

  tessel::CudaModule again = tessel::compileCuda(kKernels, o);
  EXPECT_FALSE(again.compiled);
  EXPECT_EQ(again.cubin, m.cubin);
  EXPECT_EQ(again.ptx, m.ptx);
  EXPECT_EQ(again.log, m.log);
  ASSERT_EQ(again.kernels.size(), m.kernels.size());
  EXPECT_EQ(find(again, "row_sum")->registers, sum->registers);

  // Other options are another cache entry: without -lineinfo the cubin is smaller.
  o.lineInfo = false;
  tessel::CudaModule plain = tessel::compileCuda(kKernels, o);
  EXPECT_TRUE(plain.compiled);
  EXPECT_LT(plain.cubin.size(), m.cubin.size());
  fs::remove_all(o.cacheDir);
}

TEST(Nvrtc, ReportsSpillsUnderARegisterCap) {
  REQUIRE_NVRTC();
  // 32 accumulators stay live across the loop; capped at 16 registers (ptxas raises the cap
  // to its sm_90 minimum, 24) they cannot all stay in registers.
  const char* source = R"(
// tessel.matmul at loc("model.h":7:4)
extern "C" __global__ void many_live(float* out, const float* a, int n) {
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = a[i];
  for (int k = 0; k < n; ++k) {
    float x = a[threadIdx.x + k];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = fmaf(acc[i], x, (float)i);
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = acc[i];
}
)";
  tessel::CudaCompileOptions o = freshOptions();
  o.flags = {"-maxrregcount=16"};
  tessel::CudaModule m = tessel::compileCuda(source, o);
  const tessel::CudaKernelInfo* k = find(m, "many_live");
  ASSERT_TRUE(k) << m.log;
  EXPECT_GT(k->spillStoreBytes, 0) << m.log;
  EXPECT_GT(k->spillLoadBytes, 0) << m.log;
  EXPECT_GT(k->stackBytes, 0) << m.log;
  EXPECT_LE(k->registers, 24) << m.log;
  fs::remove_all(o.cacheDir);
}

TEST(Nvrtc, VirtualArchGivesPtxOnly) {
  REQUIRE_NVRTC();
  tessel::CudaCompileOptions o = freshOptions();
  o.arch = "compute_90";
  tessel::CudaModule m = tessel::compileCuda(kKernels, o);
  EXPECT_TRUE(m.cubin.empty());
  EXPECT_NE(m.ptx.find(".entry add"), std::string::npos);
  EXPECT_FALSE(tessel::compileCuda(kKernels, o).compiled);
  fs::remove_all(o.cacheDir);
}

TEST(Nvrtc, CompileErrorNamesTheGeneratedLineAndTheOp) {
  REQUIRE_NVRTC();
  const char* source =
      "// preamble\n"
      "// tessel.add at loc(\"model.h\":3:4)\n"
      "extern \"C\" __global__ void k0(float* out, const float* a, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) out[i] = a[i] + undefined_name;\n"
      "}\n";
  tessel::CudaCompileOptions o = freshOptions();
  try {
    tessel::compileCuda(source, o);
    FAIL() << "a broken source compiled";
  } catch (const tessel::CudaCompileError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("undefined_name"), std::string::npos) << what;
    EXPECT_NE(what.find("generated line 5:   if (i < n) out[i] = a[i] + undefined_name;"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("in the kernel of tessel.add at loc(\"model.h\":3:4)"), std::string::npos)
        << what;
  }
  fs::remove_all(o.cacheDir);
}

}  // namespace
