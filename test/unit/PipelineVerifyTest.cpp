// The pipeline verifier (runtime/pipeline/Verify.h): hand-written bad schedules and event lists
// are rejected with the offending action named (rank, index, action, what it waits for), and
// correct ones, including a 3-D-like program (p2p + dp all-reduces + tp collectives), pass.
#include "runtime/pipeline/Schedule.h"
#include "runtime/pipeline/Simulate.h"
#include "runtime/pipeline/Verify.h"

#include <gtest/gtest.h>

namespace {

using namespace tessel::rt::pipeline;

struct Caught {
  std::string message;
  int64_t rank = -2, index = -2;
};

Caught verifyCsv(const std::string& csv, int64_t p, int64_t m, int64_t v = 1) {
  try {
    verifySchedule(parseScheduleCsv(csv, "test.csv"), p, m, v);
  } catch (const ScheduleError& e) {
    return {e.what(), e.rank, e.index};
  }
  return {"(verified)"};
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

/// The schedule is rejected at (rank, index) with a message holding `part`.
void expectFault(const std::string& csv, int64_t p, int64_t m, int64_t rank, int64_t index, const std::string& part) {
  const Caught c = verifyCsv(csv, p, m);
  EXPECT_EQ(c.rank, rank) << c.message;
  EXPECT_EQ(c.index, index) << c.message;
  EXPECT_HAS(c.message, part);
}

// The design's two-rank 1F1B example: the reference every fault below is made from.
const char* kGood = "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";

TEST(PipelineVerify, TheDesignExamplePasses) { EXPECT_EQ(verifyCsv(kGood, 2, 2).message, "(verified)"); }

TEST(PipelineVerify, MissingRecvNamesTheActionThatWaitsForIt) {
  expectFault("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
              "1RECV_F0,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n", 2, 2, 1, 4,
              "rank 1, action 4 (1F1) waits for 1RECV_F1 (its input), which is not earlier in rank 1's list");
}

// A dangling send: rank 1's list stops after microbatch 0, so rank 0's SEND_F1 has no recv.
// (A recv missing before its consumer is reported at the consumer, above.)
TEST(PipelineVerify, SendWhoseRecvNeverExists) {
  expectFault("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
              "1RECV_F0,1F0,1B0,1SEND_B0\n", 2, 2, 0, 3,
              "rank 0, action 3 (0SEND_F1) sends to rank 1, which never receives it: rank 1 posts 1 recv(s) "
              "from rank 0 and this is send number 2");
  // The other way: a recv whose send never exists (rank 1 forgot SEND_B0).
  const Caught r = verifyCsv("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0\n", 2, 1);
  EXPECT_HAS(r.message, "rank 0, action 2 (0RECV_B0) receives from rank 1, which never sends it: rank 1 posts 0 send(s) "
                        "to rank 0 and this is recv number 1");
}

// The same at the event level (a compiled program's send_recv steps).
TEST(PipelineVerifyEvents, SendWhoseRecvNeverExists) {
  std::vector<std::vector<CommEvent>> ev(2);
  auto p2p = [](const std::string& label, bool send, int peer) {
    CommEvent e;
    e.label = label;
    e.transfers = {Transfer{send, peer, 64, "f32", {4, 4}}};
    return e;
  };
  ev[0] = {p2p("SEND_F mb 0 chunk 0", true, 1), p2p("SEND_F mb 1 chunk 0", true, 1)};
  ev[1] = {p2p("RECV_F mb 0 chunk 1", false, 0)};
  try {
    verifyEvents(ev);
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.rank, 0);
    EXPECT_EQ(e.index, 1);
    EXPECT_HAS(std::string(e.what()), "rank 0, event 1 (SEND_F mb 1 chunk 0) sends to rank 1, which never receives "
                                      "it: rank 1 posts 1 recv(s) from rank 0 and this is number 2");
  }
}

// Criss-crossed sends: each rank sends in a group of its own before it receives, so with
// rendezvous sends (large messages, NCCL) rank 0 waits for rank 1's RECV_F1 while rank 1 waits
// for rank 0's RECV_B0. Buffered (eager) sends would hide it on small messages.
TEST(PipelineVerify, CrissCrossedSendsDeadlockUnderRendezvous) {
  const std::string csv = "0F0,0SEND_F0,0F1,0SEND_F1,0F2,0SEND_F2,0RECV_B0,0I0,0W0,0RECV_B1,0I1,0W1,0RECV_B2,0I2,0W2\n"
                          "1RECV_F0,1F0,1I0,1SEND_B0,1W0,1RECV_F1,1F1,1I1,1SEND_B1,1W1,1RECV_F2,1F2,1I2,1SEND_B2,1W2\n";
  expectFault(csv, 2, 3, 0, 3,
              "rank 0, action 3 (0SEND_F1) waits for rank 1 to post action 5 (1RECV_F1) (rank 1 is blocked "
              "at action 3 (1SEND_B0)); cycle of waits: rank 0 (action 3) -> rank 1 (action 3) -> rank 0");
  // The same order with rank 1's send grouped with its next recv (no W between them) passes.
  std::string fixed = csv;
  fixed.replace(fixed.find("1SEND_B0,1W0,1RECV_F1"), 21, "1W0,1SEND_B0,1RECV_F1");
  fixed.replace(fixed.find("1SEND_B1,1W1,1RECV_F2"), 21, "1W1,1SEND_B1,1RECV_F2");
  EXPECT_EQ(verifyCsv(fixed, 2, 3).message, "(verified)");
}

// Swapped send order on one channel: FIFO matching pairs 0SEND_F1 with 1RECV_F0.
TEST(PipelineVerify, SwappedSendOrderOnAChannel) {
  expectFault("0F0,0F1,0SEND_F1,0SEND_F0,0RECV_B0,0B0,0RECV_B1,0B1\n"
              "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n", 2, 2, 0, 2,
              "(0SEND_F1) is send number 1 on the channel rank 0 -> rank 1, so it pairs (FIFO order) with "
              "recv number 1 there, rank 1, action 0 (1RECV_F0), which is not 1RECV_F1");
}

// Megatron-LM's interleaved order needs M >= p (microbatches enter a chunk in rounds of p): with
// M = 2 < p = 4 the order (written here from the formula, without buildSchedule's check) runs
// microbatches that do not exist.
TEST(PipelineVerify, InterleavedWithFewerMicrobatchesThanStagesIsRejected) {
  const int64_t p = 4, m = 2, v = 2;
  Schedule compute(p);
  for (int64_t r = 0; r < p; ++r)
    for (int64_t k = 0; k < m * v; ++k)
      compute[r].push_back({ActionKind::F, (k / (p * v)) * p + k % p, ((k % (p * v)) / p) * p + r});
  try {
    verifySchedule(withCommunication(compute, p, v), p, m, v);
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.rank, 0);
    EXPECT_HAS(std::string(e.what()), "(0F2) names microbatch 2, but there are 2");
  }
  EXPECT_THROW(buildSchedule({ScheduleKind::Interleaved, p, m, v}), std::invalid_argument);
}

