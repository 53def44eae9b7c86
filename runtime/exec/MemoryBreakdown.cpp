// A program's memory per rank; see MemoryBreakdown.h.
#include "runtime/exec/MemoryBreakdown.h"

#include "runtime/exec/CpuGemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace tessel::rt {
namespace {

enum class TempRole { Activation, Gathered, Communication, Gradient };

/// The role of every Temp (by buffer id; others Activation, unused).
std::vector<TempRole> tempRoles(const Program& p) {
  std::vector<TempRole> role(p.buffers.size(), TempRole::Activation);
  auto kind = [&](int id) { return p.buffers[static_cast<size_t>(id)].kind; };
  auto isTemp = [&](int id) { return kind(id) == BufferKind::Temp; };
  for (const Function& f : p.functions) {
    // The step that first names each temp: the one that produces it.
    std::unordered_map<int, size_t> producer;
    for (size_t s = 0; s < f.steps.size(); ++s)
      for (int id : stepBuffers(f.steps[s]))
        if (isTemp(id)) producer.emplace(id, s);
    auto readsParameter = [&](size_t s) {
      for (int id : stepBuffers(f.steps[s]))
        if (kind(id) == BufferKind::Parameter) return true;
      return false;
    };
    // Temps copied into a parameter: a parameter's new value (an update step's output).
    std::map<int, int> copiedInto;
    for (const Step& step : f.steps)
      if (auto* c = std::get_if<CopyStep>(&step); c && isTemp(c->src) && kind(c->dst) == BufferKind::Parameter)
        copiedInto[c->src] = c->dst;
    for (size_t s = 0; s < f.steps.size(); ++s) {
      const Step& step = f.steps[s];
      if (auto* c = std::get_if<CollectiveStep>(&step)) {
        if (c->buffer >= 0 && isTemp(c->buffer)) role[static_cast<size_t>(c->buffer)] = TempRole::Communication;
        if (c->kind == CollectiveStep::Kind::AllGather && c->tensors.size() == 2 && isTemp(c->tensors[1])) {
          const int in = c->tensors[0];
          const bool fromParameter = kind(in) == BufferKind::Parameter ||
                                     (isTemp(in) && producer.count(in) && readsParameter(producer.at(in)));
          if (fromParameter) role[static_cast<size_t>(c->tensors[1])] = TempRole::Gathered;
        }
        continue;
      }
      const auto* k = std::get_if<KernelStep>(&step);
      if (!k) continue;
      // An update step reads optimizer state, or writes a parameter's new value. Its gradient
      // operand has the size of the parameter or of its state (a ZeRO-1/2 block).
      bool update = false;
      std::vector<int64_t> parameterSizes;
      for (int id : k->args) {
        const Buffer& b = p.buffers[static_cast<size_t>(id)];
        const bool state = b.kind == BufferKind::State && persistentRole(b) == MemoryRole::OptimizerState;
        update = update || state || (isTemp(id) && copiedInto.count(id));
        if (state || b.kind == BufferKind::Parameter) parameterSizes.push_back(b.numel());
      }
      if (!update) continue;
      // A block sliced from a larger parameter (ZeRO-1/2's block of the parameter) is not a
      // gradient, though it has the state's size.
      auto slicedFromParameter = [&](int id) {
        for (int in : stepBuffers(f.steps[producer.at(id)])) {
          const Buffer& b = p.buffers[static_cast<size_t>(in)];
          if (b.kind == BufferKind::Parameter && b.numel() > p.buffers[static_cast<size_t>(id)].numel()) return true;
        }
        return false;
      };
      for (int id : k->args) {
        if (!isTemp(id) || producer.at(id) == s || copiedInto.count(id) || slicedFromParameter(id))
          continue;  // an output, not an operand; or the parameter's own block
        const int64_t n = p.buffers[static_cast<size_t>(id)].numel();
        if (std::find(parameterSizes.begin(), parameterSizes.end(), n) != parameterSizes.end() &&
            role[static_cast<size_t>(id)] == TempRole::Activation)
          role[static_cast<size_t>(id)] = TempRole::Gradient;
      }
    }
  }
  return role;
}

void add(ArenaContents& a, TempRole role, int64_t bytes) {
  switch (role) {
    case TempRole::Gathered: a.gatheredParameters += bytes; break;
    case TempRole::Communication: a.communication += bytes; break;
    case TempRole::Gradient: a.gradients += bytes; break;
    case TempRole::Activation: a.activations += bytes; break;
  }
}

/// The slot of a state buffer's name: what follows its last ':' ("exp_avg"), or "".
std::string slotOf(const std::string& name) {
  const size_t colon = name.rfind(':');
  return colon == std::string::npos ? std::string() : name.substr(colon + 1);
}

}  // namespace

