// The device mesh (see DeviceMesh.h).
#include "runtime/comm/DeviceMesh.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>

namespace tessel::rt {

MeshLayout::MeshLayout(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  if (axes_.empty()) throw CommError("a device mesh needs at least one axis");
  int64_t size = 1;
  for (size_t i = 0; i < axes_.size(); ++i) {
    const MeshAxis& a = axes_[i];
    if (a.name.empty()) throw CommError(fmt::format("mesh axis {} has no name", i));
    for (size_t j = 0; j < i; ++j)
      if (axes_[j].name == a.name)
        throw CommError(fmt::format("mesh axis '{}' is given twice", a.name));
    if (a.size < 1)
      throw CommError(fmt::format("mesh axis '{}' has size {}; sizes must be >= 1", a.name, a.size));
    size *= a.size;
    if (size > INT_MAX) throw CommError("the device mesh has more ranks than an int can count");
  }
  size_ = static_cast<int>(size);
}

int MeshLayout::axisIndex(const std::string& name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name) return static_cast<int>(i);
  std::vector<std::string> names;
  for (const MeshAxis& a : axes_) names.push_back(a.name);
  throw CommError(fmt::format("unknown mesh axis '{}'; the mesh has {}", name, fmt::join(names, ", ")));
}

std::vector<int> MeshLayout::coordinates(int rank) const {
  if (rank < 0 || rank >= size_)
    throw CommError(fmt::format("rank {} is outside the mesh {} ({} ranks)", rank, describe(), size_));
  std::vector<int> c(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {  // the last axis varies fastest
    c[i] = rank % axes_[i].size;
    rank /= axes_[i].size;
  }
  return c;
}

int MeshLayout::rankAt(const std::vector<int>& coordinates) const {
  if (coordinates.size() != axes_.size())
    throw CommError(fmt::format("{} coordinates for the {}-axis mesh {}", coordinates.size(),
                                axes_.size(), describe()));
  int rank = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (coordinates[i] < 0 || coordinates[i] >= axes_[i].size)
      throw CommError(fmt::format("coordinate {} is outside mesh axis '{}' of size {}",
                                  coordinates[i], axes_[i].name, axes_[i].size));
    rank = rank * axes_[i].size + coordinates[i];
  }
  return rank;
}

std::vector<int> MeshLayout::axisSet(const std::vector<std::string>& axes) const {
  std::vector<int> set;
  for (const std::string& name : axes) {
    int i = axisIndex(name);
    if (std::find(set.begin(), set.end(), i) != set.end())
      throw CommError(fmt::format("mesh axis '{}' is named twice in one group", name));
    set.push_back(i);
  }
  std::sort(set.begin(), set.end());
  return set;
}

std::vector<int> MeshLayout::groupRanks(int rank, const std::vector<std::string>& axes) const {
  const std::vector<int> set = axisSet(axes);
  const std::vector<int> mine = coordinates(rank);
  // Enumerate the coordinates on `set` in row-major order; the others stay at mine. Because
  // the set's axes keep their mesh order, the world ranks come out ascending.
  std::vector<int> members;
  std::vector<int> c = mine;
  for (int i : set) c[static_cast<size_t>(i)] = 0;
  for (;;) {
    members.push_back(rankAt(c));
    size_t k = set.size();
    while (k > 0) {
      size_t a = static_cast<size_t>(set[k - 1]);
      if (++c[a] < axes_[a].size) break;
      c[a] = 0;
      --k;
    }
    if (k == 0) break;
  }
  return members;
}

std::string MeshLayout::groupKey(const std::vector<std::string>& axes) const {
  std::vector<std::string> names;
  for (int i : axisSet(axes)) names.push_back(axes_[static_cast<size_t>(i)].name);
  return fmt::format("{}", fmt::join(names, ","));
}

std::string MeshLayout::describe() const {
  std::vector<std::string> parts;
  for (const MeshAxis& a : axes_) parts.push_back(fmt::format("{}={}", a.name, a.size));
  return fmt::format("{}", fmt::join(parts, ","));
}

DeviceMesh::DeviceMesh(MeshLayout layout, Communicator& world)
    : layout_(std::move(layout)), world_(world) {
  if (layout_.size() != world.worldSize())
    throw CommError(fmt::format("the mesh {} has {} ranks but the world has {}: the product of the "
                                "axis sizes must equal the number of ranks launched",
                                layout_.describe(), layout_.size(), world.worldSize()));
  coordinates_ = layout_.coordinates(world.rank());
}

DeviceMesh::~DeviceMesh() = default;

int DeviceMesh::coordinate(const std::string& name) const {
  return coordinates_[static_cast<size_t>(layout_.axisIndex(name))];
}

Communicator& DeviceMesh::group(const std::vector<std::string>& axes) {
  const std::string key = layout_.groupKey(axes);
  auto it = groups_.find(key);
  if (it != groups_.end()) return *it->second;
  // The empty set of axes is the group of this rank alone; its label must not be "" (the
  // world's).
  auto comm = world_.subgroup(layout_.groupRanks(world_.rank(), axes), key.empty() ? "self" : key);
  return *groups_.emplace(key, std::move(comm)).first->second;
}

}  // namespace tessel::rt
