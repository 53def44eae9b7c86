// The compile-time choice of each CPU GEMM's library; see GemmTuner.h.
#include "codegen/GemmTuner.h"

#include "runtime/exec/CpuGemm.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <memory>

namespace tessel {
namespace {
using rt::GemmBackend;

constexpr const char* kCacheFile = "gemm-tuning.json";

rt::GemmDTypes dtypesOf(const rt::Program& program, const rt::GemmStep& g) {
  auto t = [&](int id) { return program.buffers[static_cast<size_t>(id)].dtype; };
  return {t(g.a), t(g.b), t(g.c)};
}

std::string shapeKey(const rt::GemmStep& g, const rt::GemmDTypes& t) {
  return fmt::format("{}*{}->{} {}x{}x{} b{}{}{} {}{} acc{}", dtypeName(t.a), dtypeName(t.b), dtypeName(t.c), g.m, g.n,
                     g.k, g.batch, g.batch > 1 && g.strideA == 0 ? " sharedA" : "",
                     g.batch > 1 && g.strideB == 0 ? " sharedB" : "", g.transA ? 't' : 'n', g.transB ? 't' : 'n',
                     g.accumulate ? 1 : 0);
}

// The shape actually timed for a large GEMM: at most kTuneFlops (batch, then the larger of
// m and n, halved), so that a vocabulary projection (1024x50304x768) costs milliseconds; the
// library's GFLOP/s on the slice stands for the whole.
constexpr double kTuneFlops = 5e8;
rt::GemmStep proxyStep(rt::GemmStep s) {
  auto flops = [&] { return 2.0 * static_cast<double>(s.batch * s.m * s.n * s.k); };
  while (flops() > kTuneFlops && (s.batch > 1 || s.m > 256 || s.n > 256)) {
    if (s.batch > 1) s.batch = (s.batch + 1) / 2;
    else if (s.m >= s.n) s.m = (s.m + 1) / 2;
    else s.n = (s.n + 1) / 2;
  }
  return s;
}

// The step timed: the (proxy) shape with dense batch strides (0 kept for a shared operand).
rt::GemmStep scratchStep(const rt::GemmStep& g) {
  rt::GemmStep s = proxyStep(g);
  s.epilogue = {};
  s.strideA = g.batch > 1 && g.strideA == 0 ? 0 : s.m * s.k;
  s.strideB = g.batch > 1 && g.strideB == 0 ? 0 : s.k * s.n;
  s.strideC = s.m * s.n;
  return s;
}

int64_t elements(int64_t batch, int64_t stride, int64_t item) { return stride == 0 ? item : batch * item; }

// Best GFLOP/s of OpenBLAS and of oneDNN on scratch operands of `g`'s shape. After one warm-up
// run each (caches, JIT, the thread pool) the two alternate, so that a machine shared with
// other work slows both alike.
std::pair<double, double> measure(const rt::GemmStep& g, const rt::GemmDTypes& t, rt::CpuGemmContext& context) {
  const size_t aBytes = static_cast<size_t>(elements(g.batch, g.strideA, g.m * g.k)) * dtypeBytes(t.a);
  const size_t bBytes = static_cast<size_t>(elements(g.batch, g.strideB, g.k * g.n)) * dtypeBytes(t.b);
  const size_t cBytes = static_cast<size_t>(g.batch * g.m * g.n) * dtypeBytes(t.c);
  // Small finite values (bf16 0x3c00 = f32 0x3c003c00 ~ 0.0078): no denormals, no overflow.
  std::vector<uint16_t> a((aBytes + 1) / 2, 0x3c00), b((bBytes + 1) / 2, 0x3c00), c((cBytes + 1) / 2, 0x3c00);
  const rt::GemmScratch sizes = rt::gemmScratchFor(g, t);
  std::vector<float> scratch(static_cast<size_t>(sizes.bytes() / 4) + 1);
  const rt::CpuGemm blas(g, t, GemmBackend::OpenBlas, a.data(), b.data(), c.data(), {scratch.data(), sizes}, &context);
  const rt::CpuGemm dnnl(g, t, GemmBackend::OneDnn, a.data(), b.data(), c.data(), {}, &context);
  auto timed = [](const rt::CpuGemm& gemm) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm.run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  blas.run();
  dnnl.run();
  double bestBlas = 1e30, bestDnnl = 1e30, spent = 0;
  for (int r = 0; r < kTuneRepetitions && (r < 1 || spent < 2 * kTuneSecondsPerBackend); ++r) {
    const double x = timed(blas), y = timed(dnnl);
    bestBlas = std::min(bestBlas, x);
    bestDnnl = std::min(bestDnnl, y);
    spent += x + y;
  }
  const double flops = 2.0 * static_cast<double>(g.batch * g.m * g.n * g.k) / 1e9;
  return {flops / std::max(bestBlas, 1e-9), flops / std::max(bestDnnl, 1e-9)};
}

// Whether oneDNN makes a primitive for `g` on this CPU (oneDNN 2.6 has no bf16 matmul below
// AVX-512, e.g. with ONEDNN_MAX_CPU_ISA=AVX2 or on an AVX2-only CPU).
bool oneDnnRuns(const rt::GemmStep& g, const rt::GemmDTypes& t, rt::CpuGemmContext& context) {
  if (!rt::oneDnnSupports(t) || (g.batch > 1 && g.strideC == 0)) return false;
  try {
    rt::CpuGemm probe(g, t, GemmBackend::OneDnn, nullptr, nullptr, nullptr, {}, &context);
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

/// The cache's machine key. Not the thread count: a shape's library is measured once, at the
/// first compile's threads, and kept for every thread count, so that a bundle emitted with one
/// --threads and run with another computes bit for bit what the trainer computes.
std::string environmentKey() {
  return fmt::format("cpu {}; {}", rt::cpuModelName(), rt::cpuGemmLibraryVersions());
}

nlohmann::json readCache(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    for (auto& [env, shapes] : j.items()) {
      if (!shapes.is_object()) throw std::runtime_error(fmt::format("entry '{}' is not an object", env));
      for (auto& [shape, e] : shapes.items()) {
        const std::string backend = e.at("backend").get<std::string>();
        if (backend != "openblas" && backend != "onednn")
          throw std::runtime_error(fmt::format("unknown backend '{}' for '{}'", backend, shape));
        (void)e.at("openblas_gflops").get<double>();
        (void)e.at("onednn_gflops").get<double>();
      }
    }
    return j;
  } catch (const std::exception& e) {
    fmt::print(stderr, "warning: the GEMM tuning cache {} cannot be read ({}); measuring again and rewriting it\n",
               path, e.what());
    return nlohmann::json::object();
  }
}

void writeCache(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = fmt::format("{}.{}.tmp", path, getpid());
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    if (!out) {
      fmt::print(stderr, "warning: the GEMM tuning cache {} cannot be written\n", path);
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);  // atomic: a concurrent reader sees the old or the new file
  if (ec) fmt::print(stderr, "warning: the GEMM tuning cache {} cannot be written ({})\n", path, ec.message());
}

const char* policyName(GemmPolicy p) {
  switch (p) {
    case GemmPolicy::Tune: return "tuned";
    case GemmPolicy::OpenBlas: return "forced openblas";
    case GemmPolicy::OneDnn: return "forced onednn";
    default: return "default";
  }
}
}  // namespace

GemmPolicy gemmPolicyFromEnvironment() {
  const char* v = std::getenv("TESSEL_GEMM_BACKEND");
  const std::string s = v ? v : "";
  if (s.empty() || s == "tune") return GemmPolicy::Tune;
  if (s == "openblas") return GemmPolicy::OpenBlas;
  if (s == "onednn") return GemmPolicy::OneDnn;
  if (s == "default") return GemmPolicy::Default;
  throw std::runtime_error(
      fmt::format("TESSEL_GEMM_BACKEND='{}' is not one of tune, openblas, onednn, default", s));
}

std::vector<GemmChoice> tuneGemms(rt::Program& program, const GemmTunerOptions& options) {
  // OpenBLAS's thread count is process-wide: set it only when it changes, so that tuning in
  // one thread never resizes the pool under another thread's running GEMM (in-process ranks).
  if (options.threads > 0 && options.threads != rt::cpuGemmThreads()) rt::setCpuGemmThreads(options.threads);
  std::vector<GemmChoice> choices;
  std::map<std::string, size_t> index;
  std::vector<std::pair<rt::GemmStep*, size_t>> steps;
  std::vector<const rt::GemmStep*> firstStep;
  for (rt::Function& f : program.functions)
    for (rt::Step& step : f.steps)
      if (auto* g = std::get_if<rt::GemmStep>(&step)) {
        const std::string key = shapeKey(*g, dtypesOf(program, *g));
        auto [it, fresh] = index.emplace(key, choices.size());
        if (fresh) {
          choices.push_back(GemmChoice{.key = key});
          firstStep.push_back(g);
        }
        ++choices[it->second].steps;
        steps.emplace_back(g, it->second);
      }
  if (options.policy == GemmPolicy::Default || choices.empty()) return choices;

  const std::string path = options.cacheDir.empty() ? "" : (std::filesystem::path(options.cacheDir) / kCacheFile).string();
  const std::string env = environmentKey();
  // Processes sharing the cache (the ranks of one run) tune one at a time: the first measures,
  // the others read its choices, so every rank runs the same library per shape.
  struct Lock {
    int fd = -1;
    ~Lock() {
      if (fd >= 0) ::close(fd);  // releases the flock
    }
  } lock;
  if (options.policy == GemmPolicy::Tune && !path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.cacheDir, ec);
    lock.fd = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock.fd >= 0) ::flock(lock.fd, LOCK_EX);  // best effort: without it, only the race returns
  }
  nlohmann::json cache = options.policy == GemmPolicy::Tune && !path.empty() ? readCache(path) : nlohmann::json::object();
  bool dirty = false;
  std::unique_ptr<rt::CpuGemmContext> context;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < choices.size(); ++i) {
    GemmChoice& c = choices[i];
    const rt::GemmStep& g = *firstStep[i];
    const rt::GemmDTypes t = dtypesOf(program, g);
    if (!context) context = std::make_unique<rt::CpuGemmContext>();
    const bool dnnl = options.policy != GemmPolicy::OpenBlas && oneDnnRuns(g, t, *context);
    if (options.policy != GemmPolicy::Tune || !dnnl) {
      c.backend = options.policy == GemmPolicy::OneDnn && dnnl ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
      continue;
    }
    if (cache.contains(env) && cache[env].contains(c.key)) {
      const nlohmann::json& e = cache[env][c.key];
      c.backend = e["backend"] == "onednn" ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
      c.openBlasGflops = e["openblas_gflops"].get<double>();
      c.oneDnnGflops = e["onednn_gflops"].get<double>();
      c.cached = true;
      continue;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kTuneBudgetSeconds) {
      // Over budget: unmeasured. oneDNN for one large product (its AVX-512 kernels, where
      // OpenBLAS 0.3.21 may run AVX2 ones), OpenBLAS for a batch of small ones. Cached like a
      // measured choice, so every later compile sharing the cache makes the same one: two
      // processes never run one shape on different libraries (bitwise comparisons between
      // runs stay bitwise).
      c.backend = g.batch == 1 ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
      cache[env][c.key] = {{"backend", rt::gemmBackendName(c.backend)}, {"openblas_gflops", 0.0},
                           {"onednn_gflops", 0.0}};
      dirty = true;
      continue;
    }
    const rt::GemmStep s = scratchStep(g);
    std::tie(c.openBlasGflops, c.oneDnnGflops) = measure(s, t, *context);
    c.backend = c.oneDnnGflops > c.openBlasGflops ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
    cache[env][c.key] = {{"backend", rt::gemmBackendName(c.backend)},
                         {"openblas_gflops", c.openBlasGflops},
                         {"onednn_gflops", c.oneDnnGflops}};
    dirty = true;
  }
  if (dirty && !path.empty()) writeCache(path, cache);
  for (auto& [g, i] : steps) g->backend = choices[i].backend;
  return choices;
}

std::string explainGemmChoices(const std::vector<GemmChoice>& choices, GemmPolicy policy, int threads) {
  std::string out = fmt::format("GEMM backends ({}, {} thread{}; TESSEL_GEMM_BACKEND):\n", policyName(policy), threads,
                                threads == 1 ? "" : "s");
  for (const GemmChoice& c : choices) {
    out += fmt::format("  {:<44} x{:<3} {:<8}", c.key, c.steps, rt::gemmBackendName(c.backend));
    if (c.openBlasGflops > 0 || c.oneDnnGflops > 0)
      out += fmt::format(" openblas {:6.1f} onednn {:6.1f} GFLOP/s{}", c.openBlasGflops, c.oneDnnGflops,
                         c.cached ? " (cached)" : "");
    out += "\n";
  }
  return out;
}

}  // namespace tessel
