// The device mesh: the ranks of the world arranged on named axes, and a communicator per group
// of ranks that differ only along some of those axes.
//
// Rank layout. The axes are given outermost first and the last axis varies fastest (row-major),
// so for {{"pp", P}, {"dp", D}, {"tp", T}}
//   rank = ((pp * D) + dp) * T + tp
// and the tp ranks of one (pp, dp) are neighbours, as in Megatron-LM. Any order is accepted;
// the order is the layout.
//
// Groups. The group of rank r along a set of axes S holds the ranks whose coordinates equal
// r's on every axis outside S. Its members are listed in ascending world rank, which is also
// the row-major order of their coordinates on S (mesh order), so r's rank within the group is
//   groupRank = sum over a in S of coord[a] * (product of the sizes of the axes of S after a).
// For S = {dp, tp}: groupRank = dp * T + tp. A group's communicator numbers its ranks so.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/comm/MeshAxis.h"  // defines: MeshAxis

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

/// The pure arithmetic of a mesh (no communication): coordinates and groups of world ranks.
class MeshLayout {
public:
  /// Throws CommError for no axes, an empty or repeated axis name, or a size below 1.
  explicit MeshLayout(std::vector<MeshAxis> axes);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  /// The number of ranks: the product of the axis sizes.
  int size() const { return size_; }
  /// The position of axis `name` in the mesh; throws CommError naming the known axes if absent.
  int axisIndex(const std::string& name) const;
  /// The coordinate of world rank `rank` on every axis, in mesh order. Requires 0 <= rank < size().
  std::vector<int> coordinates(int rank) const;
  /// The world rank at `coordinates` (one per axis, each within its axis).
  int rankAt(const std::vector<int>& coordinates) const;
  /// The world ranks of `rank`'s group along `axes` (any order, no repeats; empty: {rank}),
  /// ascending. Throws CommError for an unknown or repeated axis.
  std::vector<int> groupRanks(int rank, const std::vector<std::string>& axes) const;
  /// "dp,tp": the names of `axes` in mesh order (the canonical key of a set of axes).
  std::string groupKey(const std::vector<std::string>& axes) const;
  /// "pp=2,dp=2,tp=2".
  std::string describe() const;

private:
  /// The axis indices of `axes`, validated and sorted into mesh order.
  std::vector<int> axisSet(const std::vector<std::string>& axes) const;
  std::vector<MeshAxis> axes_;
  int size_ = 1;
};

/// The mesh over a world communicator: this rank's coordinates and a communicator per group.
/// Group communicators are created on first use, collectively: every rank of the world must
/// ask for the same groups (by the same sets of axes) in the same order, as with every
/// collective. They support every collective of Communicator with the world's timeout and its
/// failure reports, naming ranks by their world rank. The mesh borrows `world`, which must
/// outlive it; the group communicators are destroyed with the mesh.
class DeviceMesh {
public:
  /// Throws CommError "the mesh pp=2,dp=2,tp=2 has 8 ranks but the world has 4" when the mesh's
  /// size is not world.worldSize() (on every rank: each checks its own world size).
  DeviceMesh(MeshLayout layout, Communicator& world);
  ~DeviceMesh();
  DeviceMesh(const DeviceMesh&) = delete;
  DeviceMesh& operator=(const DeviceMesh&) = delete;

  const MeshLayout& layout() const { return layout_; }
  /// This rank's coordinate on axis `name` (throws CommError for an unknown axis).
  int coordinate(const std::string& name) const;
  /// The communicator of this rank's group along a set of axes: group({"tp"}) for one axis,
  /// group({"dp", "tp"}) for a parameter replicated over both (the order of the names does
  /// not matter; the group's ranks follow the mesh order). No axes, or axes of size 1 only, in the
  /// set yields a group of one rank. Created on first use (collective over the world).
  /// (One function, not an overload for a single axis: group({"tp", "dp"}) would then also
  /// match std::string's iterator-pair constructor.) Throws CommError for an unknown or
  /// repeated axis.
  Communicator& group(const std::vector<std::string>& axes);
  Communicator& world() { return world_; }

private:
  MeshLayout layout_;
  Communicator& world_;
  std::vector<int> coordinates_;
  std::map<std::string, std::unique_ptr<Communicator>> groups_;
};

}  // namespace tessel::rt
