// The sharded buffers' layout; see Sharding.h.
#include "runtime/exec/Sharding.h"

#include "runtime/Init.h"
#include "runtime/numeric/BFloat16.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace tessel::rt {

namespace {

/// Where dimension d of `b` lies in the global tensor on the rank at `coordinates` (the layout
/// rule of Program.h ShardDim): local index i is in block j = i / l (l = local / blocks) at
/// offset i % l, and this rank's part p of block j starts at j * g + p * l (g = global /
/// blocks). Padding (only in an unblocked dimension: g = global) lies past the global end.
struct DimLayout {
  int64_t part = 0, local = 1, global = 1, blocks = 1, l = 1, g = 1;
  /// The global index of local index i, or >= global for padding.
  int64_t at(int64_t i) const { return (i / l) * g + part * l + i % l; }
};

DimLayout dimLayout(const Buffer& b, const MeshLayout& mesh, const std::vector<int>& coordinates, size_t d) {
  const ShardDim s = b.sharding.empty() ? ShardDim{} : b.sharding[d];
  DimLayout out;
  for (const std::string& axis : s.axes) {
    const int a = mesh.axisIndex(axis);
    out.part = out.part * mesh.axes()[static_cast<size_t>(a)].size + coordinates.at(static_cast<size_t>(a));
  }
  out.local = b.shape[d];
  out.global = b.globalShape.empty() ? out.local : b.globalShape[d];
  out.blocks = s.blocks;
  out.l = out.local / s.blocks;
  out.g = out.global / s.blocks;
  return out;
}

/// Row-major composition of one more dimension: `index` holds the flat global indices over the
/// dimensions so far (-1: padding), in local order; each is multiplied by this dimension's
/// global size and offset by where each of its local indices lies.
void appendDimension(std::vector<int64_t>& index, const DimLayout& dim) {
  std::vector<int64_t> next;
  next.reserve(index.size() * static_cast<size_t>(dim.local));
  for (int64_t base : index)
    for (int64_t i = 0; i < dim.local; ++i) {
      const int64_t at = dim.at(i);
      next.push_back(base < 0 || at >= dim.global ? -1 : base * dim.global + at);
    }
  index = std::move(next);
}

}  // namespace

std::vector<int64_t> globalIndices(const Buffer& b, const MeshLayout& mesh, const std::vector<int>& coordinates) {
  std::vector<int64_t> out{0};
  for (size_t d = 0; d < b.shape.size(); ++d) appendDimension(out, dimLayout(b, mesh, coordinates, d));
  return out;
}

int64_t nonZeroPadding(const Buffer& b, const MeshLayout& mesh, const std::vector<int>& coordinates,
                       const void* data) {
  if (b.dtype == DType::I32 ||
      std::none_of(b.sharding.begin(), b.sharding.end(), [](const ShardDim& d) { return d.padding > 0; }))
    return -1;
  const std::vector<int64_t> index = globalIndices(b, mesh, coordinates);
  for (size_t i = 0; i < index.size(); ++i) {
    if (index[i] >= 0) continue;
    const float v = b.dtype == DType::BF16 ? numeric::floatFromBF16(static_cast<const uint16_t*>(data)[i])
                                           : static_cast<const float*>(data)[i];
    if (v != 0.0f) return static_cast<int64_t>(i);
  }
  return -1;
}

int32_t coordinateValue(const Buffer& b, const MeshLayout* mesh, const std::vector<int>& coordinates) {
  if (!mesh) return 0;
  int64_t index = 0;
  for (const std::string& axis : b.coordinateAxes) {
    int a = mesh->axisIndex(axis);
    index = index * mesh->axes()[static_cast<size_t>(a)].size + coordinates[static_cast<size_t>(a)];
  }
  return static_cast<int32_t>(index * b.coordinateStride);
}

