// checkProgramMesh: the mesh, the sharded buffers and the collectives' axes; see Sharding.h.
#include "runtime/exec/Sharding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <map>
#include <set>
#include <stdexcept>

namespace tessel::rt {
namespace {

class MeshChecker {
 public:
  MeshChecker(const Program& p, const std::string& context) : p_(p), context_(context) {}

  void run() {
    int64_t ranks = 1;
    for (size_t i = 0; i < p_.mesh.size(); ++i) {
      const MeshAxis& a = p_.mesh[i];
      const std::string f = fmt::format("mesh[{}]", i);
      if (a.name.empty()) fail(f + ".axis", "empty axis name");
      if (!sizes_.emplace(a.name, a.size).second) fail(f + ".axis", fmt::format("axis '{}' is given twice", a.name));
      order_[a.name] = static_cast<int>(i);
      if (a.size < 1) fail(f + ".size", fmt::format("axis '{}' has size {}", a.name, a.size));
      ranks *= a.size;
      if (ranks > INT_MAX) fail(f + ".size", "the mesh has more than 2^31 - 1 ranks");
    }
    for (size_t i = 0; i < p_.buffers.size(); ++i) checkBuffer(p_.buffers[i], fmt::format("buffers[{}]", i));
    for (size_t f = 0; f < p_.functions.size(); ++f)
      for (size_t s = 0; s < p_.functions[f].steps.size(); ++s)
        if (auto* c = std::get_if<CollectiveStep>(&p_.functions[f].steps[s]))
          checkCollective(*c, fmt::format("functions[{}].steps[{}]", f, s), p_.functions[f].name);
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw std::runtime_error(fmt::format("{}: {}: {}", context_, field, problem));
  }

  /// The size of mesh axis `axis`; fails naming the mesh if it has none.
  int64_t size(const std::string& axis, const std::string& field) const {
    auto it = sizes_.find(axis);
    if (it == sizes_.end())
      fail(field, fmt::format("'{}' is not an axis of the mesh [{}]", axis, meshText()));
    return it->second;
  }

  std::string meshText() const {
    std::vector<std::string> parts;
    for (const MeshAxis& a : p_.mesh) parts.push_back(fmt::format("{}={}", a.name, a.size));
    return fmt::format("{}", fmt::join(parts, ","));
  }

  void checkBuffer(const Buffer& b, const std::string& field) const {
    if (b.kind == BufferKind::Coordinate) {
      std::set<std::string> seen;
      int64_t parts = 1;
      for (size_t k = 0; k < b.coordinateAxes.size(); ++k) {
        std::string fk = fmt::format("{}.coordinate.axes[{}]", field, k);
        parts *= size(b.coordinateAxes[k], fk);
        if (!seen.insert(b.coordinateAxes[k]).second) fail(fk, fmt::format("'{}' is named twice", b.coordinateAxes[k]));
      }
      if (parts * b.coordinateStride > (int64_t{1} << 31) - 1)
        fail(field + ".coordinate", fmt::format("coordinate '{}' overflows i32", b.name));
    }
    if (b.globalShape.empty() && b.sharding.empty()) return;
    const std::string f = field + ".sharding";
    if (b.kind != BufferKind::Parameter && b.kind != BufferKind::State)
      fail(f, fmt::format("'{}' is not a parameter or optimizer state, so it cannot be sharded", b.name));
    if (b.globalShape.size() != b.shape.size() || b.sharding.size() != b.shape.size())
      fail(f, fmt::format("'{}' has {} dimensions but a global shape of {} and {} sharded dimensions", b.name,
                          b.shape.size(), b.globalShape.size(), b.sharding.size()));
    std::set<std::string> used;
    for (size_t d = 0; d < b.shape.size(); ++d) {
      const ShardDim& s = b.sharding[d];
      const std::string fd = fmt::format("{}.dims[{}]", f, d);
      int64_t parts = 1;
      for (size_t k = 0; k < s.axes.size(); ++k) {
        parts *= size(s.axes[k], fmt::format("{}.axes[{}]", fd, k));
        if (!used.insert(s.axes[k]).second)
          fail(fmt::format("{}.axes[{}]", fd, k), fmt::format("'{}' splits '{}' twice", s.axes[k], b.name));
      }
      if (s.blocks < 1 || b.shape[d] % s.blocks != 0)
        fail(fd + ".blocks", fmt::format("{} blocks do not divide dimension {} of '{}' (local size {})", s.blocks,
                                         d, b.name, b.shape[d]));
      if (s.padding < 0 || s.padding >= parts || (s.padding > 0 && s.blocks != 1))
        fail(fd + ".padding", fmt::format("'{}' dimension {} has padding {}; it must be in [0, {}) and only on an "
                                          "unblocked dimension", b.name, d, s.padding, parts));
      if (b.globalShape[d] + s.padding != b.shape[d] * parts)
        fail(fmt::format("{}.global_shape[{}]", f, d),
             fmt::format("'{}' has global dimension {}{} but local dimension {} over {} part(s)", b.name,
                         b.globalShape[d], s.padding ? fmt::format(" (padded by {})", s.padding) : "", b.shape[d],
                         parts));
    }
  }

  void checkCollective(const CollectiveStep& c, const std::string& field, const std::string& function) const {
    const std::string where = fmt::format(" (function '{}')", function);
    if (c.axes.empty()) fail(field + ".axes", "a collective needs at least one axis" + where);
    if (p_.mesh.empty()) return;  // a program without a mesh reduces over the world
    int64_t group = 1;
    int last = -1;
    for (size_t k = 0; k < c.axes.size(); ++k) {
      const std::string fk = fmt::format("{}.axes[{}]", field, k);
      group *= size(c.axes[k], fk);
      const int at = order_.at(c.axes[k]);
      if (at <= last)
        fail(fk, fmt::format("'{}' is repeated or out of mesh order in [{}]{}", c.axes[k], fmt::join(c.axes, ", "),
                             where));
      last = at;
    }
    if (group != c.group)
      fail(field + ".group", fmt::format("{} ranks, but axes [{}] of the mesh [{}] span {}{}", c.group,
                                         fmt::join(c.axes, ", "), meshText(), group, where));
  }

  const Program& p_;
  const std::string& context_;
  std::map<std::string, int64_t> sizes_;
  std::map<std::string, int> order_;
};

}  // namespace

void checkProgramMesh(const Program& program, const std::string& context) { MeshChecker(program, context).run(); }

}  // namespace tessel::rt
