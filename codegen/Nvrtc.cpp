// The NVRTC driver; see Nvrtc.h.
//
// NVRTC is reached only through dlopen/dlsym with the prototypes declared below (copied from
// nvrtc.h, stable since CUDA 11.1), so neither a CUDA header nor libnvrtc is needed to build.
// Flags checked against NVRTC 13.0 on a machine without GPU or driver:
//   --gpu-architecture=sm_90 -lineinfo --ptxas-options=-v -I/usr/local/cuda/include
// give a cubin, PTX (NVRTC 13 returns both for an sm_XX target) and a log with
//   ptxas info    : Compiling entry function 'red' for 'sm_90'
//   ptxas info    : Function properties for red
//   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 12 registers, used 1 barriers, 128 bytes smem
// (-Xptxas=-v is accepted too). Errors read "tessel_kernels.cu(7): error: ...".
#include "codegen/Nvrtc.h"
#include "runtime/numeric/Fnv1a.h"

#include "codegen/HostCompiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessel {
namespace {

namespace fs = std::filesystem;

/// The name NVRTC gives the source in its log ("tessel_kernels.cu(7): error: ...").
constexpr const char* kSourceName = "tessel_kernels.cu";

// ---- the NVRTC API, as declared in nvrtc.h --------------------------------
using nvrtcResult = int;  // an enum in nvrtc.h; 0 is NVRTC_SUCCESS
constexpr nvrtcResult kNvrtcSuccess = 0;
struct NvrtcProgramImpl;
using nvrtcProgram = NvrtcProgramImpl*;

/// The loaded library and the functions the driver calls. Loaded once per process and never
/// closed (a process that compiles kernels keeps compiling them).
struct NvrtcApi {
  void* handle = nullptr;
  std::string path;  // the library that loaded
  std::string why;   // what was tried, if none loaded
  const char* (*getErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*version)(int*, int*) = nullptr;
  nvrtcResult (*createProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*) = nullptr;
  nvrtcResult (*destroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*compileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*getProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*getProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*getPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*getPTX)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*getCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*getCUBIN)(nvrtcProgram, char*) = nullptr;
};

/// The candidates nvrtcAvailable documents, in order.
std::vector<std::string> nvrtcCandidates() {
  std::vector<std::string> out;
  if (const char* p = std::getenv("TESSEL_NVRTC"); p && *p) out.push_back(p);
  if (const char* h = std::getenv("CUDA_HOME"); h && *h) {
    out.push_back(std::string(h) + "/lib64/libnvrtc.so");
    out.push_back(std::string(h) + "/lib/libnvrtc.so");
  }
  for (const char* n : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                        "/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib/libnvrtc.so"})
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

/// Binds every function of `api` from `handle`; false (and the missing name) if one is absent.
bool bind(NvrtcApi& api, void* handle, std::string& missing) {
  auto get = [&](auto& fn, const char* name) {
    void* p = dlsym(handle, name);
    if (!p && missing.empty()) missing = name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  get(api.getErrorString, "nvrtcGetErrorString");
  get(api.version, "nvrtcVersion");
  get(api.createProgram, "nvrtcCreateProgram");
  get(api.destroyProgram, "nvrtcDestroyProgram");
  get(api.compileProgram, "nvrtcCompileProgram");
  get(api.getProgramLogSize, "nvrtcGetProgramLogSize");
  get(api.getProgramLog, "nvrtcGetProgramLog");
  get(api.getPTXSize, "nvrtcGetPTXSize");
  get(api.getPTX, "nvrtcGetPTX");
  get(api.getCUBINSize, "nvrtcGetCUBINSize");
  get(api.getCUBIN, "nvrtcGetCUBIN");
  return missing.empty();
}

const NvrtcApi& nvrtcApi() {
  static const NvrtcApi api = [] {
    NvrtcApi a;
    std::string tried;
    for (const std::string& c : nvrtcCandidates()) {
      void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* e = dlerror();
        // dlerror() starts with the name it tried.
        tried += fmt::format("\n  {}", e ? e : c + ": not loadable");
        continue;
      }
      std::string missing;
      if (!bind(a, h, missing)) {
        tried += fmt::format("\n  {}: loaded, but has no {}", c, missing);
        dlclose(h);
        a = NvrtcApi();
        continue;
      }
      a.handle = h;
      a.path = c;
      return a;
    }
    a.why = "NVRTC (libnvrtc) could not be loaded; tried, in order:" + tried +
            "\nInstall the CUDA toolkit, or set TESSEL_NVRTC to the library's path.";
    return a;
  }();
  return api;
}

const NvrtcApi& requireNvrtc() {
  const NvrtcApi& api = nvrtcApi();
  if (!api.handle) throw CudaCompileError(api.why);
  return api;
}

/// Frees an NVRTC program on every path out of compileCuda.
struct ProgramGuard {
  const NvrtcApi& api;
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) api.destroyProgram(&prog);
  }
};