const char* memoryRoleName(MemoryRole role) {
  static const char* names[kMemoryRoles] = {"parameters", "gradients", "optimizer_state",
                                            "inputs",     "gemm_scratch", "arena"};
  return names[static_cast<size_t>(role)];
}

MemoryRole persistentRole(const Buffer& b) {
  switch (b.kind) {
    case BufferKind::Parameter: return MemoryRole::Parameters;
    case BufferKind::State:
      return slotOf(b.name).find("grad") != std::string::npos ? MemoryRole::Gradients : MemoryRole::OptimizerState;
    case BufferKind::Input:
    case BufferKind::Coordinate: return MemoryRole::Inputs;
    case BufferKind::Temp: break;
  }
  throw std::logic_error(fmt::format("persistentRole: '{}' is a temporary (it lives in the arena)", b.name));
}

GemmScratch gemmScratchOf(const Program& program) {
  GemmScratch s;
  // Only the OpenBLAS path widens bf16 into scratch; oneDNN runs bf16 natively (CpuGemm.h).
  auto dtype = [&](int id) { return program.buffers[static_cast<size_t>(id)].dtype; };
  for (const Function& f : program.functions)
    for (const Step& step : f.steps)
      if (auto* g = std::get_if<GemmStep>(&step); g && g->backend != GemmBackend::OneDnn) {
        const GemmScratch need = gemmScratchFor(*g, GemmDTypes{dtype(g->a), dtype(g->b), dtype(g->c)});
        s.a = std::max(s.a, need.a);
        s.b = std::max(s.b, need.b);
        s.c = std::max(s.c, need.c);
      }
  return s;
}

int64_t MemoryBreakdown::total() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

MemoryRole MemoryBreakdown::largest() const {
  return static_cast<MemoryRole>(std::max_element(bytes.begin(), bytes.end()) - bytes.begin());
}

MemoryBreakdown memoryBreakdown(const Program& program) {
  MemoryBreakdown m;
  for (const Buffer& b : program.buffers) {
    if (b.kind == BufferKind::Parameter) m.parameterElements += b.globalNumel();
    if (b.kind != BufferKind::Temp) m.bytes[static_cast<size_t>(persistentRole(b))] += alignedBytes(b.bytes());
  }
  m.bytes[static_cast<size_t>(MemoryRole::GemmScratch)] = gemmScratchOf(program).bytes();
  m.bytes[static_cast<size_t>(MemoryRole::Arena)] = program.arenaBytes();

  const std::vector<TempRole> role = tempRoles(program);
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (program.buffers[id].kind == BufferKind::Temp && role[id] == TempRole::Gradient)
      m.gradientTemporaries += alignedBytes(program.buffers[id].bytes());
  // The live temporaries at every step (ProgramCheck's liveness: from the first step naming
  // a temp to the last; a function output to the end), by role; keep the step with the most.
  int64_t best = -1;
  for (const Function& f : program.functions) {
    const auto live = tempLiveness(program, f, f.steps.empty() ? 0 : f.steps.size() - 1);
    std::vector<std::array<int64_t, 4>> delta(f.steps.size() + 1, std::array<int64_t, 4>{});
    for (const auto& [id, range] : live) {
      const int64_t bytes = alignedBytes(program.buffers[static_cast<size_t>(id)].bytes());
      const auto r = static_cast<size_t>(role[static_cast<size_t>(id)]);
      delta[range.first][r] += bytes;
      delta[range.second + 1][r] -= bytes;
    }
    std::array<int64_t, 4> now{};
    for (size_t s = 0; s < f.steps.size(); ++s) {
      for (size_t r = 0; r < 4; ++r) now[r] += delta[s][r];
      const int64_t sum = now[0] + now[1] + now[2] + now[3];
      if (sum > best) {
        best = sum;
        m.peak = {};
        for (size_t r = 0; r < 4; ++r) add(m.peak, static_cast<TempRole>(r), now[r]);
        m.peakFunction = f.name;
        m.peakStep = static_cast<int64_t>(s);
      }
    }
  }
  return m;
}

