// Collective steps in the program format and the executor: a bucket start packs its tensors
// into the bucket and issues the all-reduce without waiting; the wait completes it and
// unpacks; counters count the payload; save/load round-trips them; validation rejects
// unmatched or inconsistent pairs; a missing or wrong-sized communicator is an error.
#include "runtime/exec/Collectives.h"
#include "runtime/exec/Executor.h"

#include <gtest/gtest.h>

#include <filesystem>
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

/// Inputs a[5], b[3] -> bucket[8] -> outputs ra[5], rb[3], reduced with `reduce` over 2 ranks.
Program bucketProgram(const std::string& reduce = "sum") {
  Program p;
  p.buffers = {buf("a", 5, BufferKind::Input), buf("b", 3, BufferKind::Input), buf("%bucket", 8, BufferKind::Temp, 0),
               buf("%ra", 5, BufferKind::Temp, 64), buf("%rb", 3, BufferKind::Temp, 128)};
  CollectiveStep start;
  start.kind = CollectiveStep::Kind::AllReduceStart;
  start.buffer = 2;
  start.tensors = {0, 1};
  start.names = {"a.weight", "b.bias"};
  start.reduce = reduce;
  start.group = 2;
  start.anchor = "after 'tessel.matmul' at model.h:3:1";
  CollectiveStep wait = start;
  wait.kind = CollectiveStep::Kind::AllReduceWait;
  wait.tensors = {3, 4};
  wait.names = {};
  wait.anchor = "before 'tessel.global_norm' at model.h:9:1";
  p.functions = {Function{"train_step", {0, 1}, {3, 4}, {"ra", "rb"}, {start, wait}, 192}};
  return p;
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
  ex.run("train_step");
  EXPECT_EQ(ex.collectiveCounters().payloadBytes, 64);
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
  auto expectInvalid = [](Program p, const std::string& message) {
    try {
      validateProgram(p, "test");
      ADD_FAILURE() << "accepted; expected: " << message;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
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
