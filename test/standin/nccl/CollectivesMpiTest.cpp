// The stand-in NCCL's collectives on host buffers (test/standin/nccl/Collectives.h), run by
// 1-4 MPI processes over the stand-in's socket transport (MPI only broadcasts the key, as
// the runtime broadcasts NCCL's unique id) and by threads of one process. Every rank builds
// every rank's input from a formula and computes the expected result from the operation's
// definition in double, so the reference does not share the stand-in's code:
// - all_reduce sum/avg/max, all_gather, reduce_scatter (count per rank), broadcast from each
//   root, in place and not, f32/bf16/i32, counts 1..67 including ones the world size does not
//   divide; results bitwise equal on every rank (NCCL's promise for one communicator);
// - a group of sends and receives that every rank lists receive-first (would deadlock if
//   run one after another), with a send to oneself; an ungrouped send that waits for its
//   receive, and a send and receive of different counts that both fail;
// - ranks that call different collectives all fail naming both calls; a rank that aborts
//   makes its peers fail with a remote error instead of waiting.
#include "test/standin/nccl/Collectives.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

namespace tessel::standin::nccl {
namespace {

int worldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int worldSize() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

/// A fresh key drawn on rank 0 and broadcast, as ncclGetUniqueId's id is.
std::string sharedKey() {
  char key[33] = {};
  if (worldRank() == 0) {
    std::random_device random;
    for (int i = 0; i < 32; ++i) key[i] = "0123456789abcdef"[random() % 16];
  }
  MPI_Bcast(key, 33, MPI_CHAR, 0, MPI_COMM_WORLD);
  return key;
}

/// Input element i of rank r: halves and small integers, exact in bf16 and in every f32/bf16
/// sum below (|x| <= 11.5, so a sum over 4 ranks, |s| <= 46 in halves, needs at most 7 of
/// bf16's 8 significant bits).
double input(int r, size_t i, DataType t) {
  const double v = static_cast<double>((static_cast<int>(i) * 7 + r * 13) % 23) - 11.0;
  return t == DataType::I32 ? v * 1000 + r : v + (r % 2) * 0.5;
}

std::vector<char> encode(const std::vector<double>& v, DataType t) {
  std::vector<char> out(v.size() * elementBytes(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::F32) {
      float f = static_cast<float>(v[i]);
      std::memcpy(&out[i * 4], &f, 4);
    } else if (t == DataType::BF16) {
      uint16_t b = floatToBf16(static_cast<float>(v[i]));
      std::memcpy(&out[i * 2], &b, 2);
    } else {
      int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(&out[i * 4], &x, 4);
    }
  }
  return out;
}

std::vector<double> decode(const char* p, size_t n, DataType t) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (t == DataType::F32) {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      out[i] = f;
    } else if (t == DataType::BF16) {
      uint16_t b;
      std::memcpy(&b, p + i * 2, 2);
      out[i] = bf16ToFloat(b);
    } else {
      int32_t x;
      std::memcpy(&x, p + i * 4, 4);
      out[i] = x;
    }
  }
  return out;
}

/// op over ranks of input(r, i) by definition (Avg: truncated for i32, as NCCL's SumPostDiv).
double reference(size_t i, DataType t, RedOp op, int n, size_t offset = 0) {
  double acc = op == RedOp::Max ? -1e300 : 0;
  for (int r = 0; r < n; ++r) acc = op == RedOp::Max ? std::max(acc, input(r, offset + i, t)) : acc + input(r, offset + i, t);
  if (op == RedOp::Avg) acc = t == DataType::I32 ? std::trunc(acc / n) : acc / n;
  return acc;
}

/// Tolerance of an average: exact for sums and maxima of these inputs (they are exactly
/// representable, see input()). Avg premultiplies by 1/n and rounds each term and partial sum:
/// at most 2n roundings of values of at most 46 (see input()), each within half an ulp,
/// relatively 2^-24 in f32 and 2^-8 in bf16.
double tolerance(DataType t, RedOp op, int n) {
  if (op != RedOp::Avg || t == DataType::I32) return 0;
  return 2.0 * n * 46.0 * (t == DataType::F32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -8));
}

/// All ranks' bytes of `data` are equal (MPI all-gather).
void expectSameOnEveryRank(const std::vector<char>& data) {
  std::vector<char> all(data.size() * static_cast<size_t>(worldSize()));
  MPI_Allgather(data.data(), static_cast<int>(data.size()), MPI_BYTE, all.data(), static_cast<int>(data.size()),
                MPI_BYTE, MPI_COMM_WORLD);
  for (int r = 1; r < worldSize(); ++r)
    EXPECT_EQ(0, std::memcmp(all.data(), all.data() + r * data.size(), data.size())) << "rank " << r << " differs";
}

