// Tests of the f64 reference kernels (runtime/reference/Reference.h): error paths.
//
// Promise: every shape or index rule of every kernel throws tessel::ref::ShapeError, and
// its message names the op and the offending shapes (as shapeString spells them), so a
// failing check says what was wrong without a debugger. Values are in ReferenceTest.cpp.
#include "runtime/reference/Reference.h"
#include "runtime/reference/ReferenceNorm.h"

#include "test/unit/ReferenceTestUtil.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

namespace tessel::ref {
namespace {

using testutil::expectShapeError;

TEST(ReferenceErrors, TensorConstructionAndAt) {
  expectShapeError([] { Tensor({2, 3}, std::vector<double>(5)); }, {"2x3", "6", "5"});
  expectShapeError([] { Tensor({2, -3}); }, {"2x-3"});
  Tensor t({2, 3});
  expectShapeError([&] { t.at({1, 3}); }, {"[1, 3]", "2x3"});
  expectShapeError([&] { t.at({1}); }, {"[1]", "2x3"});
}

TEST(ReferenceErrors, InconsistentTensorIsCaughtByKernels) {
  Tensor bad({2, 3});
  bad.data.pop_back();  // the fields are public, so this can happen
  expectShapeError([&] { relu(bad); }, {"relu", "2x3", "6 elements", "5 values"});
  expectShapeError([&] { matmul(Tensor({3, 2}), bad, false, false); }, {"matmul", "b", "2x3"});
}

TEST(ReferenceErrors, Matmul) {
  expectShapeError([] { matmul(Tensor({5}), Tensor({5, 3}), false, false); }, {"5", "5x3"});
  // The message of the header example: K is read after the transposition flags.
  expectShapeError([] { matmul(Tensor({4, 32, 64}), Tensor({48, 96}), false, true); },
                   {"matmul: contracting dimensions differ: a is 4x32x64 (K=64), b is 48x96 "
                    "(K=96)"});
  expectShapeError([] { matmul(Tensor({4, 32, 64}), Tensor({48, 96}), true, false); },
                   {"a is 4x32x64 (K=32)", "b is 48x96 (K=48)"});
  expectShapeError([] { matmul(Tensor({2, 3, 4}), Tensor({3, 4, 5}), false, false); },
                   {"batch", "2x3x4", "3x4x5"});
  // A batched b needs the same batch dimensions, hence the same rank, as a.
  expectShapeError([] { matmul(Tensor({3, 4}), Tensor({2, 4, 5}), false, false); },
                   {"batch", "3x4", "2x4x5"});
}

TEST(ReferenceErrors, ElementwiseBroadcast) {
  expectShapeError([] { add(Tensor({2, 3}), Tensor({2})); }, {"add", "2x3", "2"});
  expectShapeError([] { sub(Tensor({3}), Tensor({2, 2})); }, {"sub", "a is 3", "b is 2x2"});
  expectShapeError([] { mul(Tensor({2, 3}), Tensor({3, 3})); }, {"mul", "2x3", "3x3"});
}

TEST(ReferenceErrors, LayerNorm) {
  expectShapeError([] { layerNorm(Tensor({2, 4}), Tensor({3}), Tensor({4}), 1e-5); },
                   {"x is 2x4", "gamma is 3", "beta is 4"});
  expectShapeError([] { layerNorm(Tensor({2, 4}), Tensor({4}), Tensor({1, 4}), 1e-5); },
                   {"beta is 1x4"});
  expectShapeError([] { layerNorm(Tensor(), Tensor({1}), Tensor({1}), 1e-5); }, {"scalar"});
}

TEST(ReferenceErrors, RmsNorm) {
  expectShapeError([] { rmsNorm(Tensor({2, 4}), Tensor({3}), 1e-5); },
                   {"rmsNorm", "C=4", "x is 2x4", "weight is 3"});
  expectShapeError([] { rmsNorm(Tensor(), Tensor({1}), 1e-5); }, {"rmsNorm", "scalar"});
  expectShapeError([] { rmsNormBackward(Tensor({2, 4}), Tensor({4}), Tensor({2, 3}), 1e-5); },
                   {"rmsNormBackward", "2x4", "2x3"});
  expectShapeError([] { siluBackward(Tensor({2}), Tensor({3})); }, {"siluBackward", "2", "3"});
}

TEST(ReferenceErrors, Softmax) {
  expectShapeError([] { softmax(Tensor(), false); }, {"softmax", "scalar"});
  expectShapeError([] { softmax(Tensor({2, 3, 4}), true); }, {"causal", "2x3x4"});
  expectShapeError([] { softmax(Tensor({4}), true); }, {"causal", "4"});
}

TEST(ReferenceErrors, Embedding) {
  Tensor table({4, 3});
  expectShapeError([] { embedding(Tensor({4}), Tensor({2})); }, {"table 4", "indices 2"});
  // The offending index is named with its position in the indices tensor.
  expectShapeError([&] { embedding(table, Tensor({2, 2}, {0, 1, 3, 4})); },
                   {"index 4", "position [1, 1]", "indices 2x2", "table 4x3"});
  expectShapeError([&] { embedding(table, Tensor({2}, {-1, 0})); }, {"index -1", "position [0]"});
  expectShapeError([&] { embedding(table, Tensor({2}, {0, 1.5})); },
                   {"1.5", "not an integer", "indices 2"});
  expectShapeError(
      [&] { embedding(table, Tensor::filled({1}, std::numeric_limits<double>::quiet_NaN())); },
      {"not an integer"});
}

TEST(ReferenceErrors, ReshapeAndTranspose) {
  expectShapeError([] { reshape(Tensor({2, 3}), {4, 2}); }, {"2x3", "4x2"});
  expectShapeError([] { reshape(Tensor({2, 3}), {-2, -3}); }, {"-2x-3"});
  expectShapeError([] { transpose(Tensor({2, 3, 4}), {0, 1}); }, {"[0, 1]", "2x3x4"});
  expectShapeError([] { transpose(Tensor({2, 3, 4}), {0, 1, 1}); }, {"[0, 1, 1]", "2x3x4"});
  expectShapeError([] { transpose(Tensor({2, 3, 4}), {0, 1, 3}); }, {"[0, 1, 3]", "2x3x4"});
}

TEST(ReferenceErrors, SplitAndConcat) {
  expectShapeError([] { split(Tensor({2, 6}), 2, 2); }, {"axis 2", "2x6"});
  expectShapeError([] { split(Tensor({2, 6}), -1, 2); }, {"axis -1", "2x6"});
  expectShapeError([] { split(Tensor({2, 6}), 1, 4); }, {"4 equal parts", "2x6"});
  expectShapeError([] { split(Tensor({2, 6}), 1, 0); }, {"0 equal parts", "2x6"});
  expectShapeError([] { concat({}, 0); }, {"concat", "no inputs"});
  expectShapeError([] { concat({Tensor({2, 3}), Tensor({2, 3})}, 2); }, {"axis 2", "2x3"});
  expectShapeError([] { concat({Tensor({2, 3}), Tensor({2, 3}), Tensor({3, 3})}, 1); },
                   {"input 2", "3x3", "2x3"});
  expectShapeError([] { concat({Tensor({2, 3}), Tensor({2, 3, 1})}, 0); },
                   {"input 1", "2x3x1", "2x3"});
}

TEST(ReferenceErrors, CausalAttention) {
  expectShapeError([] { causalAttention(Tensor({4, 12}), 2); }, {"[B, T, 3C]", "4x12"});
  expectShapeError([] { causalAttention(Tensor({1, 4, 10}), 1); }, {"1x4x10"});
  expectShapeError([] { causalAttention(Tensor({1, 4, 12}), 3); }, {"numHeads=3", "1x4x12"});
  expectShapeError([] { causalAttention(Tensor({1, 4, 12}), 0); }, {"numHeads=0", "1x4x12"});
  expectShapeError([] { causalAttention(Tensor({1, 4, 0}), 1); }, {"1x4x0"});
}

TEST(ReferenceErrors, CrossEntropy) {
  expectShapeError([] { crossEntropy(Tensor({2, 3, 5}), Tensor({3, 2})); },
                   {"logits is 2x3x5", "targets is 3x2"});
  expectShapeError([] { crossEntropy(Tensor(), Tensor()); }, {"logits is scalar"});
  expectShapeError([] { crossEntropy(Tensor({2, 5}), Tensor({2}, {1, 5})); },
                   {"target 5", "position [1]", "targets 2", "logits 2x5"});
  expectShapeError([] { crossEntropy(Tensor({2, 5}), Tensor({2}, {0.5, 1})); },
                   {"target 0.5", "not an integer"});
  expectShapeError([] { crossEntropy(Tensor({0, 5}), Tensor({0})); },
                   {"no tokens", "logits is 0x5", "targets is 0"});
}

TEST(ReferenceErrors, Reductions) {
  expectShapeError([] { reduceSum(Tensor({2, 3}), {2}); }, {"reduceSum", "dimension 2", "2x3"});
  expectShapeError([] { reduceSum(Tensor({2, 3}), {-1}); }, {"dimension -1", "2x3"});
  expectShapeError([] { reduceMean(Tensor({2, 3}), {1, 1}); }, {"reduceMean", "twice", "2x3"});
  expectShapeError([] { reduceMean(Tensor({2, 0}), {1}); }, {"reduceMean", "no elements", "2x0"});
}

}  // namespace
}  // namespace tessel::ref
