// The stand-in's modules and kernel launches: a cubin is mapped to a host build of the CUDA
// source it was compiled from, run on the SIMT harness (test/simt/Simt.h).
//
// Finding the source (the cubin does not contain it): every folder of
// $TESSEL_STANDIN_SOURCES (':'-separated; e.g. a bundle folder, which holds kernels.cubin and
// kernels.cu), then the NVRTC cubin cache (codegen/Nvrtc.h cubinCacheDir: $TESSEL_CACHE_DIR/
// cubins, else $XDG_CACHE_HOME/tessel/cubins, else ~/.cache/tessel/cubins, where compileCuda
// keeps k<key>.cu beside k<key>.cubin) is searched for a `X.cubin` whose bytes equal the
// image with a `X.cu` beside it. Its source is compiled by the project's host-compiler driver
// (codegen/HostCompiler.h; cached under the kernel cache, keyed by the source's FNV-1a
// checksum together with the harness's text) after test/standin/SimtKernel.h.
//
// Checks: the image is a CUDA ELF; the kernel names are the cubin's entry symbols, and a
// name not among them is CUDA_ERROR_NOT_FOUND; a kernel's parameter count and sizes come from
// its C++ signature (cuFuncGetParamInfo reports them, as CUDA does); every pointer argument
// must point into a live allocation when the kernel runs, or the launch is a device fault
// naming the argument; dynamic shared memory and `extra` launch parameters are refused
// (Tessel uses neither, and the harness has no dynamic shared memory).
#include "codegen/HostCompiler.h"
#include "runtime/numeric/Fnv1a.h"
#include "test/standin/SimtKernel.h"
#include "test/standin/Standin.h"

#include <elf.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;
using namespace tessel::standin;

struct CUmod_st {
  tessel::KernelLibrary library;
  std::set<std::string> kernels;  // the cubin's entry symbols
  std::map<std::string, std::unique_ptr<CUfunc_st>> functions;
};

struct CUfunc_st {
  CUmod_st* module = nullptr;
  std::string name;
  void (*run)(const tessel_standin::Launch*) = nullptr;
  tessel_standin::Params params;
  int maxDynamicShared = 0;
};

namespace tessel::standin {

std::mutex& kernelMutex() {
  static std::mutex m;
  return m;
}

namespace {

constexpr uint16_t kElfMachineCuda = 190;  // EM_CUDA
constexpr unsigned char kCudaEntry = 0x10;  // st_other of a kernel entry (STO_CUDA_ENTRY)

std::mutex gModulesMutex;
std::set<CUmod_st*> gModules;

/// The cubin's size (its ELF header says where the last table ends) and entry symbols; throws
/// std::runtime_error for an image that is not a 64-bit CUDA ELF.
std::pair<size_t, std::set<std::string>> readCubin(const unsigned char* p) {
  Elf64_Ehdr h;
  std::memcpy(&h, p, sizeof h);
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0)
    throw std::runtime_error("the image is not an ELF cubin (PTX images are not modelled; load the cubin)");
  if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_machine != kElfMachineCuda)
    throw std::runtime_error(fmt::format("the ELF image is not a CUDA cubin (machine {})", h.e_machine));
  size_t size = std::max<size_t>(h.e_shoff + size_t{h.e_shnum} * h.e_shentsize,
                                 h.e_phoff + size_t{h.e_phnum} * h.e_phentsize);
  std::vector<Elf64_Shdr> sections(h.e_shnum);
  std::memcpy(sections.data(), p + h.e_shoff, sections.size() * sizeof(Elf64_Shdr));
  std::set<std::string> entries;
  for (const Elf64_Shdr& s : sections) {
    if (s.sh_type != SHT_NOBITS) size = std::max<size_t>(size, s.sh_offset + s.sh_size);
    if (s.sh_type != SHT_SYMTAB) continue;
    const char* names = reinterpret_cast<const char*>(p + sections.at(s.sh_link).sh_offset);
    for (size_t off = 0; off + sizeof(Elf64_Sym) <= s.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, p + s.sh_offset + off, sizeof sym);
      if (ELF64_ST_TYPE(sym.st_info) == STT_FUNC && ELF64_ST_BIND(sym.st_info) == STB_GLOBAL &&
          (sym.st_other & kCudaEntry))
        entries.insert(names + sym.st_name);
    }
  }
  return {size, entries};
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> sourceFolders() {
  std::vector<fs::path> folders;
  if (const char* v = std::getenv("TESSEL_STANDIN_SOURCES"); v && *v) {
    std::stringstream list(v);
    for (std::string item; std::getline(list, item, ':');)
      if (!item.empty()) folders.emplace_back(item);
  }
  if (const char* d = std::getenv("TESSEL_CACHE_DIR"); d && *d) folders.push_back(fs::path(d) / "cubins");
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) folders.push_back(fs::path(x) / "tessel/cubins");
  else if (const char* home = std::getenv("HOME"); home && *home) folders.push_back(fs::path(home) / ".cache/tessel/cubins");
  return folders;
}