class StandinNccl : public ::testing::Test {
protected:
  void SetUp() override {
    transport = std::make_unique<SocketTransport>(sharedKey(), worldRank(), worldSize(), 60.0);
    c = std::make_unique<Collectives>(*transport);
  }
  std::unique_ptr<SocketTransport> transport;
  std::unique_ptr<Collectives> c;
  const std::vector<DataType> types{DataType::F32, DataType::BF16, DataType::I32};
  const std::vector<size_t> counts{1, 5, 7, 13, 67};
};

std::vector<double> rankInput(int r, size_t n, DataType t, size_t offset = 0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(r, offset + i, t);
  return v;
}

TEST_F(StandinNccl, AllReduceMatchesDefinitionAndIsBitwiseEqualOnEveryRank) {
  const int n = worldSize(), me = worldRank();
  for (DataType t : types)
    for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::Max})
      for (size_t count : counts)
        for (bool inPlace : {false, true}) {
          std::vector<char> send = encode(rankInput(me, count, t), t), recv(send.size(), 0x55);
          if (inPlace) c->allReduce(send.data(), send.data(), count, t, op);
          else c->allReduce(send.data(), recv.data(), count, t, op);
          const std::vector<char>& out = inPlace ? send : recv;
          std::vector<double> got = decode(out.data(), count, t);
          for (size_t i = 0; i < count; ++i)
            ASSERT_NEAR(got[i], reference(i, t, op, n), tolerance(t, op, n))
                << typeName(t) << " " << opName(op) << " count " << count << " element " << i;
          expectSameOnEveryRank(out);
        }
}

TEST_F(StandinNccl, AllGatherPlacesEveryRanksBlock) {
  const int n = worldSize(), me = worldRank();
  for (DataType t : types)
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        const size_t eb = elementBytes(t);
        std::vector<char> send = encode(rankInput(me, count, t), t), recv(count * n * eb, 0x55);
        const char* in = send.data();
        if (inPlace) {
          std::memcpy(recv.data() + me * count * eb, send.data(), count * eb);
          in = recv.data() + me * count * eb;
        }
        c->allGather(in, recv.data(), count, t);
        std::vector<double> got = decode(recv.data(), count * n, t);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(got[r * count + i], input(r, i, t)) << typeName(t) << " count " << count << " rank " << r;
      }
}

TEST_F(StandinNccl, ReduceScatterGivesEachRankItsReducedBlock) {
  const int n = worldSize(), me = worldRank();
  for (DataType t : types)
    for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::Max})
      for (size_t recvcount : counts)
        for (bool inPlace : {false, true}) {
          const size_t eb = elementBytes(t);
          std::vector<char> send = encode(rankInput(me, recvcount * n, t), t), recv(recvcount * eb, 0x55);
          char* out = inPlace ? send.data() + me * recvcount * eb : recv.data();
          c->reduceScatter(send.data(), out, recvcount, t, op);
          std::vector<double> got = decode(out, recvcount, t);
          for (size_t i = 0; i < recvcount; ++i)
            ASSERT_NEAR(got[i], reference(i, t, op, n, me * recvcount), tolerance(t, op, n))
                << typeName(t) << " " << opName(op) << " recvcount " << recvcount << " element " << i;
        }
}

TEST_F(StandinNccl, BroadcastCopiesTheRootsBuffer) {
  const int n = worldSize(), me = worldRank();
  for (int root = 0; root < n; ++root)
    for (DataType t : types)
      for (bool inPlace : {false, true}) {
        const size_t count = 13;
        std::vector<char> send = encode(rankInput(me, count, t), t), recv(count * elementBytes(t), 0x55);
        c->broadcast(send.data(), inPlace ? send.data() : recv.data(), count, t, root);
        std::vector<double> got = decode(inPlace ? send.data() : recv.data(), count, t);
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], input(root, i, t)) << "root " << root;
      }
}

TEST_F(StandinNccl, GroupedSendsAndReceivesInAnyOrder) {
  const int n = worldSize(), me = worldRank();
  const size_t count = 1 << 18;  // 1 MiB of f32: more than a socket buffer, so order matters
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<char> toNext = encode(rankInput(me, count, DataType::F32), DataType::F32);
  std::vector<char> fromPrev(toNext.size()), self(16), selfIn = encode({1, 2, 3, 4}, DataType::F32);
  std::vector<PointToPoint> ops{{false, prev, fromPrev.data(), count, DataType::F32},
                                {false, me, self.data(), 4, DataType::F32},
                                {true, next, toNext.data(), count, DataType::F32},
                                {true, me, selfIn.data(), 4, DataType::F32}};
  c->pointToPoint(ops);
  EXPECT_EQ(decode(fromPrev.data(), count, DataType::F32), rankInput(prev, count, DataType::F32));
  EXPECT_EQ(decode(self.data(), 4, DataType::F32), (std::vector<double>{1, 2, 3, 4}));
}

