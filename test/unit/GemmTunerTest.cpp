// The GEMM tuner (codegen/GemmTuner.h): one choice per distinct shape, written into every step
// of that shape; its cache file (a second run measures nothing; a corrupt file is re-measured
// with a warning); the forced policies; program.json keeping the choice.
#include "codegen/GemmTuner.h"

#include "runtime/exec/CpuGemm.h"
#include "runtime/exec/ProgramJson.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tessel {
namespace {
namespace fs = std::filesystem;

// Three GEMM steps of two distinct shapes (f32 64x96x32 twice, bf16 8x16x24 with a bf16 C).
rt::Program program() {
  rt::Program p;
  auto buffer = [&](rt::DType t, std::vector<int64_t> shape) {
    p.buffers.push_back(rt::Buffer{.name = "%" + std::to_string(p.buffers.size()), .dtype = t, .shape = shape,
                                   .kind = rt::BufferKind::Input});
    return static_cast<int>(p.buffers.size() - 1);
  };
  rt::GemmStep g{.a = buffer(rt::DType::F32, {64, 32}), .b = buffer(rt::DType::F32, {32, 96}), .c = buffer(rt::DType::F32, {64, 96})};
  g.m = 64, g.n = 96, g.k = 32;
  rt::GemmStep h{.a = buffer(rt::DType::BF16, {8, 24}), .b = buffer(rt::DType::BF16, {24, 16}), .c = buffer(rt::DType::BF16, {8, 16})};
  h.m = 8, h.n = 16, h.k = 24;
  rt::Function f{.name = "step"};
  f.steps = {g, h, g};
  p.functions.push_back(f);
  return p;
}

std::vector<rt::GemmBackend> backends(const rt::Program& p) {
  std::vector<rt::GemmBackend> out;
  for (const rt::Step& s : p.functions[0].steps) out.push_back(std::get<rt::GemmStep>(s).backend);
  return out;
}

// oneDNN 2.6 has no bf16 matmul below AVX-512 (the tuner then keeps OpenBLAS for bf16).
bool oneDnnRunsBf16() {
  rt::GemmStep probe;
  probe.m = probe.n = probe.k = 8;
  rt::CpuGemmContext context;
  try {
    rt::CpuGemm gemm(probe, {rt::DType::BF16, rt::DType::BF16, rt::DType::BF16}, rt::GemmBackend::OneDnn, nullptr,
                     nullptr, nullptr, {}, &context);
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}
#define SKIP_WITHOUT_ONEDNN_BF16() \
  if (!oneDnnRunsBf16()) GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU (below AVX-512)"

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tessel-gemm-tuner-" + std::to_string(::getpid()) + "-" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(GemmTuner, OneMeasuredChoicePerShapeThenReadFromTheCache) {
  SKIP_WITHOUT_ONEDNN_BF16();
  TempDir dir;
  rt::Program p = program();
  const auto first = tuneGemms(p, {.policy = GemmPolicy::Tune, .threads = 1, .cacheDir = dir.path.string()});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].steps, 2);
  for (const GemmChoice& c : first) {
    EXPECT_FALSE(c.cached);
    EXPECT_GT(c.openBlasGflops, 0);
    EXPECT_GT(c.oneDnnGflops, 0);
    EXPECT_EQ(c.backend, c.oneDnnGflops > c.openBlasGflops ? rt::GemmBackend::OneDnn : rt::GemmBackend::OpenBlas);
  }
  const auto chosen = backends(p);
  EXPECT_EQ(chosen[0], first[0].backend);
  EXPECT_EQ(chosen[2], first[0].backend);
  EXPECT_EQ(chosen[1], first[1].backend);
  ASSERT_TRUE(fs::exists(dir.path / "gemm-tuning.json"));

  rt::Program q = program();
  const auto second = tuneGemms(q, {.policy = GemmPolicy::Tune, .threads = 1, .cacheDir = dir.path.string()});
  ASSERT_EQ(second.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(second[i].cached);
    EXPECT_EQ(second[i].backend, first[i].backend);
    EXPECT_EQ(second[i].openBlasGflops, first[i].openBlasGflops);  // read back, not measured again
  }
  EXPECT_EQ(backends(q), chosen);
  // Another thread count reads the same choice: one library per shape whatever the threads.
  rt::Program r = program();
  EXPECT_TRUE(tuneGemms(r, {.policy = GemmPolicy::Tune, .threads = 2, .cacheDir = dir.path.string()})[0].cached);
  EXPECT_EQ(backends(r), chosen);
  EXPECT_NE(explainGemmChoices(second, GemmPolicy::Tune, 1).find("GFLOP/s (cached)"), std::string::npos);
}

