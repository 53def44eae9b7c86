// Tests for runtime/exec: the Program format (save/load/validation) and the CPU Executor
// (OpenBLAS GEMMs, generated kernels through a resolver, copies, parameter init, the arena).
//
// GEMM tolerance: a float dot product of K terms, in any summation order (OpenBLAS blocks and
// may use FMA), is within gamma_K ~= K * u of the exact value relative to sum |a_p * b_p|,
// with u = 2^-24. The reference is computed in double (its own error is ~2^-53, negligible),
// so each element is checked against (terms + 1) * 2^-24 * (sum |a_p b_p| + |c0|), where
// `terms` counts every product summed into that element (K, or K * batch for a reduction over
// the batch) and the +1 covers adding the previous C.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "codegen/HostCompiler.h"
#include "runtime/Init.h"
#include "runtime/exec/Executor.h"

namespace tessel::rt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Buffer makeBuffer(std::string name, std::vector<int64_t> shape, BufferKind kind, int64_t offset = 0,
                  std::string init = "") {
  Buffer b;
  b.name = std::move(name);
  b.shape = std::move(shape);
  b.kind = kind;
  b.offset = offset;
  b.init = std::move(init);
  return b;
}

void* noKernels(const std::string&) { return nullptr; }

/// A fresh, empty folder under the GoogleTest temp dir.
std::string freshDir(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) / fmt::format("tessel_exec_{}_{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

/// Runs `body`, expecting a std::runtime_error whose message contains every string in `parts`.
void expectError(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one mentioning '" << parts.front() << "'";
  } catch (const std::runtime_error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' missing from: " << e.what();
  }
}

// ---- (a) GEMM ---------------------------------------------------------------

struct GemmCase {
  int64_t batch, m, n, k;
  bool transA, transB, accumulate;
  int64_t padA;        // strideA = m*k + padA
  bool sharedB;        // strideB = 0 (one weight for every batch)
  bool reduceC;        // strideC = 0 with accumulate: C += sum over batches
};

void PrintTo(const GemmCase& t, std::ostream* os) {
  *os << fmt::format("batch={} m={} n={} k={} transA={} transB={} accumulate={} padA={} sharedB={} reduceC={}",
                     t.batch, t.m, t.n, t.k, t.transA, t.transB, t.accumulate, t.padA, t.sharedB, t.reduceC);
}

class GemmTest : public testing::TestWithParam<GemmCase> {};

TEST_P(GemmTest, MatchesDoubleTripleLoop) {
  const GemmCase& t = GetParam();
  GemmStep g;
  g.a = 0, g.b = 1, g.c = 2;
  g.batch = t.batch, g.m = t.m, g.n = t.n, g.k = t.k;
  g.transA = t.transA, g.transB = t.transB, g.accumulate = t.accumulate;
  g.strideA = t.m * t.k + t.padA;
  g.strideB = t.sharedB ? 0 : t.k * t.n;
  g.strideC = t.reduceC ? 0 : t.m * t.n;
  g.location = "gemm_test.cpp:1:1";
  int64_t numelA = (t.batch - 1) * g.strideA + t.m * t.k, numelB = (t.batch - 1) * g.strideB + t.k * t.n;
  int64_t numelC = (t.batch - 1) * g.strideC + t.m * t.n;
  Program p;
  p.buffers = {makeBuffer("x", {numelA}, BufferKind::Input), makeBuffer("w", {numelB}, BufferKind::Parameter, 0, "zeros"),
               makeBuffer("y", {numelC}, BufferKind::State)};
  p.functions = {Function{"f", {0}, {2}, {"y"}, {g}, 0}};
  Executor exec(p, noKernels);

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(numelA), b(numelB), c0(numelC);
  for (float& v : a) v = uniform(rng);
  for (float& v : b) v = uniform(rng);
  for (float& v : c0) v = uniform(rng);  // garbage when !accumulate: beta = 0 must ignore it
  exec.setInput("f", 0, a.data(), a.size() * sizeof(float));
  std::memcpy(exec.data(1), b.data(), b.size() * sizeof(float));
  std::memcpy(exec.data(2), c0.data(), c0.size() * sizeof(float));
  exec.run("f");

  // Reference: exact sums and the bound's sum of magnitudes, per element of C.
  std::vector<double> ref(numelC, 0.0), mag(numelC, 0.0);
  for (int64_t i = 0; i < numelC; ++i) {
    ref[i] = t.accumulate ? c0[i] : 0.0;
    mag[i] = t.accumulate ? std::fabs(c0[i]) : 0.0;
  }
  for (int64_t bt = 0; bt < t.batch; ++bt)
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j)
        for (int64_t q = 0; q < t.k; ++q) {
          double av = a[bt * g.strideA + (t.transA ? q * t.m + i : i * t.k + q)];
          double bv = b[bt * g.strideB + (t.transB ? j * t.k + q : q * t.n + j)];
          int64_t ci = bt * g.strideC + i * t.n + j;
          ref[ci] += av * bv;
          mag[ci] += std::fabs(av * bv);
        }
  double terms = static_cast<double>(t.k * (t.reduceC ? t.batch : 1) + 1);
  const float* got = exec.data(2);
  for (int64_t i = 0; i < numelC; ++i)
    ASSERT_LE(std::fabs(got[i] - ref[i]), terms * std::ldexp(1.0, -24) * mag[i]) << "element " << i;
  EXPECT_FLOAT_EQ(exec.outputs("f")[0].value(0), got[0]);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmTest,
    testing::Values(GemmCase{3, 5, 7, 11, false, false, false, 3, true, false},    // padded batches, shared weight
                    GemmCase{2, 6, 9, 13, true, false, false, 0, false, false},    // A transposed, per-batch B
                    GemmCase{3, 4, 10, 7, false, true, true, 5, true, false},      // B transposed, accumulate
                    GemmCase{1, 17, 19, 64, true, true, false, 0, false, false},   // both transposed
                    GemmCase{4, 8, 6, 5, true, false, true, 0, false, true}));     // dW = sum_b X_b^T dY_b

