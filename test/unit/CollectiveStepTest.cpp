// Collective steps in the program format and the executor: a bucket start packs its tensors
// into the bucket and issues the all-reduce without waiting; the wait completes it and
// unpacks; counters count the payload; save/load round-trips them; validation rejects
// unmatched or inconsistent pairs; a missing or wrong-sized communicator is an error. An
// in-place bucket (its tensors views of the bucket) copies nothing, reduces the same values,
// round-trips, and validation refuses views that are not where packing would put them, of
// the wrong dtype, overlapping a live temp or named while the all-reduce owns them.
#include "runtime/exec/Collectives.h"
#include "runtime/exec/Executor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

namespace {

using namespace tessel::rt;
namespace fs = std::filesystem;

Buffer buf(const std::string& name, int64_t n, BufferKind kind, int64_t offset = 0) {
  Buffer b;
  b.name = name;
  b.shape = {n};
  b.kind = kind;
  b.offset = offset;
  return b;
}

/// The start and wait of bucket 0 of buffer `bucket` over 2 ranks: `in` packed, `out` unpacked.
std::pair<CollectiveStep, CollectiveStep> bucketSteps(int bucket, std::vector<int> in, std::vector<int> out,
                                                      const std::string& reduce, bool inPlace) {
  CollectiveStep start;
  start.kind = CollectiveStep::Kind::AllReduceStart;
  start.buffer = bucket;
  start.tensors = std::move(in);
  start.names = {"a.weight", "b.bias"};
  start.reduce = reduce;
  start.group = 2;
  start.inPlace = inPlace;
  start.anchor = "after 'tessel.matmul' at model.h:3:1";
  CollectiveStep wait = start;
  wait.kind = CollectiveStep::Kind::AllReduceWait;
  wait.tensors = std::move(out);
  wait.names = {};
  wait.anchor = "before 'tessel.global_norm' at model.h:9:1";
  return {start, wait};
}

/// Inputs a[5], b[3] -> bucket[8] -> outputs ra[5], rb[3], reduced with `reduce` over 2 ranks.
Program bucketProgram(const std::string& reduce = "sum") {
  Program p;
  p.buffers = {buf("a", 5, BufferKind::Input), buf("b", 3, BufferKind::Input), buf("%bucket", 8, BufferKind::Temp, 0),
               buf("%ra", 5, BufferKind::Temp, 64), buf("%rb", 3, BufferKind::Temp, 128)};
  auto [start, wait] = bucketSteps(2, {0, 1}, {3, 4}, reduce, false);
  p.functions = {Function{"train_step", {0, 1}, {3, 4}, {"ra", "rb"}, {start, wait}, 192}};
  return p;
}

/// Inputs a[16], b[3] copied into the gradients %ga, %gb, which are views of an in-place
/// bucket[19] (at its offset and 64 bytes on), all-reduced with `reduce` over 2 ranks; the
/// wait's tensors %ra, %rb are the same views, read as the outputs.
Program inPlaceProgram(const std::string& reduce = "sum") {
  Program p;
  p.buffers = {buf("a", 16, BufferKind::Input),          buf("b", 3, BufferKind::Input),
               buf("%bucket", 19, BufferKind::Temp, 0), buf("%ga", 16, BufferKind::Temp, 0),
               buf("%gb", 3, BufferKind::Temp, 64),     buf("%ra", 16, BufferKind::Temp, 0),
               buf("%rb", 3, BufferKind::Temp, 64)};
  auto [start, wait] = bucketSteps(2, {3, 4}, {5, 6}, reduce, true);
  p.functions = {Function{"train_step", {0, 1}, {5, 6}, {"ra", "rb"},
                          {CopyStep{0, 3}, CopyStep{1, 4}, start, wait}, 128}};
  return p;
}

/// Expects validateProgram to refuse `p` with a message containing `message`.
void expectInvalid(const Program& p, const std::string& message) {
  try {
    validateProgram(p, "test");
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

/// Two "ranks" holding the same values: Sum doubles them, Avg keeps them. The work runs only
/// in wait(), so a result read before the wait would still show the packed inputs.
class FakeComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int worldSize() const override { return world; }
  std::unique_ptr<Work> allReduce(void* data, int64_t count, DType, ReduceOp op, const std::string& name) override {
    names.push_back(name);
    stats_.collectives++;
    stats_.payloadBytes += count * 4;
    struct Deferred final : Work {
      float* d;
      int64_t n;
      float factor;
      void wait() override {
        for (int64_t i = 0; i < n; ++i) d[i] *= factor;
        factor = 1;
      }
      bool test() override { return factor == 1; }
    };
    auto w = std::make_unique<Deferred>();
    w->d = static_cast<float*>(data);
    w->n = count;
    w->factor = op == ReduceOp::Sum ? 2.0f : 1.0f;
    return w;
  }
  std::unique_ptr<Work> allGather(const void*, void*, int64_t, DType, const std::string&) override { return none(); }
  std::unique_ptr<Work> reduceScatter(const void*, void*, int64_t, DType, ReduceOp, const std::string&) override {
    return none();
  }
  std::unique_ptr<Work> allToAll(const void*, void*, int64_t, DType, const std::string&) override { return none(); }
  std::unique_ptr<Work> broadcast(void*, int64_t, DType, int, const std::string&) override { return none(); }
  std::unique_ptr<Work> send(const void*, int64_t, DType, int, const std::string&) override { return none(); }
  std::unique_ptr<Work> recv(void*, int64_t, DType, int, const std::string&) override { return none(); }
  void setTimeout(double) override {}
  void setStep(int64_t) override {}
  CommStats stats() const override { return stats_; }
  int world = 2;
  std::vector<std::string> names;

 private:
  static std::unique_ptr<Work> none() { throw std::logic_error("not used"); }
  CommStats stats_;
};

std::vector<float> outputValues(Executor& ex) {
  std::vector<float> v;
  for (const OutputView& o : ex.outputs("train_step"))
    for (int64_t i = 0; i < o.numel; ++i) v.push_back(o.value(i));
  return v;
}

TEST(CollectiveStep, StartPacksWaitUnpacksAndCountsPayload) {
  Executor ex(bucketProgram(), [](const std::string&) { return nullptr; });
  FakeComm comm;
  ex.setCommunicator(&comm);
  std::vector<float> a{1, 2, 3, 4, 5}, b{-1, -2, -3};
  ex.setInput("train_step", 0, a.data(), a.size() * 4);
  ex.setInput("train_step", 1, b.data(), b.size() * 4);
  ex.run("train_step");
  EXPECT_EQ(outputValues(ex), (std::vector<float>{2, 4, 6, 8, 10, -2, -4, -6}));
  EXPECT_EQ(comm.names, (std::vector<std::string>{"bucket 0 of @train_step"}));
  EXPECT_EQ(ex.collectiveCounters().collectives, 1);
  EXPECT_EQ(ex.collectiveCounters().payloadBytes, 32);
  EXPECT_EQ(ex.collectiveCounters().bucketCopyBytes, 64);  // packed and unpacked: 32 bytes each way
  ex.run("train_step");
  EXPECT_EQ(ex.collectiveCounters().payloadBytes, 64);
}

TEST(CollectiveStep, InPlaceBucketReducesWithoutCopies) {
  Executor ex(inPlaceProgram(), [](const std::string&) { return nullptr; });
  FakeComm comm;
  ex.setCommunicator(&comm);
  std::vector<float> a(16), b{-1, -2, -3};
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i + 1);
  ex.setInput("train_step", 0, a.data(), a.size() * 4);
  ex.setInput("train_step", 1, b.data(), b.size() * 4);
  ex.run("train_step");
  std::vector<float> want;
  for (float v : a) want.push_back(2 * v);
  for (float v : b) want.push_back(2 * v);
  EXPECT_EQ(outputValues(ex), want);  // the fake Sum doubles the bucket, which the outputs are views of
  EXPECT_EQ(ex.collectiveCounters().collectives, 1);
  EXPECT_EQ(ex.collectiveCounters().payloadBytes, 76);
  EXPECT_EQ(ex.collectiveCounters().bucketCopyBytes, 0);
  // Round trip: in_place is saved and read back; a malformed flag is refused by name.
  std::string dir = (fs::path(testing::TempDir()) / "tessel_inplace_roundtrip").string();
  fs::remove_all(dir);
  saveProgram(inPlaceProgram("avg"), dir);
  Program back = loadProgram(dir);
  EXPECT_TRUE(back == inPlaceProgram("avg"));
  EXPECT_TRUE(std::get<CollectiveStep>(back.functions[0].steps[3]).inPlace);
  std::string json;
  {
    std::ifstream in(fs::path(dir) / "program.json");
    json.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = json.find("\"in_place\": true");
  ASSERT_NE(at, std::string::npos) << json;
  json.replace(at, 16, "\"in_place\": 1");
  std::ofstream(fs::path(dir) / "program.json") << json;
  try {
    loadProgram(dir);
    ADD_FAILURE() << "accepted in_place: 1";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("in_place: expected true or false"), std::string::npos) << e.what();
  }
}

TEST(CollectiveStep, ValidationRejectsMalformedInPlaceBuckets) {
  EXPECT_NO_THROW(validateProgram(inPlaceProgram(), "test"));
  // Not contiguous: %gb one alignment step past where packing puts it (and so past the bucket).
  Program gap = inPlaceProgram();
  gap.buffers[4].offset = 128;
  gap.functions[0].arenaBytes = 192;
  expectInvalid(gap, "buffer 4 '%gb' is not a view of the in-place bucket: it must be a temp at offset 64");
  // Out of order: the views swapped.
  Program swapped = inPlaceProgram();
  swapped.buffers[3].offset = 64;
  swapped.buffers[4].offset = 0;
  expectInvalid(swapped, "is not a view of the in-place bucket");
  // Wrong dtype: bf16 gradients cannot be views of the f32 bucket.
  Program bf16 = inPlaceProgram();
  for (size_t id : {1, 4, 6}) bf16.buffers[id].dtype = DType::BF16;
  expectInvalid(bf16, "is not f32");
  // Overlap: a temp written between the start and the wait on the bucket's bytes.
  Program overlap = inPlaceProgram();
  overlap.buffers.push_back(buf("%x", 3, BufferKind::Temp, 64));
  overlap.functions[0].steps.insert(overlap.functions[0].steps.begin() + 3, CopyStep{1, 7});
  expectInvalid(overlap, "share arena bytes while both are live");
  // A view written while the all-reduce owns it (a gradient produced after its bucket's start).
  Program late = inPlaceProgram();
  std::swap(late.functions[0].steps[1], late.functions[0].steps[2]);
  expectInvalid(late, "names '%gb' of in-place bucket 0 between its start (step 1) and wait (step 3)");
  // A start tensor read after the start (it holds the reduced values by then).
  Program output = inPlaceProgram();
  output.functions[0].outputs[0] = 3;
  expectInvalid(output, "'%ga' is an output but in-place bucket 0 overwrites it");
  // The wait not in place while its start is: its tensors then overlap the bucket.
  Program halves = inPlaceProgram();
  std::get<CollectiveStep>(halves.functions[0].steps[3]).inPlace = false;
  expectInvalid(halves, "steps[3].tensors[0]: buffer 5 '%ra' overlaps the bucket");
  // The program with buffers `x` and `x + 1` (a start's or a wait's tensors) moved apart from
  // the bucket, into a second bucket-sized block.
  auto movedApart = [](size_t x) {
    Program p = inPlaceProgram();
    p.buffers[x].offset = 128;
    p.buffers[x + 1].offset = 192;
    p.functions[0].arenaBytes = 256;
    return p;
  };
  // A copying start (its tensors apart from the bucket) with an in-place wait.
  Program mixed = movedApart(3);
  std::get<CollectiveStep>(mixed.functions[0].steps[2]).inPlace = false;
  expectInvalid(mixed, "does not match its start (buffer, tensor sizes, reduce, axes, group, synchronous or in_place)");
  // Both in place, but the wait's views apart: the halves must agree on where the tensors are.
  expectInvalid(movedApart(5), "buffer 5 '%ra' is not a view of the in-place bucket");
  // A gradient and its reduced value as one temp (they must be two, live apart).
  Program same = inPlaceProgram();
  std::get<CollectiveStep>(same.functions[0].steps[3]).tensors = {3, 4};
  same.functions[0].outputs = {3, 4};
  expectInvalid(same, "'%ga' is both a start and a wait tensor of in-place bucket 0");
  // A copy bucket whose tensors lie in the bucket.
  Program copies = inPlaceProgram();
  for (size_t s : {2, 3}) std::get<CollectiveStep>(copies.functions[0].steps[s]).inPlace = false;
  expectInvalid(copies, "overlaps the bucket");
}

TEST(CollectiveStep, NeedsAMatchingCommunicator) {
  Executor ex(bucketProgram(), [](const std::string&) { return nullptr; });
  EXPECT_THROW(
      {
        try {
          ex.run("train_step");
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("all-reduces over 2 ranks (dp), but no communicator was set"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      std::runtime_error);
  FakeComm four;
  four.world = 4;
  ex.setCommunicator(&four);
  EXPECT_THROW(ex.run("train_step"), std::runtime_error);
}

TEST(CollectiveStep, SaveLoadRoundTripAndReports) {
  std::string dir = (fs::path(testing::TempDir()) / "tessel_collective_roundtrip").string();
  fs::remove_all(dir);
  Program p = bucketProgram("avg");
  saveProgram(p, dir);
  EXPECT_TRUE(loadProgram(dir) == p);
  CollectiveBytes bytes = collectiveBytes(p, "train_step");
  EXPECT_EQ(bytes.buckets, 1);
  EXPECT_EQ(bytes.payloadBytes, 32);
  EXPECT_DOUBLE_EQ(bytes.ringWireBytes, 32.0);  // 2 (2 - 1) / 2 x 32
  std::string report = explainCollectives(p, "train_step");
  EXPECT_NE(report.find("bucket 0: all_reduce avg over dp (2 ranks), 2 gradients, 32 bytes"), std::string::npos)
      << report;
  EXPECT_NE(report.find("a.weight"), std::string::npos) << report;
  EXPECT_NE(report.find("after 'tessel.matmul' at model.h:3:1"), std::string::npos) << report;
  EXPECT_NE(report.find("before 'tessel.global_norm' at model.h:9:1"), std::string::npos) << report;
  // A different schedule hashes differently; the same one equally.
  Program q = bucketProgram("sum");
  EXPECT_NE(collectiveScheduleHash(p), collectiveScheduleHash(q));
  EXPECT_EQ(collectiveScheduleHash(p), collectiveScheduleHash(bucketProgram("avg")));
}

TEST(CollectiveStep, ValidationRejectsUnmatchedOrInconsistentBuckets) {
  Program noWait = bucketProgram();
  noWait.functions[0].steps.pop_back();
  expectInvalid(noWait, "bucket 0 is started but never waited for");
  Program noStart = bucketProgram();
  noStart.functions[0].steps.erase(noStart.functions[0].steps.begin());
  expectInvalid(noStart, "wait for bucket 0, which is not started");
  Program wrongSize = bucketProgram();
  wrongSize.buffers[2].shape = {7};
  expectInvalid(wrongSize, "holds 7 elements but its tensors 8");
  Program badReduce = bucketProgram("min");
  expectInvalid(badReduce, "'min' (expected sum, avg or max)");
}

}  // namespace
