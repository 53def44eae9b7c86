// The shape rules (compiler/Shapes.h) against shapes worked out by hand, including the
// error messages that name the offending shapes.
#include "compiler/Shapes.h"

#include <gtest/gtest.h>

namespace {

using namespace tessel::shapes;

void expectShape(const Result& r, const Shape& want) {
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.shape, want);
}

void expectError(const Result& r, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(r.ok()) << "expected an error, got " << str(r.shape);
  for (const auto& f : fragments) EXPECT_NE(r.error.find(f), std::string::npos) << r.error;
}

TEST(Shapes, Str) {
  EXPECT_EQ(str(Shape{4, 32, 64}), "4x32x64");
  EXPECT_EQ(str(Shape{}), "scalar");
}

TEST(Shapes, Matmul) {
  expectShape(matmul(Shape{4, 32, 64}, Shape{192, 64}, false, true), {4, 32, 192});
  expectShape(matmul(Shape{2, 3, 5, 7}, Shape{2, 3, 7, 1}, false, false), {2, 3, 5, 1});
  expectShape(matmul(Shape{7, 5}, Shape{7, 33}, true, false), {5, 33});
  expectShape(matmul(Shape{2, 7, 5}, Shape{2, 33, 7}, true, true), {2, 5, 33});
  expectError(matmul(Shape{4, 32, 64}, Shape{48, 96}, false, true),
              {"contracting", "4x32x64", "K=64", "48x96", "K=96"});
  expectError(matmul(Shape{2, 4, 4}, Shape{3, 4, 4}, false, false), {"batch", "2x4x4", "3x4x4"});
  expectError(matmul(Shape{4}, Shape{4, 4}, false, false), {"rank >= 2"});
}

TEST(Shapes, Broadcast) {
  expectShape(broadcast(Shape{4, 32, 64}, Shape{64}), {4, 32, 64});
  expectShape(broadcast(Shape{32, 64}, Shape{4, 32, 64}), {4, 32, 64});
  expectShape(broadcast(Shape{}, Shape{3}), {3});
  expectError(broadcast(Shape{4, 16}, Shape{4, 24}), {"4x16", "4x24", "do not broadcast"});
  expectError(broadcast(Shape{4, 1}, Shape{4, 8}), {"4x1"});  // no size-1 stretching
}

TEST(Shapes, NormSoftmaxEmbeddingLoss) {
  expectShape(layerNorm(Shape{2, 3, 8}, Shape{8}, Shape{8}), {2, 3, 8});
  expectError(layerNorm(Shape{2, 8}, Shape{7}, Shape{8}), {"gamma", "[C] = 8", "7"});
  expectShape(softmax(Shape{2, 5, 5}, true), {2, 5, 5});
  expectError(softmax(Shape{2, 5, 6}, true), {"[..., T, T]", "2x5x6"});
  expectShape(embedding(Shape{256, 64}, Shape{4, 32}), {4, 32, 64});
  expectError(embedding(Shape{256}, Shape{4}), {"[V, C]"});
  expectShape(crossEntropy(Shape{4, 32, 256}, Shape{4, 32}), {});
  expectError(crossEntropy(Shape{4, 32, 256}, Shape{4, 31}), {"4x31", "4x32x256", "V=256"});
}

// rms_norm: a weight [C] matching the input's last dimension; swiglu: gate and up of one shape.
TEST(Shapes, RmsNormAndSwiglu) {
  expectShape(rmsNorm(Shape{2, 3, 8}, Shape{8}), {2, 3, 8});
  expectShape(rmsNorm(Shape{8}, Shape{8}), {8});
  expectError(rmsNorm(Shape{2, 8}, Shape{7}), {"weight", "[C] = 8", "2x8", "7"});
  expectError(rmsNorm(Shape{2, 8}, Shape{1, 8}), {"weight", "1x8"});
  expectError(rmsNorm(Shape{}, Shape{1}), {"rank >= 1", "scalar"});
  expectShape(swiglu(Shape{4, 32, 96}, Shape{4, 32, 96}), {4, 32, 96});
  expectError(swiglu(Shape{4, 32, 96}, Shape{4, 32, 64}), {"gate 4x32x96", "up 4x32x64"});
}