// ---- (b) kernels ------------------------------------------------------------

// out = relu(2x + y) over 37 floats; 2x is exact, so FMA contraction cannot change a bit.
constexpr const char* kKernelSource = R"(
extern "C" void tessel_test_axpy_relu(void** args) {
  float* out = (float*)args[0];       // [37]
  const float* x = (const float*)args[1];  // [37]
  const float* y = (const float*)args[2];  // [37]
  for (int i = 0; i < 37; ++i) { float v = 2.0f * x[i] + y[i]; out[i] = v > 0.0f ? v : 0.0f; }
}
)";

Program kernelProgram(const std::string& symbol) {
  Program p;
  p.buffers = {makeBuffer("x", {37}, BufferKind::Input), makeBuffer("y", {37}, BufferKind::Parameter, 0, "normal"),
               makeBuffer("%out", {37}, BufferKind::Temp, 64), makeBuffer("saved", {37}, BufferKind::State)};
  p.buffers[1].stddev = 1.0;
  p.functions = {Function{"forward", {0}, {2, 3}, {"out", "saved"},
                          {KernelStep{symbol, {2, 0, 1}, "model.cpp:3:7 [blocks.0.mlp]"}, CopyStep{2, 3}}, 256}};
  p.kernelSource = kKernelSource;
  p.kernels = {{symbol, {{DType::F32, 37}, {DType::F32, 37}, {DType::F32, 37}}}};
  return p;
}

KernelLibrary testLibrary() {
  HostCompileOptions options;
  options.cacheDir = (fs::path(testing::TempDir()) / "tessel_exec_kernels").string();
  return buildKernelLibrary(kKernelSource, options);
}

TEST(ExecutorTest, KernelStepAndCopyRunTheCompiledKernel) {
  KernelLibrary lib = testLibrary();
  Executor exec(kernelProgram("tessel_test_axpy_relu"), [&](const std::string& s) { return lib.symbol(s); });
  exec.initParameters(3);
  std::vector<float> x(37);
  for (int i = 0; i < 37; ++i) x[i] = 0.25f * static_cast<float>(i - 18);
  exec.setInput("forward", 0, x.data(), x.size() * sizeof(float));
  exec.run("forward");
  const float* y = exec.data(exec.bufferId("y"));
  auto out = exec.outputs("forward");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "out");
  EXPECT_EQ(out[1].name, "saved");
  for (int i = 0; i < 37; ++i) {
    float v = 2.0f * x[i] + y[i];
    EXPECT_EQ(out[0].value(i), v > 0.0f ? v : 0.0f) << i;
    EXPECT_EQ(out[1].value(i), out[0].value(i)) << i;  // the copy step
  }
}

TEST(ExecutorTest, MissingKernelNamesSymbolAndLocation) {
  KernelLibrary lib = testLibrary();
  auto fromLib = [&](const std::string& s) { return lib.symbol(s); };
  expectError([&] { Executor e(kernelProgram("tessel_test_missing"), fromLib); },
              {"tessel_test_missing", "model.cpp:3:7 [blocks.0.mlp]", "forward"});
  expectError([&] { Executor e(kernelProgram("tessel_test_missing"), noKernels); }, {"tessel_test_missing", "null"});
}