int64_t paddingBytes(const Program& program, int rank) {
  std::vector<int> coordinates(program.mesh.size(), 0);
  for (size_t i = program.mesh.size(); i-- > 0;) {
    coordinates[i] = rank % program.mesh[i].size;
    rank /= program.mesh[i].size;
  }
  auto axisCoordinate = [&](const std::string& name, int64_t& size) {
    for (size_t i = 0; i < program.mesh.size(); ++i)
      if (program.mesh[i].name == name) {
        size = program.mesh[i].size;
        return static_cast<int64_t>(coordinates[i]);
      }
    throw std::runtime_error(fmt::format("paddingBytes: axis '{}' is not in the program's mesh", name));
  };
  int64_t padding = 0;
  for (const Buffer& b : program.buffers) {
    if (b.sharding.empty() || b.globalShape.size() != b.shape.size()) continue;
    int64_t real = 1;
    for (size_t d = 0; d < b.shape.size(); ++d) {
      const ShardDim& s = b.sharding[d];
      int64_t part = 0;  // the row-major index of this rank's coordinates on s.axes
      for (const std::string& axis : s.axes) {
        int64_t size = 1;
        const int64_t c = axisCoordinate(axis, size);
        part = part * size + c;
      }
      const int64_t local = b.shape[d];
      real *= s.padding == 0 ? local : std::clamp(b.globalShape[d] - part * local, int64_t{0}, local);
    }
    padding += (b.numel() - real) * dtypeBytes(b.dtype);
  }
  return padding;
}

nlohmann::json memoryJson(const MemoryBreakdown& m) {
  nlohmann::json j;
  j["total"] = m.total();
  for (int r = 0; r < kMemoryRoles; ++r) j[memoryRoleName(static_cast<MemoryRole>(r))] = m.bytes[static_cast<size_t>(r)];
  j["arena_peak"] = {{"function", m.peakFunction},
                     {"step", m.peakStep},
                     {"gathered_parameters", m.peak.gatheredParameters},
                     {"communication", m.peak.communication},
                     {"gradients", m.peak.gradients},
                     {"activations", m.peak.activations},
                     {"fragmentation", m.get(MemoryRole::Arena) - m.peak.total()}};
  j["largest"] = memoryRoleName(m.largest());
  j["gradient_temporaries"] = m.gradientTemporaries;
  j["parameter_elements"] = m.parameterElements;
  return j;
}

std::string deviceMemoryRefusal(const MemoryBreakdown& m, int64_t budget, int rank) {
  if (m.total() <= budget) return "";
  const MemoryRole big = m.largest();
  auto bytes = [](int64_t n) { return fmt::format("{} bytes ({})", n, formatBytes(static_cast<double>(n))); };
  return fmt::format("rank {} needs {}, more than the {} of --device-memory, {} short; its largest part is the {}, {}",
                     rank, bytes(m.total()), bytes(budget), bytes(m.total() - budget), memoryRoleName(big),
                     bytes(m.get(big)));
}

std::string formatBytes(double bytes) {
  if (bytes >= 0x1p30) return fmt::format("{:.2f} GiB, {:.2f} GB", bytes / 0x1p30, bytes / 1e9);
  return fmt::format("{:.2f} MiB, {:.2f} MB", bytes / 0x1p20, bytes / 1e6);
}

std::string explainMemory(const Program& program, const MemoryBreakdown& m) {
  auto mib = [](int64_t b) { return fmt::format("{} bytes ({:.3f} MiB)", b, static_cast<double>(b) / 0x1p20); };
  std::string out = fmt::format("memory per rank (every byte the executor allocates): {} bytes ({})\n", m.total(),
                                formatBytes(static_cast<double>(m.total())));
  for (int r = 0; r < kMemoryRoles; ++r)
    out += fmt::format("  {:<16} {}\n", memoryRoleName(static_cast<MemoryRole>(r)), mib(m.bytes[static_cast<size_t>(r)]));
  if (m.peakStep >= 0)
    out += fmt::format(
        "  arena at its peak (@{} step {}): gathered parameters {}, communication buffers {}, gradients {}, "
        "activations and other temporaries {}, unused by the placement {}\n",
        m.peakFunction, m.peakStep, m.peak.gatheredParameters, m.peak.communication, m.peak.gradients,
        m.peak.activations, m.get(MemoryRole::Arena) - m.peak.total());
  out += fmt::format("  gradient temporaries of one optimizer step (arena, summed): {}\n", mib(m.gradientTemporaries));
  int world = 1;
  for (const MeshAxis& a : program.mesh) world *= a.size;
  std::string pads;
  bool any = false;
  for (int r = 0; r < world && r < 64; ++r) {
    const int64_t p = paddingBytes(program, r);
    any = any || p > 0;
    pads += fmt::format("{}rank {}: {}", r == 0 ? "" : ", ", r, p);
  }
  if (any)
    out += fmt::format("  every rank allocates the same bytes; of them, padding of uneven shards (no global "
                       "element): {}{}\n",
                       pads, world > 64 ? ", ..." : "");
  return out;
}

}  // namespace tessel::rt
