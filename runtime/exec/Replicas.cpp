// The replica check; see Replicas.h.
#include "runtime/exec/Replicas.h"

#include "runtime/exec/PipelineRuntime.h"  // defines: pipelineReplicaMismatches
#include "runtime/exec/Sharding.h"
#include "runtime/numeric/Fnv1a.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>

namespace tessel::rt {
namespace {

bool persistent(const Buffer& b) { return b.kind == BufferKind::Parameter || b.kind == BufferKind::State; }

/// Reads every Parameter and State buffer once: its hash (replicaHashes) and, given `mesh`
/// and this rank's coordinates `at`, whether its padding is zero; `*badPadding` is then 1 +
/// the index of the first buffer whose padding is not (0 if none).
std::vector<uint64_t> scanPersistent(const ProgramExecutor& ex, const MeshLayout* mesh, const std::vector<int>& at,
                                     uint64_t* badPadding) {
  std::vector<uint64_t> out;
  std::vector<unsigned char> bytes;
  const Program& p = ex.program();
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    if (!persistent(p.buffers[i])) continue;
    bytes.resize(static_cast<size_t>(p.buffers[i].bytes()));
    ex.readBuffer(static_cast<int>(i), bytes.data());
    out.push_back(numeric::fnv1a(numeric::kFnv1aOffsetBasis, bytes.data(), bytes.size()));
    if (mesh && *badPadding == 0 && nonZeroPadding(p.buffers[i], *mesh, at, bytes.data()) >= 0) *badPadding = i + 1;
  }
  return out;
}

}  // namespace

std::vector<uint64_t> replicaHashes(const ProgramExecutor& ex) {
  uint64_t unused = 0;
  return scanPersistent(ex, nullptr, {}, &unused);
}

std::string replicaMismatches(const Program& program, const std::vector<std::vector<uint64_t>>& hashes) {
  const int world = static_cast<int>(hashes.size());
  // Without a mesh every buffer is replicated over the world: one axis spanning it.
  const std::vector<MeshAxis> mesh = program.mesh.empty() ? std::vector<MeshAxis>{{"world", world}} : program.mesh;
  const MeshLayout layout(mesh);
  if (layout.size() != world)
    throw std::runtime_error(fmt::format("--check-replicas: the program's mesh {} has {} ranks but the world has {}",
                                         layout.describe(), layout.size(), world));
  std::string out;
  int lines = 0;
  size_t h = 0;  // index among the persistent buffers
  for (const Buffer& b : program.buffers) {
    if (!persistent(b)) continue;
    const std::vector<std::string> axes = program.mesh.empty() ? std::vector<std::string>{} : replicaAxes(b, mesh);
    // Each group once: its members, keyed by its first (lowest) world rank.
    std::map<int, std::vector<int>> groups;
    for (int r = 0; r < world; ++r) {
      if (hashes[static_cast<size_t>(r)].size() <= h)
        throw std::runtime_error(fmt::format("--check-replicas: rank {} sent {} hashes for a program with more "
                                             "parameters and state buffers",
                                             r, hashes[static_cast<size_t>(r)].size()));
      std::vector<int> members = program.mesh.empty() ? layout.groupRanks(r, {"world"}) : layout.groupRanks(r, axes);
      groups.emplace(members.front(), std::move(members));
    }
    for (const auto& [first, members] : groups) {
      std::vector<int> differ;
      for (int r : members)
        if (hashes[static_cast<size_t>(r)][h] != hashes[static_cast<size_t>(first)][h]) differ.push_back(r);
      if (differ.empty()) continue;
      if (++lines <= 8)
        out += fmt::format("{}'{}' differs across its replica group over {}: rank(s) {} differ from rank {}",
                           out.empty() ? "" : "\n", b.name,
                           program.mesh.empty() ? std::string("the world")
                                                : fmt::format("[{}] (ranks {})", fmt::join(axes, ", "),
                                                              fmt::join(members, ", ")),
                           fmt::join(differ, ", "), first);
    }
    ++h;
  }
  if (lines > 8) out += fmt::format("\n... and {} more", lines - 8);
  return out;
}

void checkReplicas(const ProgramExecutor& ex, Communicator& world, int64_t step) {
  const int n = world.worldSize();
  if (n == 1) return;
  if (ex.program().pipeline) {  // stages hold different buffers: compared by name
    const std::string problems = pipelineReplicaMismatches(ex, world, step);
    if (!problems.empty()) throw std::runtime_error(fmt::format("replicas diverged after step {}: {}", step, problems));
    return;
  }
  // One more word per rank: 1 + the index of the first buffer whose padding is not zero.
  const Program& p = ex.program();
  uint64_t badPadding = 0;
  std::optional<MeshLayout> layout;
  if (!p.mesh.empty() && MeshLayout(p.mesh).size() == n) layout.emplace(p.mesh);
  std::vector<uint64_t> mine =
      scanPersistent(ex, layout ? &*layout : nullptr, layout ? layout->coordinates(world.rank()) : std::vector<int>{},
                     &badPadding);
  mine.push_back(badPadding);
  const int64_t words = 2 * static_cast<int64_t>(mine.size());  // each hash as two i32
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(n));
  world.allGather(mine.data(), all.data(), words * n, DType::I32, "replica_hash")->wait();
  std::vector<std::vector<uint64_t>> hashes(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    hashes[static_cast<size_t>(r)].assign(all.begin() + static_cast<ptrdiff_t>(r * mine.size()),
                                          all.begin() + static_cast<ptrdiff_t>((r + 1) * mine.size()));
    if (const uint64_t bad = hashes[static_cast<size_t>(r)].back(); bad != 0 && bad <= p.buffers.size())
      throw std::runtime_error(fmt::format("the padding of '{}' is not zero on rank {} after step {}: a padded "
                                           "element entered the math",
                                           p.buffers[bad - 1].name, r, step));
    hashes[static_cast<size_t>(r)].pop_back();
  }
  const std::string problems = replicaMismatches(ex.program(), hashes);
  if (!problems.empty())
    throw std::runtime_error(fmt::format("replicas diverged after step {}: {}", step, problems));
}

}  // namespace tessel::rt