// ---- (c) save / load ----------------------------------------------------------

/// x[4,8] @ w[8,16] -> %y (temp), relu(%y) -> %z (temp); arena 512 bytes.
Program smallProgram() {
  Program p;
  p.buffers = {makeBuffer("x", {4, 8}, BufferKind::Input), makeBuffer("w", {8, 16}, BufferKind::Parameter, 0, "normal"),
               makeBuffer("%y", {4, 16}, BufferKind::Temp, 0), makeBuffer("%z", {4, 16}, BufferKind::Temp, 256),
               makeBuffer("w.m", {8, 16}, BufferKind::State), makeBuffer("tokens", {4}, BufferKind::Input)};
  p.buffers[1].stddev = 0.02;
  p.buffers[1].location = "model.cpp:10:3 [w]";
  p.buffers[5].dtype = DType::I32;
  GemmStep g;
  g.a = 0, g.b = 1, g.c = 2, g.m = 4, g.n = 16, g.k = 8, g.location = "model.cpp:12:5";
  p.functions = {Function{"forward", {0, 5}, {3}, {"z"}, {g, KernelStep{"relu_4x16", {3, 2}, "model.cpp:13:5"}}, 512},
                 Function{"snapshot", {}, {4}, {"m"}, {CopyStep{1, 4}}, 0}};
  p.kernelSource = "extern \"C\" void relu_4x16(void** args) {}\n";
  p.kernels = {{"relu_4x16", {{DType::F32, 64}, {DType::F32, 64}}}};
  return p;
}

TEST(ProgramTest, SaveLoadRoundTripIsExact) {
  std::string dir = freshDir("roundtrip");
  Program p = smallProgram();
  saveProgram(p, dir);
  saveProgram(p, dir);  // overwriting is fine
  Program q = loadProgram(dir);
  EXPECT_TRUE(q == p);
  EXPECT_EQ(q.buffers[1].stddev, 0.02);
  EXPECT_EQ(q.arenaBytes(), 512);
  // Only the two files remain: no temp file is left behind.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"kernels.cpp", "program.json"}));
}

TEST(ProgramTest, SaveRejectsAnInvalidProgram) {
  Program p = smallProgram();
  p.buffers[3].offset = 100;
  std::string dir = freshDir("saveinvalid");
  expectError([&] { saveProgram(p, dir); }, {"program.json", "buffers[3].offset", "64"});
  EXPECT_FALSE(fs::exists(fs::path(dir) / "program.json"));
}

// ---- (d) corrupt programs ------------------------------------------------------

struct Corruption {
  std::string what;
  std::function<void(json&)> mutate;
  std::vector<std::string> expected;  // substrings of the message, besides "program.json"
};