TEST(PipelineVerify, StructuralFaultsAreNamed) {
  EXPECT_HAS(verifyCsv(kGood, 3, 2).message, "the schedule has 2 rank(s) (rows), but the pipeline has 3");
  EXPECT_HAS(verifyCsv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0F1\n1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,"
                       "1F1,1B1,1SEND_B1\n", 2, 2).message, "rank 0, action 8 (0F1) appears twice (first at action 2)");
  EXPECT_HAS(verifyCsv("1F0\n0F0\n", 2, 1).message, "rank 0, action 0 (1F0) runs on rank 0, but chunk 1 belongs to rank 1");
  EXPECT_HAS(verifyCsv("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1SEND_B0\n", 2, 1).message,
             "rank 1, action 2 (1SEND_B0) waits for 1I0 (the backward whose input gradient it sends)");
  EXPECT_HAS(verifyCsv("0F0,0SEND_F0\n1RECV_F0,1F0,1B0\n", 2, 1).message,
             "rank 0, action 2 (the end of its list): chunk 0 microbatch 0 has no backward (0B0 or 0I0)");
  EXPECT_HAS(verifyCsv("0F0,0I0,0B0\n", 1, 1).message, "has both a full backward B and a split one");
  EXPECT_HAS(verifyCsv("0F0,0W0\n", 1, 1).message, "(0W0) waits for 0I0 (the input gradient that W completes)");
  EXPECT_HAS(verifyCsv("0F0,0SEND_F0\n", 1, 1).message, "(0SEND_F0) has no peer: chunk 0 is the last chunk");
  EXPECT_EQ(verifyCsv("0F0,1F0,1I0,0B0,1W0\n", 1, 1, 2).message, "(verified)");  // one rank, two local chunks
  EXPECT_HAS(verifyCsv("0F0,1F0,0B0,1B0\n", 1, 1, 2).message, "(0B0) waits for 1I0 (its output's gradient)");
}

