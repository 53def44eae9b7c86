// The vocab-parallel reference kernels (runtime/reference/ReferenceVocab.h) against the
// unsharded ones: the vocabulary split over 1, 2 and 3 shards, each shard's local ops run on
// its slice, and the row statistics combined as the partition pass's all-reduces combine them
// (max of row_max, sum of sum_exp, sum of target_logit: VocabShardsUtil.h; sum of
// embedding_shard). Backward, the all-reduce sums are the identity on the gradient, so every
// shard receives the same gradients of the statistics.
#include "test/unit/ReferenceTestUtil.h"
#include "test/unit/VocabShardsUtil.h"

#include <algorithm>
#include <cmath>

namespace tessel::ref {
namespace {

using testutil::Rng;

/// Both sides compute in f64 and differ only in how the row sums are grouped (V <= 30 terms
/// here, each of relative error eps = 2^-53): at most ~V eps = 4e-15 of the values; 1e-12
/// leaves room for the log and the mean while still catching any misplaced term (>= 1e-3).
constexpr double kTol = 1e-12;

using vocabshards::offsetOf;

double maxAbs(const Tensor& t) {
  double m = 0.0;
  for (double v : t.data) m = std::max(m, std::abs(v));
  return m;
}

/// |got - want| <= tol x the larger of want's largest magnitude and `floor` (the size of the
/// terms the result is computed from, when they cancel to far less).
void expectNear(const Tensor& got, const Tensor& want, double tol, const char* what, double floor = 1e-300) {
  ASSERT_EQ(got.shape, want.shape) << what;
  double scale = std::max(floor, maxAbs(want));
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_LE(std::abs(got.data[i] - want.data[i]), tol * scale)
        << what << " at " << i << ": " << got.data[i] << " vs " << want.data[i];
}

TEST(VocabParallelReference, ShardedCrossEntropyEqualsTheUnshardedLossAndGradient) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [shape, spread] : {std::pair{std::vector<int64_t>{2, 5, 30}, 30.0},
                               {std::vector<int64_t>{7, 12}, 3.0},
                               {std::vector<int64_t>{1, 6}, 80.0}}) {
    // Large spreads put each row's maximum far above the rest, in one shard only: the
    // shards' own maxima differ, so a missing all-reduce max would show.
    Tensor z = rng.tensor(shape, -spread, spread);
    Tensor targets(std::vector<int64_t>(shape.begin(), shape.end() - 1));
    for (double& t : targets.data) t = rng.index(shape.back());
    Tensor dloss = Tensor::filled({}, rng.uniform(0.5, 2.0));
    Tensor wantLoss = crossEntropy(z, targets);
    Tensor wantGrad = crossEntropyBackward(z, targets, dloss);
    // 4, 5 and 7 do not divide 6, 12 or 30: the last shards are padded (7 over 6 columns
    // leaves the last shard nothing but padding).
    for (int64_t shards : {1, 2, 3, 4, 5, 7}) {
      SCOPED_TRACE("shards " + std::to_string(shards) + ", logits " + shapeString(shape));
      auto [loss, grad] = vocabshards::crossEntropy(z, targets, dloss, shards);
      expectNear(loss, wantLoss, kTol, "loss");
      // dlogits = dl / N (softmax - onehot): a row whose target holds nearly all the
      // probability cancels 1 - p to far below its terms, which are of size dl / N.
      const double rows = static_cast<double>(z.numel() / shape.back());
      expectNear(grad, wantGrad, kTol, "dlogits", dloss.data[0] / rows);
    }
  }
}

