// A host-compiler failure names the generated line and the op (and user line) it came from.
#include "codegen/HostCompiler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace {

const char* kSource =
    "// preamble\n"
    "// tessel.add at loc(\"model.h\":3:4)\n"
    "extern \"C\" void k0(void** args) {\n"
    "  float* out = (float*)args[0];\n"
    "  out[0] = undefined_name;\n"
    "}\n";

TEST(HostCompiler, ExplainsCompileErrorsWithTheOpLocation) {
  std::string text = tessel::explainCompileLog(
      kSource, "k1.cpp", "k1.cpp:5:13: error: 'undefined_name' was not declared\n");
  EXPECT_NE(text.find("generated line 5:   out[0] = undefined_name;"), std::string::npos) << text;
  EXPECT_NE(text.find("in the kernel of tessel.add at loc(\"model.h\":3:4)"), std::string::npos)
      << text;
  EXPECT_EQ(tessel::explainCompileLog(kSource, "k1.cpp", "k1.cpp:5:1: warning: w\n"), "");
}

TEST(HostCompiler, RealCompilerFailureCarriesTheExplanation) {
  tessel::HostCompileOptions o;
  o.cacheDir = (std::filesystem::path(testing::TempDir()) / "tessel-hostcc-test").string();
  try {
    tessel::buildKernelLibrary(kSource, o);
    FAIL() << "a broken source compiled";
  } catch (const tessel::HostCompileError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("undefined_name"), std::string::npos) << what;
    EXPECT_NE(what.find("in the kernel of tessel.add at loc(\"model.h\":3:4)"), std::string::npos)
        << what;
  }
}

// A damaged cached object (truncated, or overwritten in the middle) is detected by its
// checksum and rebuilt, instead of crashing dlopen or the first kernel call. Each load runs
// in a child process, as separate runs would: a loaded library stays mapped (RTLD_NODELETE),
// so damaging it under a process that has it loaded is not the case under test.
TEST(HostCompiler, DamagedCacheEntriesAreRebuilt) {
  const std::string good = "extern \"C\" int seven() { return 7; }\n";
  tessel::HostCompileOptions o;
  o.cacheDir = (std::filesystem::path(testing::TempDir()) / "tessel-hostcc-damage").string();
  std::filesystem::remove_all(o.cacheDir);
  // Exit code of a child that loads the library: 10 + compiled(), or 1 if seven() != 7.
  auto load = [&]() {
    pid_t pid = fork();
    if (pid == 0) {
      tessel::KernelLibrary lib = tessel::buildKernelLibrary(good, o);
      int v = reinterpret_cast<int (*)()>(lib.symbol("seven"))();
      _exit(v == 7 ? 10 + static_cast<int>(lib.compiled()) : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  EXPECT_EQ(load(), 11);  // compiled
  EXPECT_EQ(load(), 10);  // a cache hit
  std::filesystem::path so;
  for (const auto& e : std::filesystem::directory_iterator(o.cacheDir))
    if (e.path().extension() == ".so") so = e.path();
  ASSERT_FALSE(so.empty());
  std::filesystem::resize_file(so, std::filesystem::file_size(so) / 2);  // truncated
  EXPECT_EQ(load(), 11);
  {
    std::fstream f(so, std::ios::in | std::ios::out | std::ios::binary);  // garbled in the middle
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(so) / 2));
    std::string garbage(256, '\xab');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  EXPECT_EQ(load(), 11);
  std::filesystem::remove(so.string().substr(0, so.string().size() - 3) + ".sum");  // no checksum
  EXPECT_EQ(load(), 11);
  EXPECT_EQ(load(), 10);
}

// Several processes building the same kernels at once into an empty cache (MPI ranks, test
// shards) all succeed: every builder produces identical bytes, so whichever renames last,
// the library and its checksum agree, and nobody deletes a library another is loading.
TEST(HostCompiler, ConcurrentBuildersAgree) {
  tessel::HostCompileOptions o;
  o.cacheDir = (std::filesystem::path(testing::TempDir()) / "tessel-hostcc-race").string();
  for (int round = 0; round < 3; ++round) {
    std::filesystem::remove_all(o.cacheDir);
    const std::string source =
        "extern \"C\" int answer() { return " + std::to_string(40 + round) + "; }\n";
    std::vector<pid_t> children;
    for (int i = 0; i < 4; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        try {
          tessel::KernelLibrary lib = tessel::buildKernelLibrary(source, o);
          _exit(reinterpret_cast<int (*)()>(lib.symbol("answer"))() == 40 + round ? 0 : 1);
        } catch (...) {
          _exit(2);
        }
      }
      children.push_back(pid);
    }
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
    }
    for (const auto& e : std::filesystem::directory_iterator(o.cacheDir))
      EXPECT_TRUE(e.path().extension() == ".so" || e.path().extension() == ".sum")
          << "left behind: " << e.path();
  }
}

}  // namespace

namespace {

/// `kernels` kernels after a preamble with a static inline helper: kernel i writes
/// helper(i) = 3 i + 1 into args[0][0]. Kernel i's header line follows codegen's format.
std::string manyKernels(int kernels, const std::string& brokenLine = "") {
  std::string s = "#include <cstdint>\nstatic inline float helper(int i) { return 3.0f * i + 1.0f; }\n";
  for (int i = 0; i < kernels; ++i) {
    s += "// tessel.add at loc(\"model.h\":" + std::to_string(i + 1) + ":1)\n";
    if (i == kernels - 1) s += "#include <cstring>\n";  // a late include: every unit gets it
    s += "extern \"C\" void k" + std::to_string(i) + "_add(void** args) {\n";
    s += "  float* out = (float*)args[0];\n";
    s += i == kernels / 2 && !brokenLine.empty() ? brokenLine + "\n" : "";
    s += "  out[0] = helper(" + std::to_string(i) + ");\n";
    if (i == kernels - 1) s += "  std::memset(out + 1, 0, sizeof(float));\n";
    s += "}\n";
  }
  return s;
}

}  // namespace

// A library of many kernels builds as several units compiled in parallel
// (TESSEL_HOST_COMPILE_JOBS units) and linked into one: every kernel is there and computes
// what the whole file would. A compile error in one unit still names the whole source's line.
TEST(HostCompiler, ParallelUnitsBuildEveryKernelAndExplainErrors) {
  setenv("TESSEL_HOST_COMPILE_JOBS", "3", 1);
  tessel::HostCompileOptions o;
  o.cacheDir = (std::filesystem::path(testing::TempDir()) / "tessel-hostcc-units").string();
  std::filesystem::remove_all(o.cacheDir);
  const int kernels = 13;
  tessel::KernelLibrary lib = tessel::buildKernelLibrary(manyKernels(kernels), o);
  for (int i = 0; i < kernels; ++i) {
    auto* fn = reinterpret_cast<void (*)(void**)>(lib.symbol("k" + std::to_string(i) + "_add"));
    ASSERT_NE(fn, nullptr) << i;
    float out[2] = {-1.0f, -1.0f};
    void* args[] = {out};
    fn(args);
    EXPECT_EQ(out[0], 3.0f * i + 1.0f) << i;  // exact: small integers in f32
  }
  const std::string broken = manyKernels(kernels, "  out[0] = undefined_name;");
  try {
    tessel::buildKernelLibrary(broken, o);
    FAIL() << "a broken source compiled";
  } catch (const tessel::HostCompileError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("in the kernel of tessel.add at loc(\"model.h\":7:1)"), std::string::npos) << what;
  }
  unsetenv("TESSEL_HOST_COMPILE_JOBS");
}
