// The program format on disk: program.json (its encoding: ProgramJson.cpp) plus kernels.cpp
// and, for a program with CUDA kernels, kernels.cu (see Program.h). After decoding,
// loadProgram runs validateProgram and checks that every kernel symbol occurs in kernels.cpp
// (and kernels.cu).
//
// Writes go to "<file>.tmp.<pid>", are fsynced, renamed over the file, and the folder is
// fsynced, so a reader sees the old file or the new one, never half of one.
#include "runtime/exec/Program.h"

#include "runtime/exec/ProgramJson.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tessel::rt {

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Buffer::globalNumel() const {
  if (globalShape.empty()) return numel();
  int64_t n = 1;
  for (int64_t d : globalShape) n *= d;
  return n;
}

bool Buffer::sharded() const {
  for (const ShardDim& d : sharding)
    if (!d.axes.empty()) return true;
  return false;
}

const Function* Program::function(const std::string& name) const {
  for (const Function& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

int Program::findBuffer(const std::string& name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return static_cast<int>(i);
  return -1;
}

int collectiveKindIndex(const CollectiveStep& c) {
  switch (c.kind) {
    case CollectiveStep::Kind::AllGather: return 1;
    case CollectiveStep::Kind::ReduceScatter: return 2;
    case CollectiveStep::Kind::AllToAll: return 3;
    case CollectiveStep::Kind::SendRecv: return 4;
    default: return 0;
  }
}

std::vector<int> stepBuffers(const Step& step) {
  if (auto* k = std::get_if<KernelStep>(&step)) return k->args;
  if (auto* g = std::get_if<GemmStep>(&step)) {
    std::vector<int> ids{g->a, g->b, g->c};
    const GemmEpilogue& e = g->epilogue;
    for (int id : {e.bias, e.preActivation, e.residual, e.biasGradient})
      if (id >= 0) ids.push_back(id);
    return ids;
  }
  if (auto* c = std::get_if<CopyStep>(&step)) return {c->src, c->dst};
  const auto& col = std::get<CollectiveStep>(step);
  std::vector<int> ids = col.tensors;
  if (col.kind != CollectiveStep::Kind::SendRecv) ids.push_back(col.buffer);
  return ids;
}

std::map<int, std::pair<size_t, size_t>> tempLiveness(const Program& program, const Function& fn,
                                                      size_t outputsEnd) {
  std::map<int, std::pair<size_t, size_t>> live;
  auto touch = [&](int id, size_t step) {
    if (program.buffers[static_cast<size_t>(id)].kind != BufferKind::Temp) return;
    auto [it, fresh] = live.emplace(id, std::pair{step, step});
    if (!fresh) it->second.second = std::max(it->second.second, step);
  };
  for (size_t s = 0; s < fn.steps.size(); ++s)
    for (int id : stepBuffers(fn.steps[s])) touch(id, s);
  for (int id : fn.outputs) touch(id, outputsEnd);
  // In-place buckets: the bucket holds its views' bytes from the start to the wait.
  for (size_t s = 0; s < fn.steps.size(); ++s) {
    const auto* c = std::get_if<CollectiveStep>(&fn.steps[s]);
    if (!c || !c->inPlace || c->movesShards() || c->kind == CollectiveStep::Kind::SendRecv) continue;
    const bool start = c->kind == CollectiveStep::Kind::AllReduceStart;
    for (int id : c->tensors) {
      auto it = live.find(id);
      if (it == live.end()) continue;
      auto& [first, last] = it->second;
      if (start ? first >= s : last <= s) {
        live.erase(it);
      } else if (start) {
        last = std::min(last, s - 1);
      } else {
        first = std::max(first, s + 1);
      }
    }
  }
  return live;
}

const char* gemmBackendName(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::OpenBlas: return "openblas";
    case GemmBackend::OneDnn: return "onednn";
    default: return "default";
  }
}

const char* collectiveKindName(int index) {
  static constexpr const char* kNames[kCollectiveKinds] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                                   "send_recv"};
  return index >= 0 && index < kCollectiveKinds ? kNames[index] : "?";
}

int64_t Program::arenaBytes() const {
  int64_t bytes = 0;
  for (const Function& f : functions) bytes = std::max(bytes, f.arenaBytes);
  return bytes;
}

namespace {

namespace fs = std::filesystem;

/// Every kernel symbol must be defined by the saved source (a substring test: the symbol is
/// an identifier, so a hit is its definition or a mention; a miss is certainly an error).
void checkKernelSource(const Program& p, const std::string& context) {
  for (size_t f = 0; f < p.functions.size(); ++f)
    for (size_t s = 0; s < p.functions[f].steps.size(); ++s)
      if (auto* k = std::get_if<KernelStep>(&p.functions[f].steps[s])) {
        if (p.kernelSource.find(k->symbol) == std::string::npos)
          throw std::runtime_error(fmt::format("{}: functions[{}].steps[{}].symbol: '{}' is not in kernels.cpp",
                                               context, f, s, k->symbol));
        if (!p.cudaSource.empty() && p.cudaSource.find(k->symbol) == std::string::npos)
          throw std::runtime_error(fmt::format("{}: functions[{}].steps[{}].symbol: '{}' is not in kernels.cu",
                                               context, f, s, k->symbol));
      }
}

[[noreturn]] void ioFail(const std::string& path, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}: {}", path, what, std::strerror(errno)));
}

/// Writes `content` to `path` through "<path>.tmp.<pid>": write, fsync, rename, fsync folder.
void writeAtomically(const fs::path& path, const std::string& content) {
  std::string tmp = fmt::format("{}.tmp.{}", path.string(), ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) ioFail(tmp, "cannot create");
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      errno = saved;
      ioFail(tmp, "write failed");
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    ioFail(tmp, "fsync/close failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    ioFail(path.string(), "rename failed");
  }
  fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // best effort: makes the rename itself durable
    ::close(dfd);
  }
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ioFail(path.string(), "cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) ioFail(path.string(), "read failed");
  return s.str();
}

}  // namespace

void saveProgram(const Program& program, const std::string& dir) {
  fs::path json = fs::path(dir) / "program.json", kernels = fs::path(dir) / "kernels.cpp";
  fs::path cuda = fs::path(dir) / "kernels.cu";
  validateProgram(program, json.string() + " (saving)");
  checkKernelSource(program, json.string() + " (saving)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create folder: {}", dir, ec.message()));
  writeAtomically(kernels, program.kernelSource);
  if (!program.cudaSource.empty()) {
    writeAtomically(cuda, program.cudaSource);
  } else if (fs::exists(cuda, ec)) {
    fs::remove(cuda, ec);  // a stale kernels.cu of an earlier CUDA program in this folder
  }
  writeAtomically(json, encodeProgramJson(program));
}

Program loadProgram(const std::string& dir) {
  fs::path path = fs::path(dir) / "program.json";
  std::string file = path.string();
  std::string text = readFile(path);
  int64_t version = 0;
  Program p = decodeProgramJson(text, file, version);
  const bool cuda = programFormatHasCuda(version);
  p.kernelSource = readFile(fs::path(dir) / "kernels.cpp");
  if (cuda) {
    p.cudaSource = readFile(fs::path(dir) / "kernels.cu");
    if (p.cudaSource.empty())
      throw std::runtime_error(fmt::format("{}: empty, but program.json is version {} (CUDA kernels)",
                                           (fs::path(dir) / "kernels.cu").string(), version));
  }
  validateProgram(p, file);
  checkKernelSource(p, (fs::path(dir) / "kernels.cpp").string());
  return p;
}

}  // namespace tessel::rt