// ---- helpers --------------------------------------------------------------

bool readFile(const fs::path& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  out = s.str();
  return !f.bad();
}

/// Writes `data` to a unique temporary name beside `path`, then renames it into place, so a
/// reader never sees half a file and concurrent writers (threads, MPI ranks) never clash.
void writeAtomic(const fs::path& path, const std::string& data) {
  static std::atomic<unsigned> counter{0};
  fs::path tmp = path;
  tmp += fmt::format(".{}.{}.{}.tmp", getpid(),
                     std::hash<std::thread::id>()(std::this_thread::get_id()) & 0xffff,
                     counter++);
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f.good()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw CudaCompileError(fmt::format("cannot write '{}'", tmp.string()));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw CudaCompileError(fmt::format("cannot move '{}' into the cache: {}", tmp.string(),
                                       ec.message()));
  }
}

/// NVRTC's "name(7): error" as "name:7: error", the form explainCompileLog reads.
std::string colonLineForm(const std::string& log, const std::string& name) {
  std::string out;
  size_t from = 0;
  for (size_t at = log.find(name + "("); at != std::string::npos;
       at = log.find(name + "(", at + 1)) {
    size_t digits = at + name.size() + 1, end = digits;
    while (end < log.size() && std::isdigit(static_cast<unsigned char>(log[end]))) ++end;
    if (end == digits || end >= log.size() || log[end] != ')') continue;
    out += log.substr(from, at - from) + name + ":" + log.substr(digits, end - digits) + ":";
    from = end + 1;
  }
  return out + log.substr(from);
}

/// The integer just before `phrase` in `line` ("128" in "128 bytes smem"); 0 if absent.
int numberBefore(const std::string& line, const std::string& phrase) {
  size_t at = line.find(phrase);
  if (at == std::string::npos) return 0;
  size_t end = at;
  while (end > 0 && line[end - 1] == ' ') --end;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  return begin == end ? 0 : std::atoi(line.c_str() + begin);
}

bool isVirtualArch(const std::string& arch) { return arch.rfind("compute_", 0) == 0; }

}  // namespace

bool nvrtcAvailable(std::string* why) {
  const NvrtcApi& api = nvrtcApi();
  if (why) *why = api.handle ? "loaded " + api.path : api.why;
  return api.handle != nullptr;
}

std::string nvrtcVersion() {
  const NvrtcApi& api = requireNvrtc();
  int major = 0, minor = 0;
  if (nvrtcResult r = api.version(&major, &minor); r != kNvrtcSuccess)
    throw CudaCompileError(fmt::format("nvrtcVersion failed: {}", api.getErrorString(r)));
  return fmt::format("{}.{}", major, minor);
}

std::string cubinCacheDir(const CudaCompileOptions& options) {
  if (!options.cacheDir.empty()) return options.cacheDir;
  if (const char* d = std::getenv("TESSEL_CACHE_DIR"); d && *d) return std::string(d) + "/cubins";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::string(d) + "/tessel/cubins";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/tessel/cubins";
}

std::vector<CudaKernelInfo> parsePtxasInfo(const std::string& log) {
  std::vector<CudaKernelInfo> kernels;
  // The kernel the next "Used N registers" / "bytes stack frame" line belongs to; -1 while
  // ptxas reports a non-entry (device) function.
  int current = -1;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ptxas", 0) != 0) continue;
    if (size_t at = line.find("Compiling entry function '"); at != std::string::npos) {
      size_t begin = at + std::strlen("Compiling entry function '");
      kernels.push_back({.name = line.substr(begin, line.find('\'', begin) - begin)});
      current = static_cast<int>(kernels.size()) - 1;
    } else if (size_t at = line.find("Function properties for "); at != std::string::npos) {
      std::string name = line.substr(at + std::strlen("Function properties for "));
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
        name.pop_back();
      current = -1;
      for (size_t k = 0; k < kernels.size(); ++k)
        if (kernels[k].name == name) current = static_cast<int>(k);
    } else if (current < 0) {
      continue;
    } else if (line.find("bytes stack frame") != std::string::npos) {
      CudaKernelInfo& k = kernels[current];
      k.stackBytes = numberBefore(line, " bytes stack frame");
      k.spillStoreBytes = numberBefore(line, " bytes spill stores");
      k.spillLoadBytes = numberBefore(line, " bytes spill loads");
    } else if (size_t at = line.find("Used "); at != std::string::npos) {
      CudaKernelInfo& k = kernels[current];
      k.registers = std::atoi(line.c_str() + at + std::strlen("Used "));
      k.sharedBytes = numberBefore(line, " bytes smem");
    }
  }
  return kernels;
}