TEST(GemmTuner, CorruptCacheIsMeasuredAgainWithAWarning) {
  TempDir dir;
  fs::create_directories(dir.path);
  for (const char* text : {"{ not json", "[1, 2]", R"({"x": {"y": {"backend": "mkl"}}})"}) {
    std::ofstream(dir.path / "gemm-tuning.json") << text;
    rt::Program p = program();
    ::testing::internal::CaptureStderr();
    const auto choices = tuneGemms(p, {.policy = GemmPolicy::Tune, .threads = 1, .cacheDir = dir.path.string()});
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("cannot be read"), std::string::npos) << text << ": " << err;
    ASSERT_EQ(choices.size(), 2u);
    EXPECT_FALSE(choices[0].cached);
    EXPECT_GT(choices[0].oneDnnGflops, 0);
    // Rewritten: the next run reads it.
    rt::Program q = program();
    EXPECT_TRUE(tuneGemms(q, {.policy = GemmPolicy::Tune, .threads = 1, .cacheDir = dir.path.string()})[0].cached);
  }
}

TEST(GemmTuner, ForcedPoliciesMeasureNothing) {
  SKIP_WITHOUT_ONEDNN_BF16();
  rt::Program p = program();
  auto c = tuneGemms(p, {.policy = GemmPolicy::OneDnn});
  EXPECT_EQ(backends(p), std::vector<rt::GemmBackend>(3, rt::GemmBackend::OneDnn));
  EXPECT_EQ(c[0].oneDnnGflops, 0);
  tuneGemms(p, {.policy = GemmPolicy::OpenBlas});
  EXPECT_EQ(backends(p), std::vector<rt::GemmBackend>(3, rt::GemmBackend::OpenBlas));
  rt::Program d = program();
  tuneGemms(d, {.policy = GemmPolicy::Default});
  EXPECT_EQ(backends(d), std::vector<rt::GemmBackend>(3, rt::GemmBackend::Default));
}

TEST(GemmTuner, EnvironmentVariableSpellings) {
  ::setenv("TESSEL_GEMM_BACKEND", "onednn", 1);
  EXPECT_EQ(gemmPolicyFromEnvironment(), GemmPolicy::OneDnn);
  ::setenv("TESSEL_GEMM_BACKEND", "mkl", 1);
  EXPECT_THROW(gemmPolicyFromEnvironment(), std::runtime_error);
  ::unsetenv("TESSEL_GEMM_BACKEND");
  EXPECT_EQ(gemmPolicyFromEnvironment(), GemmPolicy::Tune);
}

TEST(GemmTuner, ProgramJsonKeepsTheChoice) {
  rt::Program p = program();
  tuneGemms(p, {.policy = GemmPolicy::OneDnn});
  std::get<rt::GemmStep>(p.functions[0].steps[1]).backend = rt::GemmBackend::OpenBlas;
  int64_t version = 0;
  const rt::Program back = rt::decodeProgramJson(rt::encodeProgramJson(p), "program.json", version);
  EXPECT_EQ(backends(back), backends(p));
  EXPECT_EQ(backends(back)[0], rt::GemmBackend::OneDnn);
}

}  // namespace
}  // namespace tessel