/// The CUDA source the cubin was compiled from (see the file comment); throws naming the
/// folders searched.
std::string findSource(const std::string_view cubin) {
  std::string searched;
  for (const fs::path& folder : sourceFolders()) {
    searched += " " + folder.string();
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
      const fs::path& p = e.path();
      if (p.extension() != ".cubin" || e.file_size(ec) != cubin.size()) continue;
      fs::path source = fs::path(p).replace_extension(".cu");
      if (fs::exists(source) && readFile(p) == cubin) return readFile(source);
    }
  }
  throw std::runtime_error("no CUDA source for this cubin in" + searched +
                           " (set TESSEL_STANDIN_SOURCES to a folder holding NAME.cubin and NAME.cu)");
}

/// The host build of `cuda` on the SIMT harness, with a launcher per kernel of `kernels`.
tessel::KernelLibrary buildHost(const std::string& cuda, const std::set<std::string>& kernels) {
  const std::string root = TESSEL_SOURCE_DIR;
  uint64_t harness = numeric::kFnv1aOffsetBasis;
  for (const char* f : {"/test/simt/Simt.h", "/test/simt/Simt.cpp", "/test/standin/SimtKernel.h"})
    harness = numeric::fnv1a(harness, readFile(root + f));
  std::string src = fmt::format(
      "// Stand-in host build of CUDA source {:016x} (harness {:016x})\n#include \"test/standin/SimtKernel.h\"\n",
      numeric::fnv1a(numeric::kFnv1aOffsetBasis, cuda), harness);
  src += cuda;
  src += "\n";
  for (const std::string& k : kernels)
    src += fmt::format(
        "extern \"C\" void {0}__standin(const tessel_standin::Launch* l) {{ tessel_standin::run({0}, l); }}\n"
        "extern \"C\" const tessel_standin::Params {0}__standin_params = tessel_standin::params({0});\n",
        k);
  src += "#include \"test/simt/Simt.cpp\"\n";
  HostCompileOptions o;
  // -O1: a launch costs fiber switches, not the kernels' code. -ffp-contract=off: every
  // operation rounded, as the C++ kernels of --device cpu (the SIMT tests use the same flags).
  o.flags = {"-O1", "-std=c++17", "-ffp-contract=off", "-shared", "-fPIC", "-w", "-I" + root};
  return buildKernelLibrary(src, o);
}

/// Launch::translate: a pointer argument's host view; throws naming the argument.
void* translate(void* context, unsigned long long address, int index) {
  if (address == 0) return nullptr;
  std::string why;
  if (std::byte* v = hostView(address, 1, &why)) return v;
  throw std::runtime_error(fmt::format("argument {} of kernel {}: {}", index,
                                       static_cast<const CUfunc_st*>(context)->name, why));
}