CommEvent collective(const std::string& label, std::vector<int> group, const std::string& op = "all_reduce sum",
                     int64_t bytes = 1024, CommEvent::Kind kind = CommEvent::Kind::Collective, int64_t slot = -1) {
  CommEvent e;
  e.kind = kind;
  e.label = label;
  e.group = std::move(group);
  e.op = op;
  e.bytes = bytes;
  e.dtype = "f32";
  e.slot = slot;
  return e;
}
CommEvent wait(const std::string& label, std::vector<int> group, int64_t slot) {
  CommEvent e;
  e.kind = CommEvent::Kind::Wait;
  e.label = label;
  e.group = std::move(group);
  e.slot = slot;
  return e;
}
CommEvent p2p(const std::string& label, std::vector<Transfer> transfers) {
  CommEvent e;
  e.label = label;
  e.transfers = std::move(transfers);
  return e;
}

std::string eventError(const std::vector<std::vector<CommEvent>>& ev) {
  try {
    verifyEvents(ev);
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "(verified)";
}

/// pp = 2 (outermost), dp = 2, tp = 2: world rank = 4 pp + 2 dp + tp. Each rank: two microbatches
/// in 1F1B order; per forward and backward a tp all-reduce; the stage boundary by send/recv with
/// the rank of the other pp coordinate; at the end the dp gradient all-reduce started
/// asynchronously and waited for, and the loss all-reduce over pp.
std::vector<std::vector<CommEvent>> threeD() {
  std::vector<std::vector<CommEvent>> ev(8);
  const Transfer act{false, 0, 4096, "f32", {8, 128}};
  for (int r = 0; r < 8; ++r) {
    const int pp = r / 4, dp = (r / 2) % 2, tp = r % 2;
    const std::vector<int> tpGroup = {r - tp, r - tp + 1}, dpGroup = {pp * 4 + tp, pp * 4 + 2 + tp};
    const std::vector<int> ppGroup = {dp * 2 + tp, 4 + dp * 2 + tp};
    const int peer = pp == 0 ? r + 4 : r - 4;
    auto xfer = [&](bool send) { Transfer t = act; t.send = send; t.peer = peer; return t; };
    auto& e = ev[r];
    auto tpAr = [&](const char* what) { e.push_back(collective(std::string("all_reduce tp ") + what, tpGroup)); };
    if (pp == 0) {  // 0F0 0F1 | 0B0 0B1 (warmup 1)
      tpAr("F0"), e.push_back(p2p("SEND_F mb 0", {xfer(true)}));
      tpAr("F1"), e.push_back(p2p("SEND_F mb 1 + RECV_B mb 0", {xfer(true), xfer(false)}));
      tpAr("B0"), e.push_back(p2p("RECV_B mb 1", {xfer(false)}));
      tpAr("B1");
    } else {  // 1F0 1B0 1F1 1B1
      e.push_back(p2p("RECV_F mb 0", {xfer(false)}));
      tpAr("F0"), tpAr("B0");
      e.push_back(p2p("SEND_B mb 0 + RECV_F mb 1", {xfer(true), xfer(false)}));
      tpAr("F1"), tpAr("B1");
      e.push_back(p2p("SEND_B mb 1", {xfer(true)}));
    }
    e.push_back(collective("all_reduce dp bucket 0", dpGroup, "all_reduce sum", 65536, CommEvent::Kind::Start, 0));
    e.push_back(collective("all_reduce pp loss", ppGroup, "all_reduce sum", 4));
    e.push_back(wait("wait dp bucket 0", dpGroup, 0));
  }
  return ev;
}

TEST(PipelineVerifyEvents, ThreeDProgramPasses) {
  const VerifyResult r = verifyEvents(threeD());
  EXPECT_EQ(r.p2pGroups, 8 * 3);
  EXPECT_EQ(r.collectives, 8 * (4 + 2));
  EXPECT_EQ(r.events, 8 * (3 + 4 + 3));
}

TEST(PipelineVerifyEvents, CollectiveOnOneRankOnly) {
  auto ev = threeD();
  ev[5].push_back(collective("all_reduce tp extra", {4, 5}));
  EXPECT_HAS(eventError(ev), "rank 5, event 10 (all_reduce tp extra) is collective number 5 of the group {4,5}, which "
                             "rank 4 never issues (rank 4 issues 4 in that group)");
  // In the middle of identical ones, the first that has no partner left is named.
  ev = threeD();
  ev[5].insert(ev[5].begin() + 2, collective("all_reduce tp extra", {4, 5}));
  EXPECT_HAS(eventError(ev), "rank 5, event 6 (all_reduce tp B1) is collective number 5 of the group {4,5}, which "
                             "rank 4 never issues");
}

TEST(PipelineVerifyEvents, MismatchedCollectivesAndTransfers) {
  auto ev = threeD();
  ev[3][0].bytes = 2048;  // rank 3's first tp all-reduce
  EXPECT_HAS(eventError(ev), "rank 2, event 0 (all_reduce tp F0) (all_reduce sum 1024 bytes f32) is collective number 1 "
                             "of the group {2,3}, but rank 3, event 0 (all_reduce tp F0) is (all_reduce sum 2048 bytes f32)");
  ev = threeD();
  ev[4][0].transfers[0].shape = {8, 64};
  EXPECT_HAS(eventError(ev), "rank 0, event 1 (SEND_F mb 0) sends 4096 bytes f32 [8,128] to rank 4, but the recv it is "
                             "paired with (position 1 on the channel 0 -> 4), rank 4, event 0 (RECV_F mb 0), receives "
                             "4096 bytes f32 [8,64]");
  ev = threeD();
  ev[6][7].kind = CommEvent::Kind::Collective;  // rank 6's dp all-reduce made synchronous: no longer a start
  EXPECT_HAS(eventError(ev), "rank 4, event 7 (all_reduce dp bucket 0) (start all_reduce sum 65536 bytes f32) is "
                             "collective number 1 of the group {4,6}, but rank 6, event 7 (all_reduce dp bucket 0) is "
                             "(all_reduce sum 65536 bytes f32)");
}

TEST(PipelineVerifyEvents, StartsAndWaits) {
  auto ev = threeD();
  ev[1].pop_back();  // the wait
  EXPECT_HAS(eventError(ev), "rank 1, event 7 (all_reduce dp bucket 0) starts slot 0, which no later wait on rank 1 waits for");
  ev = threeD();
  ev[1].back().slot = 3;
  EXPECT_HAS(eventError(ev), "rank 1, event 9 (wait dp bucket 0) waits for slot 3, which no earlier start on rank 1 has");
  ev = threeD();
  ev[1].insert(ev[1].begin(), wait("early wait", {1, 3}, 0));
  EXPECT_HAS(eventError(ev), "rank 1, event 0 (early wait) waits for slot 0, which no earlier start on rank 1 has");
}

// A start does not block: rank 0 starts an all-reduce, then sends to rank 1, which receives
// before it starts its own. With a synchronous all-reduce the same order is a cycle.
TEST(PipelineVerifyEvents, AsyncStartDoesNotBlockButASyncCollectiveDeadlocks) {
  const Transfer send{true, 1, 16, "f32", {4}}, recv{false, 0, 16, "f32", {4}};
  std::vector<std::vector<CommEvent>> ev = {
      {collective("all_reduce start", {0, 1}, "all_reduce sum", 64, CommEvent::Kind::Start, 0), p2p("send", {send}),
       wait("all_reduce wait", {0, 1}, 0)},
      {p2p("recv", {recv}), collective("all_reduce start", {0, 1}, "all_reduce sum", 64, CommEvent::Kind::Start, 0),
       wait("all_reduce wait", {0, 1}, 0)}};
  EXPECT_EQ(eventError(ev), "(verified)");
  ev[0] = {collective("all_reduce", {0, 1}, "all_reduce sum", 64), p2p("send", {send})};
  ev[1] = {p2p("recv", {recv}), collective("all_reduce", {0, 1}, "all_reduce sum", 64)};
  EXPECT_EQ(eventError(ev), "rank 0, event 0 (all_reduce) waits for rank 1 to reach event 1 (all_reduce) (rank 1 is "
                            "blocked at event 0 (recv)); cycle of waits: rank 0 (event 0) -> rank 1 (event 0) -> rank 0");
  // A wait's deadlock names the start it waits for.
  ev[0] = {collective("start", {0, 1}, "all_reduce sum", 64, CommEvent::Kind::Start, 0), wait("wait", {0, 1}, 0),
           p2p("send", {send})};
  ev[1] = {p2p("recv", {recv}), collective("start", {0, 1}, "all_reduce sum", 64, CommEvent::Kind::Start, 0),
           wait("wait", {0, 1}, 0)};
  EXPECT_HAS(eventError(ev), "rank 0, event 1 (wait) waits for rank 1 to issue event 1 (start)");
}

// Three ranks, three pairwise groups, each rank issuing its two collectives in an order that
// closes a cycle of three.
TEST(PipelineVerifyEvents, CycleOfThreeCollectives) {
  std::vector<std::vector<CommEvent>> ev = {
      {collective("ar01", {0, 1}), collective("ar02", {0, 2})},
      {collective("ar12", {1, 2}), collective("ar01", {0, 1})},
      {collective("ar02", {0, 2}), collective("ar12", {1, 2})}};
  EXPECT_EQ(eventError(ev), "rank 0, event 0 (ar01) waits for rank 1 to reach event 1 (ar01) (rank 1 is blocked at "
                            "event 0 (ar12)); cycle of waits: rank 0 (event 0) -> rank 1 (event 0) -> rank 2 (event 0) "
                            "-> rank 0");
  ev[0][0].group = {1, 0};
  EXPECT_HAS(eventError(ev), "rank 0, event 0 (ar01) has the group {1,0}, which is not an ascending set");
  ev = {{p2p("self", {Transfer{true, 0, 4, "f32", {1}}})}};
  EXPECT_HAS(eventError(ev), "sends to rank 0, which is not another rank of the job (1 ranks)");
}

}  // namespace

