// `tessel bench-gemm`: the machine's GEMM ceiling as Tessel's executor reaches it. Times
// C = A B (row-major f32 or bf16, M x K times K x N) as a one-step program run by the CPU
// Executor, so the product goes through the same GEMM case a training step's GemmStep does,
// once per backend of kBackends (GemmStep::backend). Prints, per backend, the best and median
// milliseconds of --runs timed runs (after --warmup untimed ones) and GFLOP/s = 2 M N K / best
// time; --json prints one JSON line per backend instead (bench/cpu_step.sh reads it).
//
// Adding a backend: one row in kBackends. A backend this build or the executor refuses is
// reported as such (its error message), not timed; when no backend ran, the exit status is 1.
#include "runtime/exec/Executor.h"
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/train/FlagChecks.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace tessel::cli {
namespace {

/// One GEMM library the executor can run a GemmStep with.
struct BackendRow {
  const char* name;  // as printed and as --backend takes it
  rt::GemmBackend backend;
};
/// The backends timed, in order (GemmBackend::Default is OpenBLAS, so it has no row).
const BackendRow kBackends[] = {
    {"openblas", rt::GemmBackend::OpenBlas},
    {"onednn", rt::GemmBackend::OneDnn},
};

struct BenchGemmFlags {
  int64_t m = 2048, n = 1536, k = 384;
  int runs = 10, warmup = 2, threads = 0;
  std::string dtype = "f32";
  std::vector<std::string> backends;  // empty: all of kBackends
  bool json = false;
};

rt::Buffer buffer(const std::string& name, std::vector<int64_t> shape, rt::BufferKind kind, rt::DType dtype) {
  rt::Buffer b;
  b.name = name;
  b.shape = std::move(shape);
  b.kind = kind;
  b.dtype = dtype;
  return b;
}

/// The one-step program C[m, n] = A[m, k] B[k, n] on `backend`.
rt::Program gemmProgram(const BenchGemmFlags& f, rt::GemmBackend backend) {
  rt::DType dt = f.dtype == "bf16" ? rt::DType::BF16 : rt::DType::F32;
  rt::Program p;
  // A and B are inputs (filled once with values in [-1, 1)); C is the one temporary.
  p.buffers = {buffer("a", {f.m, f.k}, rt::BufferKind::Input, dt), buffer("b", {f.k, f.n}, rt::BufferKind::Input, dt),
               buffer("c", {f.m, f.n}, rt::BufferKind::Temp, dt)};
  rt::GemmStep g;
  g.a = 0;
  g.b = 1;
  g.c = 2;
  g.m = f.m;
  g.n = f.n;
  g.k = f.k;
  g.location = "tessel bench-gemm";
  g.backend = backend;
  p.functions = {rt::Function{"gemm", {0, 1}, {2}, {"c"}, {g}, p.buffers[2].bytes()}};
  return p;
}

struct Timing {
  double bestMs = 0, medianMs = 0;
};

Timing timeBackend(const BenchGemmFlags& f, rt::GemmBackend backend) {
  rt::ExecutorOptions options;
  options.threads = f.threads;
  rt::Executor exec(gemmProgram(f, backend), [](const std::string&) -> void* { return nullptr; }, options);
  for (int input = 0; input < 2; ++input) {
    const rt::Buffer& b = exec.program().buffers[static_cast<size_t>(input)];
    std::vector<float> values(static_cast<size_t>(b.numel()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919 % 2003) / 1001.5 - 1.0);
    if (b.dtype == rt::DType::BF16) {
      std::vector<uint16_t> bf(values.size());  // truncation: the values only need to be finite
      for (size_t i = 0; i < values.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &values[i], 4);
        bf[i] = static_cast<uint16_t>(bits >> 16);
      }
      exec.setInput("gemm", static_cast<size_t>(input), bf.data(), bf.size() * 2);
    } else {
      exec.setInput("gemm", static_cast<size_t>(input), values.data(), values.size() * 4);
    }
  }
  for (int i = 0; i < f.warmup; ++i) exec.run("gemm");
  std::vector<double> ms;
  for (int i = 0; i < f.runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    exec.run("gemm");
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms.front(), ms[ms.size() / 2]};
}

int run(const BenchGemmFlags& f) {
  double flop = 2.0 * static_cast<double>(f.m) * static_cast<double>(f.n) * static_cast<double>(f.k);
  if (!f.json)
    fmt::print("{} GEMM {}x{}x{} (M x N x K), {} threads, best and median of {} runs\n", f.dtype, f.m, f.n, f.k,
               f.threads, f.runs);
  int ran = 0, tried = 0;
  for (const BackendRow& row : kBackends) {
    if (!f.backends.empty() && std::find(f.backends.begin(), f.backends.end(), row.name) == f.backends.end())
      continue;
    nlohmann::json out = {{"backend", row.name}, {"dtype", f.dtype}, {"m", f.m}, {"n", f.n}, {"k", f.k},
                          {"threads", f.threads}};
    try {
      Timing t = timeBackend(f, row.backend);
      double gflops = flop / (t.bestMs * 1e-3) / 1e9;
      out.update({{"best_ms", t.bestMs}, {"median_ms", t.medianMs}, {"gflops", gflops}});
      if (!f.json)
        fmt::print("  {:<9} {:8.3f} ms best  {:8.3f} ms median  {:7.1f} GFLOP/s\n", row.name, t.bestMs, t.medianMs,
                   gflops);
    } catch (const std::exception& e) {
      out["error"] = e.what();
      if (!f.json) fmt::print("  {:<9} not run: {}\n", row.name, e.what());
    }
    if (f.json) fmt::print("{}\n", out.dump());
    ran += out.contains("gflops") ? 1 : 0;
    tried += 1;
  }
  if (tried > 0 && ran == 0) {  // a script reading the ceiling must not take "nothing" for a number
    fmt::print(stderr, "tessel bench-gemm: no backend could run this GEMM\n");
    return 1;
  }
  return 0;
}

}  // namespace

Action setupBenchGemm(CLI::App& sub) {
  auto f = std::make_shared<BenchGemmFlags>();
  sub.add_option("--m", f->m, "rows of A and C")->check(trainer::integerIn(1, 65536))->capture_default_str();
  sub.add_option("--n", f->n, "columns of B and C")->check(trainer::integerIn(1, 65536))->capture_default_str();
  sub.add_option("--k", f->k, "columns of A, rows of B")->check(trainer::integerIn(1, 65536))->capture_default_str();
  sub.add_option("--dtype", f->dtype, "element type of A, B and C (a bf16 GEMM accumulates in f32)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  sub.add_option("--runs", f->runs, "timed runs per backend")->check(trainer::integerIn(1, 1 << 20))->capture_default_str();
  sub.add_option("--warmup", f->warmup, "untimed runs first")->check(trainer::integerIn(0, 1 << 20))->capture_default_str();
  sub.add_option("--threads", f->threads, "OpenMP and BLAS threads (0: the libraries' defaults)")
      ->check(trainer::integerIn(0, 1024))
      ->capture_default_str();
  std::vector<std::string> names;
  for (const BackendRow& row : kBackends) names.push_back(row.name);
  sub.add_option("--backend", f->backends, "time only these backends (repeatable; default: all)")
      ->check(CLI::IsMember(names));
  sub.add_flag("--json", f->json, "one JSON line per backend: backend, best_ms, median_ms, gflops (or error)");
  return [f](Context&) { return run(*f); };
}

}  // namespace tessel::cli