bool liveFunction(CUfunction f) {
  std::lock_guard<std::mutex> lock(gModulesMutex);
  return f && gModules.count(f->module) && f->module->functions.count(f->name);
}

}  // namespace
}  // namespace tessel::standin

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!module || !image) return fail(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadData", "null argument");
  try {
    auto [size, kernels] = readCubin(static_cast<const unsigned char*>(image));
    std::string source = findSource(std::string_view(static_cast<const char*>(image), size));
    auto m = std::make_unique<CUmod_st>();
    m->library = buildHost(source, kernels);
    m->kernels = std::move(kernels);
    std::lock_guard<std::mutex> lock(gModulesMutex);
    *module = m.release();
    gModules.insert(*module);
    return CUDA_SUCCESS;
  } catch (const std::exception& e) {
    return fail(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData", e.what());
  }
}

CUresult cuModuleUnload(CUmodule module) {
  std::unique_ptr<CUmod_st> owned;
  {
    std::lock_guard<std::mutex> lock(gModulesMutex);
    if (!gModules.erase(module)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuModuleUnload", "not a module");
    owned.reset(module);
  }
  // Queued launches of its kernels would run unloaded code: wait for them, as CUDA does.
  synchronizeAll("cuModuleUnload");
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!function || !name) return fail(CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction", "null argument");
  std::lock_guard<std::mutex> lock(gModulesMutex);
  if (!gModules.count(module)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction", "not a module");
  if (!module->kernels.count(name))
    return fail(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction",
                fmt::format("the module has no kernel named '{}' ({} kernels)", name, module->kernels.size()));
  auto& slot = module->functions[name];
  if (!slot) {
    auto f = std::make_unique<CUfunc_st>();
    f->module = module;
    f->name = name;
    try {
      f->run = reinterpret_cast<void (*)(const tessel_standin::Launch*)>(
          module->library.symbol(std::string(name) + "__standin"));
      f->params = *static_cast<const tessel_standin::Params*>(
          module->library.symbol(std::string(name) + "__standin_params"));
    } catch (const std::exception& e) {
      module->functions.erase(name);
      return fail(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction", e.what());
    }
    slot = std::move(f);
  }
  *function = slot.get();
  return CUDA_SUCCESS;
}

CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!liveFunction(f)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuFuncGetParamInfo", "not a function");
  if (index >= static_cast<size_t>(f->params.count)) return CUDA_ERROR_INVALID_VALUE;  // the end, as in CUDA
  size_t at = 0;
  for (size_t i = 0;; ++i) {
    const size_t bytes = f->params.sizes[i], align = std::min<size_t>(bytes, 8);
    at = (at + align - 1) / align * align;
    if (i == index) {
      if (offset) *offset = at;
      if (size) *size = bytes;
      return CUDA_SUCCESS;
    }
    at += bytes;
  }
}

CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attribute, int value) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!liveFunction(f)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuFuncSetAttribute", "not a function");
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuFuncSetAttribute",
                fmt::format("attribute {} is not modelled", static_cast<int>(attribute)));
  if (value < 0 || value > 227 * 1024)  // sm_90's opt-in maximum
    return fail(CUDA_ERROR_INVALID_VALUE, "cuFuncSetAttribute", fmt::format("{} bytes of shared memory", value));
  f->maxDynamicShared = value;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned sharedBytes, CUstream stream, void** kernelParams, void** extra) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!liveFunction(f)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel", "not a function");
  const std::string call = "cuLaunchKernel of " + f->name;
  if (!gx || !gy || !gz || !bx || !by || !bz)
    return fail(CUDA_ERROR_INVALID_VALUE, call, fmt::format("grid ({},{},{}) block ({},{},{})", gx, gy, gz, bx, by, bz));
  if (uint64_t{bx} * by * bz > 1024)
    return fail(CUDA_ERROR_INVALID_VALUE, call, fmt::format("{} threads per block (at most 1024)", uint64_t{bx} * by * bz));
  if (sharedBytes > 0)
    return fail(CUDA_ERROR_NOT_SUPPORTED, call, "dynamic shared memory is not modelled by the SIMT harness");
  if (extra) return fail(CUDA_ERROR_NOT_SUPPORTED, call, "`extra` launch parameters are not modelled");
  if (f->params.count > 0 && !kernelParams)
    return fail(CUDA_ERROR_INVALID_VALUE, call, fmt::format("no kernelParams for {} parameters", f->params.count));
  // The values are copied now, as CUDA does: the caller may reuse kernelParams at once.
  auto values = std::make_shared<std::vector<std::vector<std::byte>>>();
  for (int i = 0; i < f->params.count; ++i) {
    const auto* p = static_cast<const std::byte*>(kernelParams[i]);
    if (!p) return fail(CUDA_ERROR_INVALID_VALUE, call, fmt::format("kernelParams[{}] is null", i));
    values->emplace_back(p, p + f->params.sizes[i]);
  }
  return enqueue(stream, {"kernel " + f->name, [f, values, gx, gy, gz, bx, by, bz] {
                            std::vector<void*> args;
                            for (auto& v : *values) args.push_back(v.data());
                            tessel_standin::Launch l{{gx, gy, gz}, {bx, by, bz}, args.data(), translate, f};
                            std::lock_guard<std::mutex> lock(kernelMutex());
                            f->run(&l);
                          }});
}