namespace {

// The whole class of single-action faults: deleting any one action of a correct schedule is
// rejected (a compute action leaves its (microbatch, chunk) incomplete, a comm action leaves its
// pair unmatched), and swapping any two adjacent actions either is rejected with a ScheduleError
// or yields a schedule the simulator runs to the end (the verifier's acceptance means no
// deadlock). Exhaustive over the positions of four small schedules.
TEST(PipelineVerify, EverySingleDeletionIsRejectedAndAcceptedSwapsRun) {
  const ScheduleSpec specs[] = {{ScheduleKind::OneFOneB, 3, 4, 1}, {ScheduleKind::GPipe, 2, 3, 1},
                                {ScheduleKind::Interleaved, 2, 2, 2}, {ScheduleKind::ZeroBubble, 3, 3, 1}};
  for (const ScheduleSpec& spec : specs) {
    const Schedule good = buildSchedule(spec);
    int64_t accepted = 0, rejected = 0;
    for (size_t r = 0; r < good.size(); ++r)
      for (size_t i = 0; i < good[r].size(); ++i) {
        Schedule cut = good;
        cut[r].erase(cut[r].begin() + static_cast<std::ptrdiff_t>(i));
        EXPECT_THROW(verifySchedule(cut, spec.ranks, spec.microbatches, spec.virtualStages), ScheduleError)
            << scheduleKindName(spec.kind) << " without rank " << r << " action " << i;
        if (i + 1 == good[r].size()) continue;
        Schedule swapped = good;
        std::swap(swapped[r][i], swapped[r][i + 1]);
        try {
          verifySchedule(swapped, spec.ranks, spec.microbatches, spec.virtualStages);
          EXPECT_NO_THROW(simulate(swapped, uniformCosts(spec.ranks * spec.virtualStages, 1, 2, 0.1)));
          ++accepted;
        } catch (const ScheduleError&) {
          ++rejected;
        }
      }
    // Both outcomes occur (swapping two comm actions of one group changes nothing; swapping a
    // recv after its consumer breaks it).
    EXPECT_GT(accepted, 0) << scheduleKindName(spec.kind);
    EXPECT_GT(rejected, 0) << scheduleKindName(spec.kind);
  }
}

}  // namespace