TEST(ProgramTest, LoadRejectsCorruptPrograms) {
  std::vector<Corruption> cases = {
      {"version", [](json& j) { j["version"] = 9; }, {"version", "unsupported version 9"}},
      {"old version", [](json& j) { j["version"] = 1; }, {"version", "older Tessel", "compile the program again"}},
      // Version 6 is a program with CUDA kernels: every kernel step then needs a launch.
      {"cuda version", [](json& j) { j["version"] = 6; }, {"steps[1].launch", "missing"}},
      {"gemm id", [](json& j) { j["functions"][0]["steps"][0]["a"] = 9; }, {"functions[0].steps[0].a", "out of range"}},
      {"kernel arg", [](json& j) { j["functions"][0]["steps"][1]["args"][1] = -1; },
       {"functions[0].steps[1].args[1]", "-1 out of range"}},
      {"output id", [](json& j) { j["functions"][0]["outputs"][0] = 6; }, {"functions[0].outputs[0]", "6 out of range"}},
      {"misaligned", [](json& j) { j["buffers"][3]["offset"] = 260; }, {"buffers[3].offset", "multiple of 64"}},
      {"past arena", [](json& j) { j["buffers"][3]["offset"] = 512; }, {"buffers[3].offset", "past the arena of 512"}},
      {"past function arena",
       [](json& j) {
         j["functions"][1]["arenaBytes"] = 2048;
         j["buffers"][3]["offset"] = 1024;
       },
       {"functions[0].outputs[0]", "forward", "arenaBytes 512"}},
      {"gemm k", [](json& j) { j["functions"][0]["steps"][0]["k"] = 9; }, {"functions[0].steps[0].a", "has 32"}},
      {"gemm batch",
       [](json& j) {
         j["functions"][0]["steps"][0]["batch"] = 2;
         j["functions"][0]["steps"][0]["strideA"] = 32;
       },
       {"functions[0].steps[0].a", "64 elements", "model.cpp:12:5"}},
      {"gemm alias",
       [](json& j) {
         j["functions"][0]["steps"][0]["n"] = 8;
         j["functions"][0]["steps"][0]["c"] = 0;
       },
       {"functions[0].steps[0].c", "overlaps an input"}},
      {"unknown kind", [](json& j) { j["buffers"][0]["kind"] = "tmp"; }, {"buffers[0].kind", "unknown kind 'tmp'"}},
      {"unknown dtype", [](json& j) { j["buffers"][0]["dtype"] = "f16"; }, {"buffers[0].dtype", "unknown dtype 'f16'"}},
      {"zero dim", [](json& j) { j["buffers"][1]["shape"][1] = 0; }, {"buffers[1].shape[1]", "not positive"}},
      {"missing offset", [](json& j) { j["buffers"][2].erase("offset"); }, {"buffers[2].offset", "missing"}},
      {"unknown field", [](json& j) { j["buffers"][0]["ofset"] = 0; }, {"buffers[0]", "unknown field 'ofset'"}},
      {"wrong type", [](json& j) { j["functions"][0]["arenaBytes"] = "512"; }, {"functions[0].arenaBytes", "integer"}},
      {"input kind", [](json& j) { j["functions"][0]["inputs"][0] = 1; }, {"functions[0].inputs[0]", "not an input"}},
      {"unknown op", [](json& j) { j["functions"][0]["steps"][1]["op"] = "conv"; },
       {"functions[0].steps[1].op", "unknown step 'conv'"}},
      {"copy size", [](json& j) { j["functions"][1]["steps"][0]["src"] = 0; }, {"functions[1].steps[0]", "bytes"}},
      {"bad init", [](json& j) { j["buffers"][1]["init"] = "xavier"; }, {"buffers[1].init", "xavier"}},
      {"duplicate name", [](json& j) { j["buffers"][4]["name"] = "w"; }, {"buffers[4].name", "duplicate"}},
      {"outputNames", [](json& j) { j["functions"][0]["outputNames"].push_back("extra"); },
       {"functions[0].outputNames", "2 names for 1 outputs"}},
  };
  std::string dir = freshDir("corrupt");
  saveProgram(smallProgram(), dir);
  fs::path file = fs::path(dir) / "program.json";
  json good = json::parse(std::ifstream(file));
  for (const Corruption& c : cases) {
    SCOPED_TRACE(c.what);
    json bad = good;
    c.mutate(bad);
    std::ofstream(file) << bad.dump();
    std::vector<std::string> expected = c.expected;
    expected.push_back("program.json");
    expectError([&] { loadProgram(dir); }, expected);
  }
  std::ofstream(file) << good.dump();
  EXPECT_NO_THROW(loadProgram(dir));
}

TEST(ProgramTest, LoadRejectsBadFiles) {
  std::string dir = freshDir("badfiles");
  expectError([&] { loadProgram(dir); }, {"program.json", "cannot open"});  // missing file
  saveProgram(smallProgram(), dir);
  fs::path file = fs::path(dir) / "program.json";
  std::ostringstream text;
  text << std::ifstream(file).rdbuf();
  std::string good = text.str();
  std::ofstream(file) << "{\"format\": \"tessel-program\", \"version\": ";
  expectError([&] { loadProgram(dir); }, {"program.json", "invalid JSON"});
  std::ofstream(file) << good;
  std::ofstream(fs::path(dir) / "kernels.cpp") << "// nothing here\n";
  expectError([&] { loadProgram(dir); }, {"kernels.cpp", "functions[0].steps[1].symbol", "relu_4x16"});
  fs::remove(fs::path(dir) / "kernels.cpp");
  expectError([&] { loadProgram(dir); }, {"kernels.cpp", "cannot open"});
}

TEST(ExecutorTest, ConstructorValidatesInMemoryPrograms) {
  Program p = smallProgram();
  p.functions[0].steps[0] = GemmStep{0, 1, 2, false, false, false, 1, 4, 16, 9, 0, 0, 0, "model.cpp:12:5"};
  expectError([&] { Executor e(p, noKernels); }, {"Executor", "functions[0].steps[0].a", "model.cpp:12:5"});
}

// ---- (e) parameter init ----------------------------------------------------------