TEST_F(StandinNccl, AnUngroupedSendWaitsForItsReceive) {
  if (worldSize() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<float> data(4, 1.0f);
  // Rank 1 receives 300 ms late; rank 0's send must not complete before (NCCL's ncclSend
  // blocks until its ncclRecv progresses; only buffering would let it finish early).
  if (worldRank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    c->pointToPoint({{true, 1, data.data(), 4, DataType::F32}});
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 0.25) << "the send completed before its receive ran";
  } else if (worldRank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    c->pointToPoint({{false, 0, data.data(), 4, DataType::F32}});
  }
}

TEST_F(StandinNccl, ASendAndReceiveOfDifferentCountsBothFail) {
  if (worldSize() < 2 || worldRank() > 1) GTEST_SKIP() << "ranks 0 and 1";
  std::vector<float> data(5, 1.0f);
  try {
    if (worldRank() == 0) c->pointToPoint({{true, 1, data.data(), 4, DataType::F32}});
    else c->pointToPoint({{false, 0, data.data(), 5, DataType::F32}});
    FAIL() << "no error";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Usage);
    EXPECT_NE(std::string(e.what()).find(worldRank() == 0 ? "met an ncclRecv of 5 f32" : "met an ncclSend of 4 f32"),
              std::string::npos) << e.what();
  }
}

TEST_F(StandinNccl, RanksCallingDifferentCollectivesAllFailNamingBoth) {
  if (worldSize() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<float> buf(8 * worldSize(), 1.0f);
  try {
    if (worldRank() == 1) c->allGather(buf.data(), buf.data(), 8, DataType::F32);
    else c->allReduce(buf.data(), buf.data(), 8, DataType::F32, RedOp::Sum);
    FAIL() << "no error";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Usage);
    const std::string w = e.what();
    EXPECT_NE(w.find(worldRank() == 1 ? "called ncclAllReduce sum of 8 f32" : "rank 1 called ncclAllGather of 8 f32"),
              std::string::npos) << w;
  }
}

TEST_F(StandinNccl, AnAbortedPeerIsARemoteErrorNotAHang) {
  if (worldSize() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<float> buf(8, 1.0f);
  if (worldRank() == 1) {
    transport->abort();
    EXPECT_THROW(c->allReduce(buf.data(), buf.data(), 8, DataType::F32, RedOp::Sum), TransportError);
    return;
  }
  try {
    c->allReduce(buf.data(), buf.data(), 8, DataType::F32, RedOp::Sum);
    FAIL() << "no error";
  } catch (const TransportError& e) {
    // Rank 1 (or, with more ranks, a rank that already failed and left) closed its end.
    EXPECT_EQ(e.kind(), TransportError::Remote) << e.what();
    EXPECT_NE(std::string(e.what()).find("closed its connection"), std::string::npos) << e.what();
  }
}

TEST(StandinNcclThreads, ThreeRanksInOneProcess) {
  std::random_device random;
  const std::string key = "threads" + std::to_string(random());
  const int n = 3;
  std::vector<std::vector<double>> results(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      SocketTransport t(key, r, n, 60.0);
      Collectives c(t);
      std::vector<char> data = encode(rankInput(r, 7, DataType::F32), DataType::F32);
      c.allReduce(data.data(), data.data(), 7, DataType::F32, RedOp::Sum);
      results[r] = decode(data.data(), 7, DataType::F32);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < 7; ++i) EXPECT_EQ(results[r][i], reference(i, DataType::F32, RedOp::Sum, n));
}

TEST(StandinNcclReduce, Bf16RoundsEachPartialSumAndI32AvgTruncates) {
  // 256 + 1 + 1 in bf16 (8 significant bits): 256 + 1 rounds to 256 (to even), twice, so the
  // rank-order sum is 256, while one rounding of the exact 258 would give 258.
  std::vector<char> a = encode({256}, DataType::BF16), b = encode({1}, DataType::BF16), out(2);
  reduceInOrder(out.data(), {a.data(), b.data(), b.data()}, 1, DataType::BF16, RedOp::Sum, 3);
  EXPECT_EQ(decode(out.data(), 1, DataType::BF16)[0], 256.0);
  std::vector<char> x = encode({-7}, DataType::I32), y = encode({2}, DataType::I32), o(4);
  reduceInOrder(o.data(), {x.data(), y.data()}, 1, DataType::I32, RedOp::Avg, 2);
  EXPECT_EQ(decode(o.data(), 1, DataType::I32)[0], -2.0);  // -5 / 2 truncated toward zero
  EXPECT_TRUE(overlaps(100, 8, 104, 8));
  EXPECT_FALSE(overlaps(100, 4, 104, 8));
}

}  // namespace
}  // namespace tessel::standin::nccl

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
