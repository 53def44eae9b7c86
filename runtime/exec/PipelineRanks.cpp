// The rank-level functions under pipeline parallelism (--export-params, --check-replicas);
// see PipelineRuntime.h. Ranks of different stages hold different buffers, so what they
// exchange is keyed by name, and every message has a size the receiver learns first.
#include "runtime/exec/PipelineRuntime.h"

#include "runtime/exec/Sharding.h"
#include "runtime/numeric/Fnv1a.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

namespace tessel::rt {
namespace {

/// A flat message of i32 words: integers, strings and f32 values appended in order and read
/// back in the same order (what the leads send to rank 0, what every rank all-gathers).
class Words {
 public:
  std::vector<int32_t> data;
  size_t at = 0;  // read position

  void put(int64_t v) {
    data.push_back(static_cast<int32_t>(static_cast<uint64_t>(v) & 0xffffffffu));
    data.push_back(static_cast<int32_t>(static_cast<uint64_t>(v) >> 32));
  }
  void put(const std::string& s) {
    put(static_cast<int64_t>(s.size()));
    const size_t first = data.size();
    data.resize(first + (s.size() + 3) / 4, 0);
    std::memcpy(data.data() + first, s.data(), s.size());
  }
  void put(const std::vector<float>& v) {
    put(static_cast<int64_t>(v.size()));
    const size_t first = data.size();
    data.resize(first + v.size());
    std::memcpy(data.data() + first, v.data(), v.size() * sizeof(float));
  }
  int64_t integer() {
    need(2);
    const uint64_t lo = static_cast<uint32_t>(data[at]), hi = static_cast<uint32_t>(data[at + 1]);
    at += 2;
    return static_cast<int64_t>(lo | (hi << 32));
  }
  std::string string() {
    const auto n = static_cast<size_t>(integer());
    need((n + 3) / 4);
    std::string s(reinterpret_cast<const char*>(data.data() + at), n);
    at += (n + 3) / 4;
    return s;
  }
  std::vector<float> floats() {
    const auto n = static_cast<size_t>(integer());
    need(n);
    std::vector<float> v(n);
    std::memcpy(v.data(), data.data() + at, n * sizeof(float));
    at += n;
    return v;
  }

 private:
  void need(size_t words) const {
    if (at + words > data.size())
      throw std::runtime_error("pipeline exchange: a truncated message (the ranks run different programs?)");
  }
};

/// The mesh of `p` (which must have the world's size) and the pipeline axis' index.
MeshLayout pipelineLayout(const Program& p, int world, const char* flag) {
  MeshLayout layout(p.mesh);
  if (layout.size() != world)
    throw std::runtime_error(fmt::format("{}: the program's mesh {} has {} ranks but the world has {}", flag,
                                         layout.describe(), layout.size(), world));
  return layout;
}

/// The world rank of stage `stage`'s lead: pipeline coordinate `stage`, every other 0.
int stageLead(const MeshLayout& layout, int ppIndex, int stage) {
  std::vector<int> at(layout.axes().size(), 0);
  at[static_cast<size_t>(ppIndex)] = stage;
  return layout.rankAt(at);
}

}  // namespace

SafeTensorsFile gatherPipelineParameters(const ProgramExecutor& ex, Communicator& world) {
  const Program& p = ex.program();
  const PipelineInfo& pl = p.pipeline.value();
  const MeshLayout layout = pipelineLayout(p, world.worldSize(), "--export-params");
  const int rank = world.rank();
  const int pp = layout.axisIndex(pl.axis);
  const std::vector<int> here = layout.coordinates(rank);
  std::vector<std::string> stageAxes;  // every axis but the pipeline's: the ranks of one stage
  for (const MeshAxis& a : p.mesh)
    if (a.name != pl.axis) stageAxes.push_back(a.name);
  const int lead = stageLead(layout, pp, here[static_cast<size_t>(pp)]);
  const std::vector<int> members = layout.groupRanks(rank, stageAxes);

  // 1. Within the stage: the first replica of every shard sends it to the lead, which
  //    reassembles each parameter in buffer order (the rule of gatherParameters).
  struct Gathered {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> values;
  };
  std::vector<Gathered> mine;  // the lead's: this stage's parameters, global
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = p.buffers[i];
    if (b.kind != BufferKind::Parameter) continue;
    std::vector<std::string> replicas = replicaAxes(b, p.mesh);
    std::erase(replicas, pl.axis);
    auto firstReplica = [&](int r) {
      const std::vector<int> at = layout.coordinates(r);
      return std::all_of(replicas.begin(), replicas.end(),
                         [&](const std::string& a) { return at[static_cast<size_t>(layout.axisIndex(a))] == 0; });
    };
    std::vector<float> shard(static_cast<size_t>(b.numel()));
    ex.readBuffer(static_cast<int>(i), shard.data());
    const std::string name = "export " + b.name;
    if (rank != lead) {
      if (firstReplica(rank)) world.send(shard.data(), b.numel(), DType::F32, lead, name)->wait();
      continue;
    }
    std::vector<float> global(static_cast<size_t>(b.globalNumel()));
    std::vector<float> theirs(shard.size());
    for (int r : members) {
      if (!firstReplica(r)) continue;
      if (r != rank) world.recv(theirs.data(), b.numel(), DType::F32, r, name)->wait();
      const std::vector<float>& values = r == rank ? shard : theirs;
      const std::vector<int64_t> index = globalIndices(b, layout, layout.coordinates(r));
      for (size_t k = 0; k < index.size(); ++k)
        if (index[k] >= 0) global[static_cast<size_t>(index[k])] = values[k];  // padding is dropped
    }
    mine.push_back({b.name, b.globalShape.empty() ? b.shape : b.globalShape, std::move(global)});
  }

