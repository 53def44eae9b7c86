// runtime/ckpt/Boxes.h against runtime/exec/Sharding.h's globalIndices (the layout's one
// definition): for every rank of the mesh, every element of every box must sit where
// globalIndices puts it, every non-padding local element must lie in exactly one box, and the
// distinct boxes of all ranks must cover the global tensor exactly once.
#include "runtime/ckpt/Boxes.h"
#include "runtime/exec/Sharding.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

namespace tessel::ckpt {
namespace {

rt::Buffer sharded(std::vector<int64_t> local, std::vector<int64_t> global, std::vector<rt::ShardDim> dims) {
  rt::Buffer b;
  b.name = "w";
  b.kind = rt::BufferKind::Parameter;
  b.shape = std::move(local);
  b.globalShape = std::move(global);
  b.sharding = std::move(dims);
  return b;
}

/// Row-major flat index of `at` over `shape`.
int64_t flat(const std::vector<int64_t>& at, const std::vector<int64_t>& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + at[d];
  return f;
}

/// Calls f(i) with every index vector of a box of `lengths`, row-major.
template <class F>
void forEachIndex(const std::vector<int64_t>& lengths, F f) {
  std::vector<int64_t> i(lengths.size(), 0);
  for (int64_t n : lengths)
    if (n <= 0) return;
  while (true) {
    f(i);
    size_t d = lengths.size();
    while (d > 0) {
      if (++i[d - 1] < lengths[d - 1]) break;
      i[d - 1] = 0;
      --d;
    }
    if (d == 0) return;
  }
}

using BoxSet = std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, int>;

/// Checks the boxes of rank `r` (see the file comment); counts its distinct boxes' global
/// elements in `covered` and appends its number of boxes to `counts`.
void checkRank(const rt::Buffer& b, const rt::MeshLayout& layout, int r, const std::vector<int64_t>& global,
               BoxSet& distinct, std::vector<int64_t>& covered, std::vector<size_t>& counts) {
  const std::vector<int> at = layout.coordinates(r);
  const std::vector<int64_t> index = rt::globalIndices(b, layout, at);
  const std::vector<LocalBox> boxes = localBoxes(b, &layout, at);
  counts.push_back(boxes.size());
  // The local shard holds its own global indices (-1 for padding), as int64 elements.
  std::vector<int64_t> seen(index.size(), 0);
  for (const LocalBox& box : boxes) {
    ASSERT_EQ(box.offsets.size(), b.shape.size());
    for (size_t d = 0; d < box.offsets.size(); ++d) {
      ASSERT_LE(box.offsets[d] + box.lengths[d], global[d]) << "rank " << r << ": a box outside the tensor";
      ASSERT_LE(box.localOffsets[d] + box.lengths[d], b.shape[d]) << "rank " << r << ": a box outside the shard";
    }
    std::vector<int64_t> extracted(static_cast<size_t>(
        std::accumulate(box.lengths.begin(), box.lengths.end(), int64_t{1}, std::multiplies<>())));
    extractBox(index.data(), b.shape, box, sizeof(int64_t), extracted.data());
    size_t k = 0;
    forEachIndex(box.lengths, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> l(i.size()), g(i.size());
      for (size_t d = 0; d < i.size(); ++d) {
        l[d] = box.localOffsets[d] + i[d];
        g[d] = box.offsets[d] + i[d];
      }
      const int64_t li = flat(l, b.shape), gi = flat(g, global);
      EXPECT_EQ(index[static_cast<size_t>(li)], gi) << "rank " << r << " local " << li;
      EXPECT_EQ(extracted[k++], gi) << "rank " << r << " extractBox";
      seen[static_cast<size_t>(li)]++;
      if (distinct.count({box.offsets, box.lengths}) == 0) covered[static_cast<size_t>(gi)]++;
    });
    distinct[{box.offsets, box.lengths}]++;
    // insertBox is extractBox's inverse: the box's elements land where they came from.
    std::vector<int64_t> back(index.size(), -7);
    insertBox(back.data(), b.shape, box, sizeof(int64_t), extracted.data());
    for (size_t e = 0; e < back.size(); ++e) {
      if (back[e] != -7) {
        EXPECT_EQ(back[e], index[e]) << "rank " << r << " insertBox at " << e;
      }
    }
  }
  for (size_t e = 0; e < index.size(); ++e)
    EXPECT_EQ(seen[e], index[e] >= 0 ? 1 : 0) << "rank " << r << " local element " << e << " (global " << index[e]
                                              << ") in " << seen[e] << " boxes";
}

/// Checks `b`'s boxes on every rank of `mesh` (see the file comment); returns the number of
/// boxes per rank so that a case can also check how many a rank holds.
std::vector<size_t> checkBoxes(const rt::Buffer& b, const std::vector<rt::MeshAxis>& mesh) {
  const rt::MeshLayout layout(mesh);
  const std::vector<int64_t> global = b.globalShape.empty() ? b.shape : b.globalShape;
  const int64_t globalCount = std::accumulate(global.begin(), global.end(), int64_t{1}, std::multiplies<>());
  BoxSet distinct;
  std::vector<int64_t> covered(static_cast<size_t>(globalCount), 0);
  std::vector<size_t> counts;
  for (int r = 0; r < layout.size(); ++r) checkRank(b, layout, r, global, distinct, covered, counts);
  for (size_t g = 0; g < covered.size(); ++g) EXPECT_EQ(covered[g], 1) << "global element " << g;
  return counts;
}

TEST(CkptBoxes, Unsharded) {
  rt::Buffer b = sharded({4, 6}, {}, {});
  EXPECT_EQ(checkBoxes(b, {{"dp", 2}}), (std::vector<size_t>{1, 1}));
  const std::vector<LocalBox> boxes = localBoxes(b, nullptr, {});
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_EQ(boxes[0], (LocalBox{{0, 0}, {4, 6}, {0, 0}}));
}

TEST(CkptBoxes, Dim0OverOneAxis) {
  EXPECT_EQ(checkBoxes(sharded({2, 3}, {8, 3}, {{{"fsdp"}, 1, 0}, {}}), {{"fsdp", 4}}),
            (std::vector<size_t>{1, 1, 1, 1}));
}

TEST(CkptBoxes, Dim1OverTpOnTwoAxisMesh) {
  EXPECT_EQ(checkBoxes(sharded({4, 3}, {4, 6}, {{}, {{"tp"}, 1, 0}}), {{"dp", 2}, {"tp", 2}}),
            (std::vector<size_t>{1, 1, 1, 1}));
}

TEST(CkptBoxes, FusedQkvBlocksUnderTp) {
  // [q | k | v] along dim 1, each split over tp: a rank holds 3 separate column ranges.
  EXPECT_EQ(checkBoxes(sharded({4, 6}, {4, 12}, {{}, {{"tp"}, 3, 0}}), {{"tp", 2}}), (std::vector<size_t>{3, 3}));
  EXPECT_EQ(checkBoxes(sharded({6, 4}, {12, 4}, {{{"tp"}, 3, 0}, {}}), {{"dp", 2}, {"tp", 2}}),
            (std::vector<size_t>{3, 3, 3, 3}));
}

TEST(CkptBoxes, UnevenPaddingDropsEmptyBoxes) {
  // 5 rows over 4 ranks: shards of 2 (3 rows of padding); rank 2 holds 1 row, rank 3 none.
  EXPECT_EQ(checkBoxes(sharded({2, 3}, {5, 3}, {{{"fsdp"}, 1, 3}, {}}), {{"fsdp", 4}}),
            (std::vector<size_t>{1, 1, 1, 0}));
  // 7 rows: only the last rank's shard is partly padding.
  EXPECT_EQ(checkBoxes(sharded({2, 3}, {7, 3}, {{{"fsdp"}, 1, 1}, {}}), {{"fsdp", 4}}),
            (std::vector<size_t>{1, 1, 1, 1}));
  // A tensor smaller than the number of ranks: 2 elements on 4 ranks.
  EXPECT_EQ(checkBoxes(sharded({1}, {2}, {{{"fsdp"}, 1, 2}}), {{"fsdp", 4}}), (std::vector<size_t>{1, 1, 0, 0}));
}

TEST(CkptBoxes, TwoAxesOnOneDim) {
  // [tp, fsdp] on dim 0: part = tp * 2 + fsdp, on a mesh listing fsdp first.
  EXPECT_EQ(checkBoxes(sharded({2, 2}, {8, 2}, {{{"tp", "fsdp"}, 1, 0}, {}}), {{"fsdp", 2}, {"tp", 2}}),
            (std::vector<size_t>{1, 1, 1, 1}));
  // The same with padding: 7 rows over 4 parts of 2.
  EXPECT_EQ(checkBoxes(sharded({2, 2}, {7, 2}, {{{"tp", "fsdp"}, 1, 1}, {}}), {{"fsdp", 2}, {"tp", 2}}),
            (std::vector<size_t>{1, 1, 1, 1}));
}

TEST(CkptBoxes, BothDimsShardedOnTwoAxisMesh) {
  // dim 0 over fsdp with padding, dim 1 in 3 blocks over tp: up to 3 boxes per rank.
  EXPECT_EQ(checkBoxes(sharded({3, 6}, {5, 12}, {{{"fsdp"}, 1, 1}, {{"tp"}, 3, 0}}), {{"fsdp", 2}, {"tp", 2}}),
            (std::vector<size_t>{3, 3, 3, 3}));
  // A three-axis mesh, replicated over pp.
  EXPECT_EQ(checkBoxes(sharded({2, 2, 3}, {4, 2, 6}, {{{"dp"}, 1, 0}, {}, {{"tp"}, 1, 0}}),
                       {{"pp", 2}, {"dp", 2}, {"tp", 2}}),
            (std::vector<size_t>(8, 1)));
}

TEST(CkptBoxes, Scalar) {
  rt::Buffer b = sharded({}, {}, {});
  const std::vector<LocalBox> boxes = localBoxes(b, nullptr, {});
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_TRUE(boxes[0].offsets.empty() && boxes[0].lengths.empty() && boxes[0].localOffsets.empty());
  const float x = 2.5f;
  float y = 0;
  extractBox(&x, {}, boxes[0], sizeof(float), &y);
  EXPECT_EQ(y, 2.5f);
  EXPECT_EQ(copyIntersection(&x, {}, {}, &y, {}, {}, sizeof(float)), 1);
}

TEST(CkptBoxes, CopyIntersection) {
  // Two boxes of a [6, 7] tensor filled with their flat global indices; every overlap of every
  // pair of offsets copies exactly the shared elements.
  const std::vector<int64_t> global{6, 7};
  auto fill = [&](const std::vector<int64_t>& off, const std::vector<int64_t>& len) {
    std::vector<int64_t> v;
    forEachIndex(len, [&](const std::vector<int64_t>& i) { v.push_back(flat({off[0] + i[0], off[1] + i[1]}, global)); });
    return v;
  };
  const std::vector<int64_t> srcOff{1, 2}, srcLen{4, 3};
  const std::vector<int64_t> src = fill(srcOff, srcLen);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 7; ++c) {
      const std::vector<int64_t> dstOff{r, c}, dstLen{std::min<int64_t>(2, 6 - r), std::min<int64_t>(3, 7 - c)};
      const std::vector<int64_t> want = fill(dstOff, dstLen);
      std::vector<int64_t> dst(want.size(), -1);
      const int64_t n = copyIntersection(src.data(), srcOff, srcLen, dst.data(), dstOff, dstLen, sizeof(int64_t));
      int64_t copied = 0;
      size_t k = 0;
      forEachIndex(dstLen, [&](const std::vector<int64_t>& i) {
        const int64_t gr = r + i[0], gc = c + i[1];
        const bool inSrc = gr >= 1 && gr < 5 && gc >= 2 && gc < 5;
        EXPECT_EQ(dst[k], inSrc ? want[k] : -1) << "dst at " << r << "," << c << " element " << k;
        copied += inSrc;
        ++k;
      });
      EXPECT_EQ(n, copied);
    }
}

}  // namespace
}  // namespace tessel::ckpt