Program initProgram() {
  Program p;
  p.buffers = {makeBuffer("a.weight", {33, 7}, BufferKind::Parameter, 0, "normal"),
               makeBuffer("a.bias", {7}, BufferKind::Parameter, 0, "zeros"),
               makeBuffer("ln.weight", {7}, BufferKind::Parameter, 0, "ones"),
               makeBuffer("a.weight.m", {33, 7}, BufferKind::State)};
  p.buffers[0].stddev = 0.02;
  return p;
}

std::vector<float> contents(Executor& e, int id) {
  const float* d = e.data(id);
  return std::vector<float>(d, d + e.program().buffers[static_cast<size_t>(id)].numel());
}

TEST(ExecutorTest, ParameterInitIsDeterministicAndMatchesInitParameter) {
  Executor e1(initProgram(), noKernels), e2(initProgram(), noKernels), e3(initProgram(), noKernels);
  e1.data(3)[5] = 1.5f;  // dirty state must be cleared
  e1.initParameters(5);
  e2.initParameters(5);
  e3.initParameters(6);
  EXPECT_EQ(contents(e1, 0), contents(e2, 0));
  EXPECT_NE(contents(e1, 0), contents(e3, 0));
  EXPECT_EQ(contents(e1, 0), initParameter(33 * 7, InitKind::Normal, 0.02, 5, "a.weight"));
  EXPECT_EQ(contents(e1, 1), std::vector<float>(7, 0.0f));
  EXPECT_EQ(contents(e1, 2), std::vector<float>(7, 1.0f));
  EXPECT_EQ(contents(e1, 3), std::vector<float>(33 * 7, 0.0f));
  for (int id = 0; id < 4; ++id) EXPECT_EQ(reinterpret_cast<uintptr_t>(e1.raw(id)) % 64, 0u) << id;
}

// ---- (f) arena high-water mark ----------------------------------------------------

TEST(ExecutorTest, HighWaterMarkIsTheHighestTouchedTemp) {
  Program p;
  p.buffers = {makeBuffer("x", {16}, BufferKind::Input), makeBuffer("%t0", {16}, BufferKind::Temp, 0),
               makeBuffer("%t1", {16}, BufferKind::Temp, 128),    // [128, 192)
               makeBuffer("%t2", {10}, BufferKind::Temp, 1024),   // [1024, 1064): only g
               makeBuffer("%t3", {16}, BufferKind::Temp, 512),    // never used
               makeBuffer("%t4", {16}, BufferKind::Temp, 256)};   // g's output only
  p.functions = {Function{"f", {0}, {2}, {"t1"}, {CopyStep{0, 1}, CopyStep{1, 2}}, 256},
                 Function{"g", {0}, {5, 3}, {"t4", "t2"}, {CopyStep{0, 5}}, 1088}};
  Executor exec(p, noKernels);
  EXPECT_EQ(exec.arenaBytes(), 1088);
  EXPECT_EQ(exec.highWaterBytes(), 0);
  EXPECT_EQ(reinterpret_cast<std::byte*>(exec.data(2)) - reinterpret_cast<std::byte*>(exec.data(1)), 128);
  std::vector<float> x(16, 3.0f);
  exec.setInput("f", 0, x.data(), 64);
  exec.run("f");
  EXPECT_EQ(exec.highWaterBytes(), 192);
  EXPECT_EQ(exec.outputs("f")[0].value(15), 3.0f);
  exec.run("f");
  EXPECT_EQ(exec.highWaterBytes(), 192);
  exec.run("g");
  EXPECT_EQ(exec.highWaterBytes(), 1064);  // %t2 is an output of g; %t3 is never touched
}

// ---- (g) inputs ----------------------------------------------------------------

TEST(ExecutorTest, SetInputChecksSizeIndexAndFunction) {
  Executor exec(smallProgram(), [](const std::string&) -> void* { return reinterpret_cast<void*>(&noKernels); });
  std::vector<float> x(32, 1.0f);
  expectError([&] { exec.setInput("forward", 0, x.data(), 31 * sizeof(float)); },
              {"input 0 'x'", "forward", "takes 128 bytes, got 124"});
  EXPECT_THROW(exec.setInput("forward", 2, x.data(), 128), std::out_of_range);
  expectError([&] { exec.setInput("backward", 0, x.data(), 128); }, {"no function named 'backward'"});
  expectError([&] { exec.run("backward"); }, {"backward"});
  expectError([&] { exec.data(5); }, {"'tokens' is not f32"});
  expectError([&] { exec.bufferId("nope"); }, {"nope"});
  std::vector<int32_t> tokens = {1, 2, 3, 4};
  exec.setInput("forward", 1, tokens.data(), 16);
  EXPECT_EQ(static_cast<int32_t*>(exec.raw(5))[3], 4);
}

}  // namespace
}  // namespace tessel::rt