  // 2. The leads of stages 1, 2, ... send their stage's parameters to rank 0 (stage 0's lead),
  //    which keeps the first stage's copy of a name present on several (a tied parameter).
  SafeTensorsFile file;
  file.metadata["format"] = "pt";
  if (rank != lead) return file;
  if (rank != 0) {
    Words w;
    w.put(static_cast<int64_t>(mine.size()));
    for (const Gathered& g : mine) {
      w.put(g.name);
      w.put(static_cast<int64_t>(g.shape.size()));
      for (int64_t d : g.shape) w.put(d);
      w.put(g.values);
    }
    int64_t size = static_cast<int64_t>(w.data.size());
    world.send(&size, 2, DType::I32, 0, "export stage size")->wait();
    world.send(w.data.data(), size, DType::I32, 0, "export stage parameters")->wait();
    return file;
  }
  for (const Gathered& g : mine) file.tensors.emplace(g.name, StTensor::fromF32(g.shape, g.values));
  for (int s = 1; s < pl.stages; ++s) {
    const int from = stageLead(layout, pp, s);
    int64_t size = 0;
    world.recv(&size, 2, DType::I32, from, "export stage size")->wait();
    Words w;
    w.data.resize(static_cast<size_t>(size));
    world.recv(w.data.data(), size, DType::I32, from, "export stage parameters")->wait();
    const int64_t count = w.integer();
    for (int64_t k = 0; k < count; ++k) {
      std::string name = w.string();
      std::vector<int64_t> shape(static_cast<size_t>(w.integer()));
      for (int64_t& d : shape) d = w.integer();
      std::vector<float> values = w.floats();
      if (!file.tensors.count(name)) file.tensors.emplace(name, StTensor::fromF32(shape, values));
    }
  }
  return file;
}

std::string pipelineReplicaMismatches(const ProgramExecutor& ex, Communicator& world, int64_t step) {
  const Program& p = ex.program();
  const int n = world.worldSize();
  const MeshLayout layout = pipelineLayout(p, n, "--check-replicas");
  const int rank = world.rank();
  const std::vector<int> here = layout.coordinates(rank);
  // This rank's record: the first buffer whose padding is not zero (1 + its entry, 0: none),
  // then per Parameter and State buffer its name, its group's lowest rank and its hash.
  Words w;
  int64_t badPadding = 0, entries = 0;
  Words body;
  std::vector<unsigned char> bytes;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = p.buffers[i];
    if (b.kind != BufferKind::Parameter && b.kind != BufferKind::State) continue;
    bytes.resize(static_cast<size_t>(b.bytes()));
    ex.readBuffer(static_cast<int>(i), bytes.data());
    ++entries;
    if (badPadding == 0 && nonZeroPadding(b, layout, here, bytes.data()) >= 0) badPadding = entries;
    body.put(b.name);
    body.put(static_cast<int64_t>(layout.groupRanks(rank, replicaAxes(b, p.mesh)).front()));
    body.put(static_cast<int64_t>(numeric::fnv1a(numeric::kFnv1aOffsetBasis, bytes.data(), bytes.size())));
  }
  w.put(badPadding);
  w.put(entries);
  w.data.insert(w.data.end(), body.data.begin(), body.data.end());
  // Records differ in length across stages: pad each to the longest.
  int32_t longest = static_cast<int32_t>(w.data.size());
  world.allReduce(&longest, 1, DType::I32, ReduceOp::Max, "replica_hash size")->wait();
  w.data.resize(static_cast<size_t>(longest), 0);
  std::vector<int32_t> all(static_cast<size_t>(longest) * static_cast<size_t>(n));
  world.allGather(w.data.data(), all.data(), static_cast<int64_t>(all.size()), DType::I32, "replica_hash")->wait();

  // (name, group's lowest rank) -> (rank, hash) of every holder, ranks ascending.
  std::map<std::pair<std::string, int64_t>, std::vector<std::pair<int, int64_t>>> groups;
  for (int r = 0; r < n; ++r) {
    Words theirs;
    theirs.data.assign(all.begin() + static_cast<ptrdiff_t>(r) * longest,
                       all.begin() + static_cast<ptrdiff_t>(r + 1) * longest);
    const int64_t bad = theirs.integer(), count = theirs.integer();
    for (int64_t k = 1; k <= count; ++k) {
      std::string name = theirs.string();
      const int64_t first = theirs.integer(), hash = theirs.integer();
      if (k == bad)
        throw std::runtime_error(fmt::format("the padding of '{}' is not zero on rank {} after step {}: a padded "
                                             "element entered the math", name, r, step));
      groups[{std::move(name), first}].emplace_back(r, hash);
    }
  }
  std::string out;
  int lines = 0;
  const int pp = layout.axisIndex(p.pipeline.value().axis);
  for (const auto& [key, holders] : groups) {
    std::vector<int> differ, ranks;
    std::set<int> stages;
    for (const auto& [r, hash] : holders) {
      ranks.push_back(r);
      stages.insert(layout.coordinates(r)[static_cast<size_t>(pp)]);
      if (hash != holders.front().second) differ.push_back(r);
    }
    if (differ.empty()) continue;
    if (++lines <= 8)
      out += fmt::format("{}'{}' differs across its replica group (ranks {}{}): rank(s) {} differ from rank {}",
                         out.empty() ? "" : "\n", key.first, fmt::join(ranks, ", "),
                         stages.size() > 1 ? fmt::format(", tied across stages {}", fmt::join(stages, ", ")) : "",
                         fmt::join(differ, ", "), holders.front().first);
  }
  if (lines > 8) out += fmt::format("\n... and {} more", lines - 8);
  return out;
}

}  // namespace tessel::rt
