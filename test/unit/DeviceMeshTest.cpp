// Device mesh arithmetic (runtime/comm/DeviceMesh.h) against closed forms: the row-major rank
// layout, coordinates, the groups along every set of axes, and the refusals; and a DeviceMesh
// over the one-rank communicator.
#include "runtime/comm/DeviceMesh.h"
#include "runtime/comm/SingleCommunicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

using namespace tessel::rt;

namespace {

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  }
  return "no error";
}

/// Every subset of the axis indices [0, n), as bit masks.
std::vector<std::vector<int>> subsets(int n) {
  std::vector<std::vector<int>> all;
  for (int mask = 0; mask < (1 << n); ++mask) {
    std::vector<int> s;
    for (int i = 0; i < n; ++i)
      if (mask & (1 << i)) s.push_back(i);
    all.push_back(s);
  }
  return all;
}

/// Checks a mesh against the closed forms of DeviceMesh.h, for every rank and axis set:
/// rank = sum_i c_i * prod_{j > i} size_j; a group holds exactly the ranks equal to r outside
/// the set, listed ascending, with r's group rank sum_{a in S} c_a * prod_{b in S, b > a} size_b.
void checkMesh(const std::vector<MeshAxis>& axes) {
  MeshLayout mesh(axes);
  const int n = static_cast<int>(axes.size());
  int size = 1;
  for (const MeshAxis& a : axes) size *= a.size;
  ASSERT_EQ(mesh.size(), size);
  auto coordOf = [&](int rank) {  // independent: divide by the stride of each axis
    std::vector<int> c(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      int stride = 1;
      for (int j = i + 1; j < n; ++j) stride *= axes[static_cast<size_t>(j)].size;
      c[static_cast<size_t>(i)] = rank / stride % axes[static_cast<size_t>(i)].size;
    }
    return c;
  };
  for (int r = 0; r < size; ++r) {
    const std::vector<int> c = coordOf(r);
    EXPECT_EQ(mesh.coordinates(r), c) << "rank " << r << " of " << mesh.describe();
    EXPECT_EQ(mesh.rankAt(c), r);
    for (const std::vector<int>& set : subsets(n)) {
      std::vector<std::string> names;
      for (int i : set) names.push_back(axes[static_cast<size_t>(i)].name);
      std::vector<int> expected;
      for (int q = 0; q < size; ++q) {
        std::vector<int> cq = coordOf(q);
        bool same = true;
        for (int i = 0; i < n; ++i)
          if (std::find(set.begin(), set.end(), i) == set.end() && cq[static_cast<size_t>(i)] != c[static_cast<size_t>(i)])
            same = false;
        if (same) expected.push_back(q);
      }
      const std::vector<int> group = mesh.groupRanks(r, names);
      EXPECT_EQ(group, expected) << "rank " << r << " axes " << mesh.groupKey(names) << " of " << mesh.describe();
      int groupRank = 0;
      for (int a : set) {
        int stride = 1;
        for (int b : set)
          if (b > a) stride *= axes[static_cast<size_t>(b)].size;
        groupRank += c[static_cast<size_t>(a)] * stride;
      }
      ASSERT_LT(groupRank, static_cast<int>(group.size()));
      EXPECT_EQ(group[static_cast<size_t>(groupRank)], r) << "group rank of " << r;
      // The order the axes are named in does not matter.
      std::vector<std::string> reversed(names.rbegin(), names.rend());
      EXPECT_EQ(mesh.groupRanks(r, reversed), group);
    }
  }
}

}  // namespace