// The vocab-parallel ops: a table shard of 1..vocab rows, row statistics without the shard's
// last dimension, and statistics of one non-empty shape for the loss.
TEST(Shapes, VocabParallel) {
  expectShape(embeddingShard(Shape{128, 64}, Shape{4, 32}, 256), {4, 32, 64});
  expectShape(embeddingShard(Shape{256, 64}, Shape{}, 256), {64});
  expectError(embeddingShard(Shape{300, 64}, Shape{4}, 256), {"300x64", "vocab=256"});
  expectError(embeddingShard(Shape{0, 64}, Shape{4}, 256), {"0x64", "between 1"});
  expectError(embeddingShard(Shape{128}, Shape{4}, 256), {"[V, C]"});
  expectShape(rowStatistic(Shape{4, 32, 128}), {4, 32});
  expectShape(rowStatistic(Shape{7}), {});
  expectError(rowStatistic(Shape{}), {"[..., Vl]", "scalar"});
  expectError(rowStatistic(Shape{4, 0}), {"Vl >= 1", "4x0"});
  expectShape(crossEntropyFromStats(Shape{4, 32}, Shape{4, 32}, Shape{4, 32}), {});
  expectError(crossEntropyFromStats(Shape{4}, Shape{4}, Shape{5}), {"target 5", "one shape"});
  expectError(crossEntropyFromStats(Shape{0}, Shape{0}, Shape{0}), {"no rows"});
}

TEST(Shapes, Attention) {
  expectShape(causalAttention(Shape{4, 32, 192}, 4), {4, 32, 64});
  expectError(causalAttention(Shape{4, 32, 190}, 4), {"not divisible by 3"});
  expectError(causalAttention(Shape{4, 32, 144}, 5), {"C=48", "5 heads"});
  expectError(causalAttention(Shape{32, 192}, 4), {"[B, T, 3C]"});
}

TEST(Shapes, Rearrangements) {
  expectShape(reshape(Shape{4, 32, 64}, Shape{128, 64}), {128, 64});
  expectError(reshape(Shape{4, 32}, Shape{127}), {"128 elements", "127 elements"});
  expectShape(transpose(Shape{2, 3, 5}, Shape{2, 0, 1}), {5, 2, 3});
  expectError(transpose(Shape{2, 3}, Shape{0, 0}), {"not a permutation"});
  expectShape(split(Shape{4, 32, 192}, 2, 3), {4, 32, 64});
  expectError(split(Shape{4, 10}, 1, 3), {"does not split into 3"});
  expectShape(concat({{4, 16}, {4, 48}}, 1), {4, 64});
  expectError(concat({{4, 16}, {5, 48}}, 1), {"differ outside axis 1"});
  expectShape(reduce(Shape{4, 32, 64}, Shape{0, 1}), {64});
  expectShape(reduce(Shape{4, 32}, Shape{1, 0}), {});
  expectError(reduce(Shape{4, 32}, Shape{1, 1}), {"distinct"});
}

// The collectives over a group of N ranks: a gather multiplies one dimension by N, a
// scatter divides it (only evenly), an all-to-all does both.
TEST(Shapes, Collectives) {
  expectShape(allGather(Shape{2, 6}, 0, 4), {8, 6});
  expectShape(allGather(Shape{2, 6}, 1, 1), {2, 6});
  // The trimmed gather drops at most group - 1 trailing rows of padding (3 x 4 = 12 rows
  // gathered: 9 to 12 kept are trims of it, 8 would be a whole shard dropped).
  EXPECT_TRUE(isTrimmedGather(Shape{12, 6}, Shape{12, 6}, 0, 4));
  EXPECT_TRUE(isTrimmedGather(Shape{12, 6}, Shape{9, 6}, 0, 4));
  EXPECT_FALSE(isTrimmedGather(Shape{12, 6}, Shape{8, 6}, 0, 4));
  EXPECT_FALSE(isTrimmedGather(Shape{12, 6}, Shape{13, 6}, 0, 4));
  EXPECT_FALSE(isTrimmedGather(Shape{12, 6}, Shape{12, 5}, 0, 4));
  EXPECT_FALSE(isTrimmedGather(Shape{12, 6}, Shape{12}, 0, 4));
  expectError(allGather(Shape{2, 6}, 2, 4), {"gather_axis 2 is out of range for 2x6"});
  expectError(allGather(Shape{2, 6}, 0, 0), {"group size must be >= 1, got 0"});
  expectShape(reduceScatter(Shape{8, 6}, 0, 4), {2, 6});
  expectShape(reduceScatter(Shape{8, 6}, 1, 3), {8, 2});
  // An uneven dimension is padded to group x ceil(G / group): 6 rows over 4 ranks are 4 x 2.
  expectShape(reduceScatter(Shape{6, 8}, 0, 4), {2, 8});
  expectShape(reduceScatter(Shape{9, 8}, 0, 4), {3, 8});
  expectError(reduceScatter(Shape{8}, -1, 2), {"scatter_axis -1 is out of range for 8"});
  expectShape(allToAll(Shape{4, 8}, 1, 0, 4), {16, 2});
  expectShape(allToAll(Shape{4, 8}, 0, 1, 2), {2, 16});
  expectShape(allToAll(Shape{8, 3}, 0, 0, 4), {8, 3});
  expectError(allToAll(Shape{4, 6}, 1, 0, 4), {"split_axis 1 of 4x6 (size 6) is not divisible"});
  expectError(allToAll(Shape{4, 8}, 1, 2, 2), {"concat_axis 2 is out of range for 4x8"});
}

}  // namespace