CudaModule compileCuda(const std::string& source, const CudaCompileOptions& options) {
  const NvrtcApi& api = requireNvrtc();
  const bool cubinWanted = !isVirtualArch(options.arch);
  std::vector<std::string> args = {"--gpu-architecture=" + options.arch};
  if (options.lineInfo) args.push_back("-lineinfo");
  // ptxas runs only for a real arch; -v makes it report each kernel's resources.
  if (cubinWanted) args.push_back("--ptxas-options=-v");
  for (const std::string& d : options.includeDirs) args.push_back("-I" + d);
  args.insert(args.end(), options.flags.begin(), options.flags.end());

  const std::string version = nvrtcVersion();
  uint64_t key = numeric::fnv1a(numeric::kFnv1aOffsetBasis, "nvrtc " + version);
  for (const std::string& a : args) key = numeric::fnv1a(key, a);
  key = numeric::fnv1a(key, source);

  fs::path dir = cubinCacheDir(options);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw CudaCompileError(fmt::format("cannot create cubin cache '{}': {}", dir.string(),
                                       ec.message()));
  const std::string stem = fmt::format("k{:016x}", key);
  const fs::path cubinPath = dir / (stem + ".cubin"), ptxPath = dir / (stem + ".ptx"),
                 logPath = dir / (stem + ".log"), sourcePath = dir / (stem + ".cu");

  CudaModule out;
  // The cubin is written last, so its presence means the entry is complete. A cubin without
  // the ELF magic (a damaged cache) is rebuilt.
  std::string cubin;
  if (readFile(cubinPath, cubin) && readFile(ptxPath, out.ptx) && readFile(logPath, out.log) &&
      (!cubinWanted || cubin.rfind("\x7f" "ELF", 0) == 0)) {
    out.cubin.assign(cubin.begin(), cubin.end());
    out.kernels = parsePtxasInfo(out.log);
    if (!fs::exists(sourcePath)) writeAtomic(sourcePath, source);  // an entry older than kept sources
    return out;
  }

  ProgramGuard guard{api};
  if (nvrtcResult r = api.createProgram(&guard.prog, source.c_str(), kSourceName, 0, nullptr,
                                        nullptr);
      r != kNvrtcSuccess)
    throw CudaCompileError(fmt::format("nvrtcCreateProgram failed: {}", api.getErrorString(r)));
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  nvrtcResult compiled =
      api.compileProgram(guard.prog, static_cast<int>(argv.size()), argv.data());
  // Sizes from NVRTC count a trailing NUL for the log and the PTX; strip it.
  auto fetch = [&](auto sizeFn, auto getFn, const char* what) {
    size_t n = 0;
    std::string s;
    if (nvrtcResult r = sizeFn(guard.prog, &n); r != kNvrtcSuccess)
      throw CudaCompileError(fmt::format("{} failed: {}", what, api.getErrorString(r)));
    s.resize(n);
    if (n > 0)
      if (nvrtcResult r = getFn(guard.prog, s.data()); r != kNvrtcSuccess)
        throw CudaCompileError(fmt::format("{} failed: {}", what, api.getErrorString(r)));
    return s;
  };
  auto stripNul = [](std::string s) {
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
  };
  out.log = stripNul(fetch(api.getProgramLogSize, api.getProgramLog, "nvrtcGetProgramLog"));
  if (compiled != kNvrtcSuccess) {
    // Keep the source beside the cache, so the lines the message quotes can be read in full.
    const fs::path& kept = sourcePath;
    std::string keptNote;
    try {
      writeAtomic(kept, source);
      keptNote = fmt::format(" (source kept at '{}')", kept.string());
    } catch (const CudaCompileError&) {
    }
    std::string joined;
    for (const std::string& a : args) joined += " " + a;
    throw CudaCompileError(fmt::format(
        "NVRTC {} rejected generated kernels{}: {}\noptions:{}\n{}{}", version, keptNote,
        api.getErrorString(compiled), joined, out.log,
        explainCompileLog(source, kSourceName, colonLineForm(out.log, kSourceName))));
  }
  out.ptx = stripNul(fetch(api.getPTXSize, api.getPTX, "nvrtcGetPTX"));
  if (cubinWanted) cubin = fetch(api.getCUBINSize, api.getCUBIN, "nvrtcGetCUBIN");
  else cubin.clear();
  if (cubinWanted && cubin.rfind("\x7f" "ELF", 0) != 0)
    throw CudaCompileError(
        fmt::format("NVRTC returned no {} cubin ({} bytes)", options.arch, cubin.size()));
  out.cubin.assign(cubin.begin(), cubin.end());
  out.kernels = parsePtxasInfo(out.log);
  out.compiled = true;

  writeAtomic(ptxPath, out.ptx);
  writeAtomic(logPath, out.log);
  writeAtomic(sourcePath, source);  // which source a cubin came from (the stand-in driver reads it)
  writeAtomic(cubinPath, cubin);
  return out;
}

}  // namespace tessel
