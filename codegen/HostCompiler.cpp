// The host-compiler driver; see HostCompiler.h.
#include "codegen/HostCompiler.h"
#include "codegen/KernelCache.h"
#include "runtime/numeric/Fnv1a.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <algorithm>
#include <sstream>
#include <thread>
#include <vector>

namespace tessel {
namespace {

namespace fs = std::filesystem;


std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// The bytes of a file, or nullopt if it cannot be read.
std::optional<std::string> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "size hash" of a library, stored beside it: a cached object is loaded only if it still
/// matches (a truncated or damaged .so would crash dlopen or the first call, not fail).
std::string checksum(const std::string& bytes) {
  return fmt::format("{} {:016x}\n", bytes.size(), numeric::fnv1a(numeric::kFnv1aOffsetBasis, bytes));
}


/// Writes `bytes` to `path` through a temporary file, fsync and rename.
bool writeAtomically(const fs::path& path, const std::string& bytes) {
  fs::path tmp = path.string() + fmt::format(".{}.tmp", getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0 &&
            fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  std::error_code ec;
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) fs::remove(tmp, ec);
  return ok && !ec;
}

/// The source cut into at most `parts` translation units for a parallel build: each holds
/// every #include line of the source and its preamble (the shared static inline helpers before
/// the first kernel), then a run of whole kernels (each starts at a "// tessel." header line,
/// codegen/Lowering.cpp), the runs balanced by bytes. Kernels are extern "C" with distinct
/// symbols and the helpers are static inline, so the units link into one library with the same
/// symbols as the whole file. Fewer than two kernels per unit: one unit, the source itself.
std::vector<std::string> splitForParallelBuild(const std::string& source, size_t parts) {
  std::vector<size_t> starts;  // offsets of the kernels' header lines
  for (size_t at = source.rfind("// tessel.", 0) == 0 ? 0 : source.find("\n// tessel."); at != std::string::npos;
       at = source.find("\n// tessel.", at + 1))
    starts.push_back(source[at] == '\n' ? at + 1 : at);
  if (parts < 2 || starts.size() < 2 * parts) return {source};
  std::string head = source.substr(0, starts.front());
  for (size_t at = source.find("\n#include", starts.front()); at != std::string::npos;
       at = source.find("\n#include", at + 1))
    head += source.substr(at + 1, source.find('\n', at + 1) - at) + "\n";
  const size_t body = source.size() - starts.front();
  std::vector<std::string> units;
  size_t from = 0;  // index into starts
  for (size_t u = 0; u < parts && from < starts.size(); ++u) {
    const size_t goal = starts.front() + body * (u + 1) / parts;
    size_t to = from + 1;
    while (to < starts.size() && starts[to] <= goal) ++to;
    if (u + 1 == parts) to = starts.size();
    const size_t end = to < starts.size() ? starts[to] : source.size();
    units.push_back(head + source.substr(starts[from], end - starts[from]));
    from = to;
  }
  return units;
}

/// Parallel units for this machine: one per core, at most 8 (a build of a few seconds does not
/// gain from more, and every unit parses the preamble again); $TESSEL_HOST_COMPILE_JOBS overrides.
size_t hostCompileJobs() {
  if (const char* j = std::getenv("TESSEL_HOST_COMPILE_JOBS"); j && *j) return std::max(1L, std::strtol(j, nullptr, 10));
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
}

}  // namespace

std::string explainCompileLog(const std::string& source, const std::string& fileName,
                              const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  std::vector<size_t> seen;
  // "<file>:<line>:<col>: error: ..." lines of the log.
  for (size_t at = log.find(fileName + ":"); at != std::string::npos;
       at = log.find(fileName + ":", at + 1)) {
    size_t eol = log.find('\n', at);
    std::string entry = log.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    if (entry.find("error") == std::string::npos) continue;
    size_t line = std::strtoul(log.c_str() + at + fileName.size() + 1, nullptr, 10);
    if (line == 0 || line > lines.size()) continue;
    if (std::find(seen.begin(), seen.end(), line) != seen.end()) continue;
    seen.push_back(line);
    // The kernel's header comment names the op and the user's line it came from.
    std::string origin = "(no kernel header found)";
    for (size_t k = line; k-- > 0;)
      if (lines[k].rfind("// tessel.", 0) == 0) {
        origin = lines[k].substr(3);
        break;
      }
    out += fmt::format("\ngenerated line {}: {}\n  in the kernel of {}\n", line, lines[line - 1],
                       origin);
  }
  return out;
}

std::string kernelCacheDir(const HostCompileOptions& options) {
  if (!options.cacheDir.empty()) return options.cacheDir;
  if (const char* d = std::getenv("TESSEL_CACHE_DIR"); d && *d) return std::string(d) + "/kernels";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::string(d) + "/tessel/kernels";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/tessel/kernels";
}

KernelLibrary buildKernelLibrary(const std::string& source, const HostCompileOptions& options) {
  std::string flags;
  for (const std::string& f : options.flags) flags += " " + f;
  uint64_t key = numeric::fnv1a(numeric::kFnv1aOffsetBasis, options.compiler);
  key = numeric::fnv1a(numeric::fnv1a(key, flags), source);
  if (flags.find("native") != std::string::npos) key = numeric::fnv1a(key, hostCpuFlags());
  fs::path dir = kernelCacheDir(options);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw HostCompileError(fmt::format("cannot create kernel cache '{}': {}", dir.string(),
                                       ec.message()));
  fs::path lib = dir / fmt::format("k{:016x}.so", key);
  fs::path sum = dir / fmt::format("k{:016x}.sum", key);
  bool compiled = false;
  if (fs::exists(lib)) {
    std::optional<std::string> bytes = readFile(lib), expected = readFile(sum);
    if (!bytes || !expected || checksum(*bytes) != *expected) {
      fs::remove(lib, ec);  // damaged or unverifiable: rebuild it
      fs::remove(sum, ec);
    }
  }
  if (!fs::exists(lib)) {
    // Only a build can leave a stale folder behind, so only a build sweeps (a cache hit
    // reads nothing but its own files).
    sweepStaleBuildFolders(dir.string());
    // Each builder works in a private folder (concurrent processes, e.g. MPI ranks or test
    // shards, never clash) on a file named after the key alone, so every builder of a key
    // produces the same bytes and the same checksum, whoever renames last. The folder is
    // removed on every way out of this block: success, any failure (a full disk), or an
    // interrupt while the compiler runs (runCompilerIn).
    fs::path work = dir / buildFolderName(key);
    struct RemoveOnExit {
      fs::path path;
      ~RemoveOnExit() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
      }
    } cleanup{work};
    fs::create_directories(work, ec);
    if (ec)
      throw HostCompileError(fmt::format("cannot create '{}': {}", work.string(), ec.message()));
    fs::path src = work / fmt::format("k{:016x}.cpp", key), tmp = work / fmt::format("k{:016x}.so", key);
    {
      std::ofstream f(src);
      f << source;
      f.flush();
      if (!f.good())
        throw HostCompileError(fmt::format("cannot write '{}' (disk full?)", src.string()));
    }
    // Kernels are `extern "C" void symbol(void** args)` (codegen/CppEmitter.cpp).
    size_t kernels = 0;
    for (size_t at = source.find("extern \"C\""); at != std::string::npos; at = source.find("extern \"C\"", at + 1))
      ++kernels;
    const auto started = std::chrono::steady_clock::now();
    if (options.announce) {
      fmt::print("compiling kernel library k{:016x}.so: {} kernels, {} ...", key, kernels, options.compiler);
      std::fflush(stdout);
    }
    struct EndLine {  // the announced line ends however the build ends
      bool open;
      std::chrono::steady_clock::time_point started;
      bool ok = false;
      ~EndLine() {
        if (!open) return;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        fmt::print(" {} {:.1f} s\n", ok ? "done in" : "failed after", s);
        std::fflush(stdout);
      }
    } endLine{options.announce, started};
    std::string log;
    const std::string whole = fmt::format("cd {} && {}{} {} -o {}", quote(work.string()), options.compiler, flags,
                                          quote(src.filename().string()), quote(tmp.filename().string()));
    // A large library builds as one unit per core, compiled concurrently and then linked (the
    // cache key and the library's symbols are those of the whole source). If that fails, the
    // whole file is compiled alone, so that a rejection names lines of the source the message
    // quotes.
    std::vector<std::string> units = splitForParallelBuild(source, hostCompileJobs());
    int status = 1;
    if (units.size() > 1) {
      std::string script = fmt::format("cd {} || exit 1; s=0;", quote(work.string()));
      std::string objects;
      for (size_t u = 0; u < units.size(); ++u) {
        const std::string unit = fmt::format("u{}.cpp", u);
        std::ofstream f(work / unit);
        f << units[u];
        f.flush();
        if (!f.good()) throw HostCompileError(fmt::format("cannot write '{}' (disk full?)", (work / unit).string()));
        script += fmt::format(" {}{} -c {} -o u{}.o & p{}=$!;", options.compiler, flags, unit, u, u);
        objects += fmt::format(" u{}.o", u);
      }
      for (size_t u = 0; u < units.size(); ++u) script += fmt::format(" wait $p{} || s=1;", u);
      script += fmt::format(" [ $s = 0 ] && {}{}{} -o {}", options.compiler, flags, objects, quote(tmp.filename().string()));
      status = runCompilerIn(work.string(), script, log);
    }
    if (units.size() == 1 || status > 0) {  // -1: interrupted, the folder is gone
      log.clear();
      status = runCompilerIn(work.string(), whole, log);
    }
    if (status != 0) {
      // Kept beside the cache (not in the build folder, which goes), so the lines the
      // message quotes can be read in full; swept after kStaleBuildAge.
      fs::path kept = dir / fmt::format("k{:016x}.rejected.cpp", key);
      std::string keptNote = writeAtomically(kept, source) ? fmt::format(" (source kept at '{}')", kept.string()) : "";
      throw HostCompileError(fmt::format("the host compiler rejected generated kernels{}:\n{}{}", keptNote, log,
                                         explainCompileLog(source, src.filename().string(), log)));
    }
    // The checksum goes first and the library is renamed last, both after fsync, so a crash
    // at any point leaves either no library or one that verifies.
    std::optional<std::string> built = readFile(tmp);
    if (!built || !writeAtomically(sum, checksum(*built)))
      throw HostCompileError(fmt::format("cannot write the checksum '{}' (disk full?)", sum.string()));
    if (int fd = ::open(tmp.c_str(), O_RDONLY); fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
    fs::rename(tmp, lib, ec);
    if (ec)
      throw HostCompileError(fmt::format("cannot move '{}' into the cache: {}", tmp.string(),
                                         ec.message()));
    compiled = true;
    endLine.ok = true;
  }
  return loadKernelLibrary(lib.string(), compiled);
}

}  // namespace tessel
