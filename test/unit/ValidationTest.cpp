// Validation covers a fixed set (runtime/train/Validation.h, TextBatches.h): the same windows
// on every evaluation, for every seed and every data-parallel degree and microbatch count,
// each window of the first eval_batches x B of the held-out split exactly once, and an
// evaluation's loss is the mean of the per-window losses computed one window at a time.
#include "dsl/trainer/Trainer.h"
#include "examples/gpt/model.h"
#include "runtime/data/DistributedSampler.h"
#include "runtime/train/TextBatches.h"
#include "runtime/train/Validation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <unistd.h>

namespace tessel::trainer {
namespace {

namespace fs = std::filesystem;

/// Writes `n` bytes from mt19937_64(seed) to a fresh file and returns its path. With random
/// bytes every window of 9 bytes is (with overwhelming probability) unique, so a window is
/// identified by its bytes.
std::string randomTextFile(const std::string& name, size_t n, uint64_t seed) {
  fs::path dir = fs::path(::testing::TempDir()) / ("tessel_validation_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / name).string();
  std::mt19937_64 rng(seed);
  std::ofstream out(path, std::ios::binary);
  for (size_t i = 0; i < n; ++i) out.put(static_cast<char>(rng() & 0xff));
  return path;
}

/// A window as fed: its T tokens and the last target (T + 1 bytes of the text).
using Window = std::vector<int32_t>;

/// An executor that records the windows fed to @forward and reports as loss the mean token
/// of the rows (so a mean of losses can be checked without compiling a model).
class RecordingExecutor : public rt::ProgramExecutor {
 public:
  explicit RecordingExecutor(int64_t seq) : seq_(seq) {}
  const rt::Program& program() const override { return program_; }
  void initParameters(uint64_t) override {}
  void setInput(const std::string& fn, size_t index, const void* data, size_t bytes) override {
    EXPECT_EQ(fn, "forward");
    auto* p = static_cast<const int32_t*>(data);
    (index == 0 ? tokens_ : targets_).assign(p, p + bytes / sizeof(int32_t));
  }
  void run(const std::string&) override {
    ASSERT_EQ(tokens_.size(), targets_.size());
    double sum = 0;
    for (size_t row = 0; row * seq_ < tokens_.size(); ++row) {
      Window w(tokens_.begin() + static_cast<long>(row * seq_),
               tokens_.begin() + static_cast<long>((row + 1) * seq_));
      w.push_back(targets_[(row + 1) * seq_ - 1]);
      fed.push_back(std::move(w));
    }
    for (int32_t t : tokens_) sum += t;
    loss_ = static_cast<float>(sum / static_cast<double>(tokens_.size()));
  }
  std::vector<rt::OutputView> outputs(const std::string&) const override {
    rt::OutputView v;
    v.data = &loss_;
    v.numel = 1;
    return {v};
  }
  void readBuffer(int, void*) const override {}
  void writeBuffer(int, const void*) override {}
  int64_t arenaBytes() const override { return 0; }
  int64_t highWaterBytes() const override { return 0; }
  std::string deviceName() const override { return "recording"; }

  std::vector<Window> fed;  // every row fed to @forward, in order

 private:
  int64_t seq_;
  rt::Program program_;
  std::vector<int32_t> tokens_, targets_;
  float loss_ = 0;
};

constexpr int64_t kSeq = 8, kBatch = 4;

/// The held-out split's windows of T + 1 bytes at stride T, read from the file directly.
std::vector<Window> expectedWindows(const std::string& path, const TextDataset& data, int64_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Window> windows;
  for (int64_t i = 0; i < count; ++i) {
    Window w;
    for (int64_t t = 0; t <= kSeq; ++t)
      w.push_back(static_cast<uint8_t>(bytes[static_cast<size_t>(data.trainSize() + i * kSeq + t)]));
    windows.push_back(w);
  }
  return windows;
}

/// The windows one evaluation of `batches` global batches feeds on every rank of `world`
/// with `microsteps` microbatches, concatenated rank by rank.
std::vector<Window> evaluatedWindows(const TextDataset& data, int world, int64_t microsteps,
                                     uint64_t seed, int64_t batches, int evaluations = 1) {
  std::vector<Window> all;
  for (int rank = 0; rank < world; ++rank) {
    ValidationFeeder v = textValFeeder({&data, kBatch, kSeq, rank, world, microsteps, seed});
    RecordingExecutor ex(kSeq);
    for (int e = 0; e < evaluations; ++e) evaluate(ex, v, evaluationBatches(batches, v));
    all.insert(all.end(), ex.fed.begin(), ex.fed.end());
  }
  return all;
}

TEST(Validation, TheFirstEvalBatchesTimesBWindowsOfTheSplitInOrder) {
  // 3000 bytes: the held-out 10% has 300, so 37 windows of 9 bytes at stride 8: 9 whole
  // global batches of 4, one window left out.
  std::string path = randomTextFile("text.bin", 3000, 5);
  TextDataset data(path);
  const int64_t windows = textWindowCount(data.valSize(), kSeq);
  ASSERT_EQ(windows, 37);
  ValidationFeeder v = textValFeeder({&data, kBatch, kSeq, 0, 1, 1, 1});
  EXPECT_EQ(v.batches, 9);
  EXPECT_EQ(evaluationBatches(0, v), 9);   // --eval-batches 0: all
  EXPECT_EQ(evaluationBatches(50, v), 9);  // more than the set holds: all
  EXPECT_EQ(evaluationBatches(3, v), 3);
  EXPECT_NE(describeValidation(v, 9).find("the first 36 of 37 windows of 9 bytes"), std::string::npos)
      << describeValidation(v, 9);
  EXPECT_NE(describeValidation(v, 9).find("1 left out"), std::string::npos);

  std::vector<Window> want = expectedWindows(path, data, windows);
  EXPECT_EQ(evaluatedWindows(data, 1, 1, 1, 3), std::vector<Window>(want.begin(), want.begin() + 12));
  EXPECT_EQ(evaluatedWindows(data, 1, 1, 1, 0), std::vector<Window>(want.begin(), want.begin() + 36));
}

TEST(Validation, SameWindowsOnEveryEvaluationSeedAndDataParallelDegree) {
  std::string path = randomTextFile("text.bin", 3000, 6);
  TextDataset data(path);
  const std::vector<Window> once = evaluatedWindows(data, 1, 1, 1337, 5);
  ASSERT_EQ(once.size(), 20u);
  // Two evaluations on one feeder: the second repeats the first.
  std::vector<Window> twice = evaluatedWindows(data, 1, 1, 1337, 5, 2);
  EXPECT_EQ(std::vector<Window>(twice.begin(), twice.begin() + 20), once);
  EXPECT_EQ(std::vector<Window>(twice.begin() + 20, twice.end()), once);
  // Another seed: the same windows.
  EXPECT_EQ(evaluatedWindows(data, 1, 1, 42, 5), once);
  // dp = 2 and 4, with 1 or 2 microbatches (B / (N k) rows each): the ranks' windows are the
  // dp = 1 windows, each once. Sorted, since the ranks interleave the batches.
  std::vector<Window> sortedOnce = once;
  std::sort(sortedOnce.begin(), sortedOnce.end());
  for (int world : {1, 2, 4})
    for (int64_t micro : {int64_t{1}, int64_t{2}}) {
      if (kBatch % (world * micro) != 0) continue;
      std::vector<Window> got = evaluatedWindows(data, world, micro, 7, 5);
      std::sort(got.begin(), got.end());
      EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end())
          << "a window counted twice with dp=" << world << " k=" << micro;
      EXPECT_EQ(got, sortedOnce) << "dp=" << world << " k=" << micro;
    }
}

TEST(Validation, RanksMeanIsTheGlobalMean) {
  // The recording executor's loss is a row-mean; equal row counts per rank make the mean of
  // the ranks' means the global mean. Tolerance: float sums of 8 to 32 small integers are
  // exact; the only rounding is the f32 loss value (u = 6e-8 relative) and the division.
  std::string path = randomTextFile("text.bin", 3000, 8);
  TextDataset data(path);
  double global = 0, perRank = 0;
  {
    ValidationFeeder v = textValFeeder({&data, kBatch, kSeq, 0, 1, 1, 1});
    RecordingExecutor ex(kSeq);
    global = evaluate(ex, v, 9);
  }
  for (int rank = 0; rank < 2; ++rank) {
    ValidationFeeder v = textValFeeder({&data, kBatch, kSeq, rank, 2, 2, 1});
    RecordingExecutor ex(kSeq);
    perRank += evaluate(ex, v, 9) / 2;
  }
  EXPECT_NEAR(perRank, global, 1e-6 * global);
}

TEST(Validation, TooFewWindowsForOneBatchIsAnError) {
  // 200 bytes: 20 held out, 2 windows of 9 bytes, fewer than one batch of 4.
  std::string path = randomTextFile("short.bin", 200, 9);
  TextDataset data(path);
  try {
    textValFeeder({&data, kBatch, kSeq, 0, 1, 1, 1});
    ADD_FAILURE() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 windows of 9 bytes of the held-out split, fewer "
                                         "than one global batch of 4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(orderedValidation(12, 6, 0, 4, 1, "images", {}), std::invalid_argument);
}

/// A GPT's @forward for `batch` rows, parameters from seed 7.
NativeProgram compileGpt(int64_t batch) {
  gpt::GPT model(gpt::Config{.layers = 1, .channels = 16, .heads = 2, .seq = kSeq});
  gpt::build(model, batch);
  Program program = model.compile({});
  return program.native(
      {.threads = 1, .cache_dir = (fs::path(::testing::TempDir()) / "tessel-validation-test").string(),
       .seed = 7});
}

TEST(Validation, LossIsTheMeanOfThePerWindowLosses) {
  std::string path = randomTextFile("text.bin", 3000, 10);
  TextDataset data(path);
  NativeProgram two = compileGpt(2), one = compileGpt(1);
  // Reference: every evaluated window alone through the B = 1 program, at offset i T of the
  // split as the test computes it.
  const int64_t batches = 5, windows = batches * 2;
  std::vector<double> loss;  // of windows 0 .. windows, one more than evaluated
  for (int64_t i = 0; i <= windows; ++i) {
    TokenBatch b = data.windows(Split::Val, {i * kSeq}, kSeq);
    rt::Executor& ex = one.executor();
    ex.setInput("forward", 0, b.tokens.data(), b.tokens.size() * sizeof(int32_t));
    ex.setInput("forward", 1, b.targets.data(), b.targets.size() * sizeof(int32_t));
    ex.run("forward");
    loss.push_back(ex.outputs("forward").at(0).value());
  }
  const double reference = std::accumulate(loss.begin(), loss.end() - 1, 0.0) / windows;
  // The check can tell windows apart: the mean over windows 1 .. windows (one shifted)
  // differs from the reference by far more than the tolerance below.
  const double shifted = std::accumulate(loss.begin() + 1, loss.end(), 0.0) / windows;
  ASSERT_GT(std::abs(shifted - reference), 10 * 2e-6 * reference);
  // Tolerance: the batch of 2 sums the same 2 x 8 token losses in another order than two
  // batches of 1; each f32 sum of n = 16 terms errs by at most n u = 16 x 6e-8 relative,
  // and the per-token losses themselves may differ by the GEMMs' blocking (a few u), so
  // 2e-6 relative bounds both with margin.
  ValidationFeeder whole = textValFeeder({&data, 2, kSeq, 0, 1, 1, 3});
  EXPECT_NEAR(evaluate(two.executor(), whole, batches), reference, 2e-6 * reference);
  // dp = 2 on the B = 1 program: each rank evaluates one row of every global batch of 2.
  double ranks = 0;
  for (int rank = 0; rank < 2; ++rank)
    ranks += evaluate(one.executor(), textValFeeder({&data, 2, kSeq, rank, 2, 1, 3}), batches) / 2;
  EXPECT_NEAR(ranks, reference, 2e-6 * reference);
}

}  // namespace
}  // namespace tessel::trainer