TEST(VocabParallelReference, ShardedEmbeddingEqualsTheUnshardedGatherAndScatter) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t v = 12, c = 5;
  Tensor table = rng.tensor({v, c});
  Tensor indices({3, 7});
  for (double& i : indices.data) i = rng.index(v);
  Tensor dy = rng.tensor({3, 7, c});
  Tensor wantRows = embedding(table, indices);
  Tensor wantGrad = embeddingBackward(indices, dy, v);
  for (int64_t shards : {1, 2, 3, 5, 7}) {  // 5 and 7 do not divide 12: padded tables
    SCOPED_TRACE("shards " + std::to_string(shards));
    int64_t local = (v + shards - 1) / shards;
    Tensor padded({local * shards, c});  // zero padding rows, as the runtime initialises them
    std::copy(table.data.begin(), table.data.end(), padded.data.begin());
    std::vector<Tensor> tables = split(padded, 0, shards), grads;
    Tensor rows(wantRows.shape);
    for (int64_t r = 0; r < shards; ++r) {  // all_reduce sum
      rows = add(rows, embeddingShard(tables[r], indices, offsetOf(r * local), v));
      grads.push_back(embeddingShardBackward(indices, offsetOf(r * local), dy, local));
    }
    // Exactly one shard adds a non-zero row (x + 0 is exact) and the scatter adds the same
    // terms in the same order: equal, not only close.
    EXPECT_EQ(rows.data, wantRows.data);
    Tensor grad = concat(grads, 0);
    EXPECT_TRUE(std::all_of(grad.data.begin() + v * c, grad.data.end(), [](double g) { return g == 0.0; }))
        << "a padding row got a gradient";
    grad.data.resize(static_cast<size_t>(v * c));
    grad.shape = {v, c};
    EXPECT_EQ(grad.data, wantGrad.data);
  }
}

TEST(VocabParallelReference, InvalidIdsOffsetsAndShapesThrowNamingThem) {
  Tensor z = Tensor::filled({2, 4}, 0.0), t({2}), table = Tensor::filled({4, 3}, 1.0);
  using testutil::expectShapeError;
  Tensor bad({2});
  bad.data[1] = 12;
  expectShapeError([&] { targetLogit(z, bad, offsetOf(0), 12); },
                   {"targetLogit", "target 12", "[0, 12)"});
  expectShapeError([&] { embeddingShard(table, bad, offsetOf(4), 12); },
                   {"embeddingShard", "index 12", "[0, 12)"});
  expectShapeError([&] { targetLogit(z, t, offsetOf(-1), 12); }, {"offset -1"});
  expectShapeError([&] { maskVocabPadding(z, offsetOf(-2), 12, 0.0); }, {"maskVocabPadding", "offset -2"});
  expectShapeError([&] { maskVocabPadding(z, offsetOf(0), 3, 0.0); }, {"maskVocabPadding", "vocab = 3"});
  expectShapeError([&] { targetLogit(z, t, Tensor::filled({1}, 0.0), 12); },
                   {"offset must be a scalar"});
  expectShapeError([&] { embeddingShard(table, t, offsetOf(0), 3); }, {"4x3", "vocab = 3"});
  expectShapeError([&] { sumExp(z, Tensor({3})); }, {"sumExp", "shift", "2", "3"});
  expectShapeError([&] { rowMax(Tensor({2, 0})); }, {"rowMax", "Vl >= 1", "2x0"});
  expectShapeError([&] { crossEntropyFromStats(Tensor({2}), Tensor({2}), Tensor({3})); },
                   {"crossEntropyFromStats", "target"});
  expectShapeError([&] { crossEntropyFromStats(Tensor({0}), Tensor({0}), Tensor({0})); },
                   {"no rows"});
  expectShapeError([&] { crossEntropyFromStatsBackward(Tensor({2}), Tensor({1})); },
                   {"dloss must be a scalar"});
  expectShapeError([&] { targetLogitBackward(t, offsetOf(0), Tensor({3}), 4); },
                   {"targetLogitBackward", "targets", "dy"});
  expectShapeError([&] { embeddingShardBackward(t, offsetOf(0), Tensor({2, 3}), 0); },
                   {"embeddingShardBackward", "rows is 0"});
}

}  // namespace
}  // namespace tessel::ref