TEST(CommMeshLayout, MegatronLayoutPutsTensorParallelRanksNextToEachOther) {
  MeshLayout mesh({{"pp", 2}, {"dp", 2}, {"tp", 2}});
  // rank = ((pp * 2) + dp) * 2 + tp, written out.
  EXPECT_EQ(mesh.rankAt({1, 0, 1}), 5);
  EXPECT_EQ(mesh.coordinates(6), (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(mesh.groupRanks(5, {"tp"}), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh.groupRanks(5, {"dp"}), (std::vector<int>{5, 7}));
  EXPECT_EQ(mesh.groupRanks(5, {"pp"}), (std::vector<int>{1, 5}));
  EXPECT_EQ(mesh.groupRanks(5, {"tp", "dp"}), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(mesh.groupKey({"tp", "dp"}), "dp,tp");
  EXPECT_EQ(mesh.describe(), "pp=2,dp=2,tp=2");
}

TEST(CommMeshLayout, CoordinatesAndGroupsMatchTheClosedFormOnSeveralMeshes) {
  checkMesh({{"dp", 4}});
  checkMesh({{"dp", 2}, {"tp", 2}});
  checkMesh({{"tp", 3}, {"dp", 2}});  // any order: the order is the layout
  checkMesh({{"pp", 2}, {"dp", 3}, {"tp", 2}});
  checkMesh({{"pp", 1}, {"dp", 2}, {"tp", 1}, {"sp", 3}});  // axes of size 1
  checkMesh({{"dp", 1}});
}

TEST(CommMeshLayout, BadMeshesAndAxesAreRefusedWithTheirCause) {
  EXPECT_EQ(message([] { MeshLayout({}); }), "a device mesh needs at least one axis");
  EXPECT_EQ(message([] { MeshLayout({{"dp", 2}, {"dp", 2}}); }), "mesh axis 'dp' is given twice");
  EXPECT_EQ(message([] { MeshLayout({{"tp", 0}}); }), "mesh axis 'tp' has size 0; sizes must be >= 1");
  EXPECT_EQ(message([] { MeshLayout({{"", 2}}); }), "mesh axis 0 has no name");
  MeshLayout mesh({{"dp", 2}, {"tp", 2}});
  EXPECT_EQ(message([&] { mesh.groupRanks(0, {"pp"}); }), "unknown mesh axis 'pp'; the mesh has dp, tp");
  EXPECT_EQ(message([&] { mesh.groupRanks(0, {"tp", "tp"}); }), "mesh axis 'tp' is named twice in one group");
  EXPECT_EQ(message([&] { mesh.coordinates(4); }), "rank 4 is outside the mesh dp=2,tp=2 (4 ranks)");
  EXPECT_EQ(message([&] { mesh.rankAt({0, 2}); }), "coordinate 2 is outside mesh axis 'tp' of size 2");
}

TEST(CommDeviceMesh, MeshMustHaveTheWorldsSize) {
  SingleCommunicator world;
  EXPECT_EQ(message([&] { DeviceMesh(MeshLayout({{"dp", 2}, {"tp", 2}}), world); }),
            "the mesh dp=2,tp=2 has 4 ranks but the world has 1: the product of the axis sizes "
            "must equal the number of ranks launched");
}

TEST(CommDeviceMesh, OneRankMeshGivesOneRankGroups) {
  SingleCommunicator world;
  world.setStep(7);
  DeviceMesh mesh(MeshLayout({{"dp", 1}, {"tp", 1}}), world);
  EXPECT_EQ(mesh.coordinate("tp"), 0);
  Communicator& tp = mesh.group({"tp"});
  EXPECT_EQ(&mesh.group({"tp"}), &tp);  // created once
  EXPECT_EQ(tp.worldSize(), 1);
  float x[2] = {3.0f, -1.0f};
  tp.allReduce(x, 2, DType::F32, ReduceOp::Max, "x")->wait();
  EXPECT_EQ(x[0], 3.0f);
  EXPECT_EQ(mesh.group({"tp", "dp"}).stats().collectives, 0);
  EXPECT_EQ(tp.stats().collectives, 1);
  EXPECT_EQ(world.stats().collectives, 0);  // the group counts its own
}

TEST(CommDeviceMesh, SubgroupArgumentsAreChecked) {
  SingleCommunicator world;
  EXPECT_EQ(message([&] { world.subgroup({1}, "tp"); }), "group tp: rank 1 is outside [0, 1)");
  EXPECT_EQ(message([&] { world.subgroup({}, "tp"); }), "group tp: rank 0 is not one of its ranks");
}