void initParameterShard(const Buffer& b, const MeshLayout* mesh, const std::vector<int>& coordinates,
                        uint64_t seed, float* out) {
  const InitKind kind = b.init == "normal" ? InitKind::Normal : b.init == "zeros" ? InitKind::Zeros : InitKind::Ones;
  if (!b.sharded()) {
    initParameter(out, b.numel(), kind, b.stddev, seed, b.name);
    return;
  }
  if (!mesh)
    throw std::runtime_error(fmt::format("parameter '{}' is sharded, but no device mesh was given to place this "
                                         "rank's shard", b.name));
  // The last dimension's local indices form, per block, one contiguous run of global
  // indices (its tail past the global end is padding), so each run is generated on its own
  // (initParameterRange) and nothing global is built: O(local) work and memory.
  const size_t last = b.shape.size() - 1;
  std::vector<int64_t> rows{0};  // flat global index over the leading dimensions, per local row
  for (size_t d = 0; d < last; ++d) appendDimension(rows, dimLayout(b, *mesh, coordinates, d));
  const DimLayout dim = dimLayout(b, *mesh, coordinates, last);
  float* o = out;
  for (int64_t row : rows)
    for (int64_t j = 0; j < dim.blocks; ++j, o += dim.l) {
      const int64_t start = dim.at(j * dim.l);
      const int64_t valid = row < 0 ? 0 : std::clamp<int64_t>(dim.global - start, 0, dim.l);
      if (valid > 0) initParameterRange(o, row * dim.global + start, valid, kind, b.stddev, seed, b.name);
      std::fill(o + valid, o + dim.l, 0.0f);
    }
}

std::vector<std::string> replicaAxes(const Buffer& b, const std::vector<MeshAxis>& mesh) {
  std::vector<std::string> out;
  for (const MeshAxis& a : mesh) {
    bool splits = false;
    for (const ShardDim& d : b.sharding)
      for (const std::string& x : d.axes) splits = splits || x == a.name;
    if (!splits) out.push_back(a.name);
  }
  return out;
}

std::string explainShardings(const Program& program) {
  if (program.mesh.empty() || std::none_of(program.buffers.begin(), program.buffers.end(),
                   [](const Buffer& b) { return b.kind == BufferKind::Parameter && b.sharded(); }))
    return "";
  const MeshLayout layout(program.mesh);
  size_t width = 0;
  for (const Buffer& b : program.buffers)
    if (b.kind == BufferKind::Parameter) width = std::max(width, b.name.size());
  std::string out = fmt::format("parameters on the mesh {}:\n", layout.describe());
  for (const Buffer& b : program.buffers) {
    if (b.kind != BufferKind::Parameter) continue;
    std::string where = "replicated";
    if (b.sharded()) {
      std::vector<std::string> dims;
      for (size_t d = 0; d < b.sharding.size(); ++d)
        if (!b.sharding[d].axes.empty())
          dims.push_back(fmt::format(
              "dim {} over [{}]{}{}", d, fmt::join(b.sharding[d].axes, ", "),
              b.sharding[d].blocks > 1 ? fmt::format(" in {} blocks", b.sharding[d].blocks) : std::string(),
              b.sharding[d].padding > 0 ? fmt::format(" padded to {}", b.globalShape[d] + b.sharding[d].padding)
                                        : std::string()));
      where = fmt::format("of [{}], {}", fmt::join(b.globalShape, ", "), fmt::join(dims, ", "));
    }
    out += fmt::format("  {:<{}}  local [{}] {}; replicas over [{}]\n", b.name, width, fmt::join(b.shape, ", "), where,
                       fmt::join(replicaAxes(b, program.mesh), ", "));
  }
  return out;
}

MeshLayout meshLayoutOf(const Program& program) {
  if (program.mesh.empty()) throw std::runtime_error("the program has no device mesh");
  return MeshLayout(program.mesh);
}

std::unique_ptr<DeviceMesh> deviceMeshFor(const Program& program, Communicator& world) {
  if (program.mesh.empty()) return nullptr;
  return std::make_unique<DeviceMesh>(MeshLayout(program.mesh), world);
}

}  // namespace tessel::rt
