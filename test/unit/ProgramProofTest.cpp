// The whole program's communication proof (runtime/exec/ProgramProof.h) on hand-built
// programs: commEvents reads every kind of communication step with the peers and groups the
// mesh arithmetic gives (the expected world ranks are worked out by hand from
// rank = ((pp * D) + dp) * T + tp, DeviceMesh.h), and proveProgram, run by every rank of an
// in-process world, accepts a consistent set of programs and rejects, on every rank with the
// same message naming the rank, the event index and its label: a send whose peer lacks the
// recv, two stages that both send first (deadlock under rendezvous), a collective in one
// stage's program only, a send and recv of different shapes, dp ranks whose gradient buckets
// differ in bytes and tp ranks that issue their all-reduces in different orders.
#include "runtime/exec/ProgramProof.h"
#include "test/support/ShardedPrograms.h"
#include "test/unit/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <thread>

namespace {

using namespace tessel::rt;
using tessel::test::buffer;
using pipeline::CommEvent;
using K = CollectiveStep::Kind;
using Phase = CollectiveStep::Phase;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

/// A send_recv step over pp: tensors[i] sent (i < sends) or received, to or from pp
/// coordinate peers[i].
CollectiveStep sendRecv(std::vector<int> tensors, std::vector<int64_t> peers, int64_t sends,
                        std::vector<std::string> names, int64_t stages = 2) {
  CollectiveStep c;
  c.kind = K::SendRecv;
  c.buffer = -1;
  c.tensors = std::move(tensors);
  c.peers = std::move(peers);
  c.sends = sends;
  c.names = std::move(names);
  c.axes = {"pp"};
  c.group = stages;
  return c;
}

/// An all-reduce half of `bucket` (buffer `flat` packing `tensor`) over `axes`.
CollectiveStep allReduce(K kind, int bucket, int flat, int tensor, const std::string& name,
                         std::vector<std::string> axes, int64_t group, bool synchronous) {
  CollectiveStep c;
  c.kind = kind;
  c.bucket = bucket;
  c.buffer = flat;
  c.tensors = {tensor};
  c.names = {name};
  c.reduce = "sum";
  c.axes = std::move(axes);
  c.group = group;
  c.synchronous = synchronous;
  return c;
}

/// An all_gather of `in` into `out` along dim 0 over `axes` (staging `staging`).
CollectiveStep allGather(Phase phase, int bucket, int in, int out, int staging, std::vector<std::string> axes,
                         int64_t group) {
  CollectiveStep c;
  c.kind = K::AllGather;
  c.phase = phase;
  c.bucket = bucket;
  c.buffer = staging;
  c.tensors = {in, out};
  c.names = {"blocks.0.mlp.fc.weight"};
  c.axes = std::move(axes);
  c.group = group;
  return c;
}

Program withSteps(std::vector<MeshAxis> mesh, std::vector<Buffer> buffers, std::vector<Step> steps) {
  Program p;
  p.mesh = std::move(mesh);
  p.buffers = std::move(buffers);
  Function f;
  f.name = "train_step";
  f.steps = std::move(steps);
  p.functions = {f};
  return p;
}

/// One stage of a pp=2,dp=2,tp=2 program using every kind of communication step.
Program threeDStage() {
  std::vector<Buffer> b = {buffer("%act", {4, 8}, BufferKind::Temp, 0),       // 0: sent
                           buffer("%grad", {4, 8}, BufferKind::Temp, 128),    // 1: received
                           buffer("%proj", {4, 8}, BufferKind::Temp, 256),    // 2: tp all-reduced
                           buffer("%flat0", {32}, BufferKind::Temp, 384),     // 3: its flat buffer
                           buffer("%dw", {6}, BufferKind::Temp, 512),         // 4: a gradient
                           buffer("%flat1", {6}, BufferKind::Temp, 576),      // 5: its bucket
                           buffer("%shard", {2, 3}, BufferKind::Temp, 640),   // 6: gathered
                           buffer("%full", {4, 3}, BufferKind::Temp, 704),    // 7: the gather's output
                           buffer("%stage", {12}, BufferKind::Temp, 768)};    // 8: its staging
  b[1].dtype = DType::BF16;
  b[1].shape = {4, 16};  // 128 bytes of bf16: same bytes as %act, another dtype and shape
  return withSteps({{"pp", 2}, {"dp", 2}, {"tp", 2}}, b,
                   {CopyStep{0, 2}, sendRecv({0, 1}, {1, 1}, 1, {"SEND_F mb 0 chunk 0", "RECV_B mb 0 chunk 0"}),
                    allReduce(K::AllReduceStart, 0, 3, 2, "blocks.0.attn.proj", {"tp"}, 2, true),
                    allReduce(K::AllReduceWait, 0, 3, 2, "blocks.0.attn.proj", {"tp"}, 2, true),
                    allReduce(K::AllReduceStart, 1, 5, 4, "blocks.0.mlp.fc.weight", {"dp"}, 2, false),
                    allGather(Phase::Whole, 0, 6, 7, 8, {"dp", "tp"}, 4),
                    allGather(Phase::Start, 2, 6, 7, 8, {"dp"}, 2), allGather(Phase::Wait, 2, 6, 7, 8, {"dp"}, 2),
                    allReduce(K::AllReduceWait, 1, 5, 4, "blocks.0.mlp.fc.weight", {"dp"}, 2, false)});
}

TEST(ProgramProof, CommEventsReadEveryKindOfStepWithWorldRanks) {
  const Program p = threeDStage();
  const MeshLayout mesh(p.mesh);
  // World rank 1 is (pp 0, dp 0, tp 1); its peer at pp coordinate 1 is (1, 0, 1) = 4 + 0 + 1 = 5.
  const std::vector<CommEvent> ev = commEvents(p, "train_step", mesh, 1);
  ASSERT_EQ(ev.size(), 7u);  // the synchronous all-reduce's wait is part of its collective
  EXPECT_EQ(ev[0].kind, CommEvent::Kind::P2P);
  EXPECT_EQ(ev[0].label, "@train_step step 1: send_recv SEND_F mb 0 chunk 0, RECV_B mb 0 chunk 0 over pp");
  ASSERT_EQ(ev[0].transfers.size(), 2u);
  EXPECT_TRUE(ev[0].transfers[0].send);
  EXPECT_EQ(ev[0].transfers[0].peer, 5);
  EXPECT_EQ(ev[0].transfers[0].bytes, 4 * 8 * 4);
  EXPECT_EQ(ev[0].transfers[0].dtype, "f32");
  EXPECT_EQ(ev[0].transfers[0].shape, (std::vector<int64_t>{4, 8}));
  EXPECT_FALSE(ev[0].transfers[1].send);
  EXPECT_EQ(ev[0].transfers[1].peer, 5);
  EXPECT_EQ(ev[0].transfers[1].dtype, "bf16");
  EXPECT_EQ(ev[0].transfers[1].shape, (std::vector<int64_t>{4, 16}));

  EXPECT_EQ(ev[1].kind, CommEvent::Kind::Collective);
  EXPECT_EQ(ev[1].label, "@train_step step 2: all_reduce 'blocks.0.attn.proj' over tp");
  EXPECT_EQ(ev[1].group, (std::vector<int>{0, 1}));  // (0, 0, tp 0) and (0, 0, tp 1)
  EXPECT_EQ(ev[1].op, "all_reduce sum");
  EXPECT_EQ(ev[1].bytes, 32 * 4);
  EXPECT_EQ(ev[1].dtype, "f32");

  EXPECT_EQ(ev[2].kind, CommEvent::Kind::Start);
  EXPECT_EQ(ev[2].label, "@train_step step 4: all_reduce start bucket 1 over dp");
  EXPECT_EQ(ev[2].group, (std::vector<int>{1, 3}));  // (0, dp 0, 1) and (0, dp 1, 1) = 2 + 1
  EXPECT_EQ(ev[2].slot, 1);
  EXPECT_EQ(ev[2].bytes, 6 * 4);

  EXPECT_EQ(ev[3].kind, CommEvent::Kind::Collective);
  EXPECT_EQ(ev[3].op, "all_gather dim 0");
  EXPECT_EQ(ev[3].group, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ev[3].bytes, 2 * 3 * 4);  // the input shard
  EXPECT_EQ(ev[3].label, "@train_step step 5: all_gather 'blocks.0.mlp.fc.weight' over dp,tp");

  EXPECT_EQ(ev[4].kind, CommEvent::Kind::Start);
  EXPECT_EQ(ev[4].slot, 2);
  EXPECT_EQ(ev[5].kind, CommEvent::Kind::Wait);
  EXPECT_EQ(ev[5].slot, 2);
  EXPECT_EQ(ev[5].group, (std::vector<int>{1, 3}));
  EXPECT_EQ(ev[6].kind, CommEvent::Kind::Wait);
  EXPECT_EQ(ev[6].slot, 1);
  EXPECT_EQ(ev[6].label, "@train_step step 8: all_reduce wait bucket 1 over dp");

  // A function the program lacks has no events; a program without a mesh communicates over
  // the whole world.
  EXPECT_TRUE(commEvents(p, "forward", mesh, 1).empty());
  Program flat = withSteps({}, {buffer("%g", {6}, BufferKind::Temp, 0), buffer("%f", {6}, BufferKind::Temp, 64)},
                           {allReduce(K::AllReduceStart, 0, 1, 0, "w", {"dp"}, 3, false),
                            allReduce(K::AllReduceWait, 0, 1, 0, "w", {"dp"}, 3, false)});
  EXPECT_EQ(commEvents(flat, "train_step", MeshLayout({{"world", 3}}), 2)[0].group, (std::vector<int>{0, 1, 2}));
}

/// Runs proveProgram on every rank of an in-process world, rank r with programs[r]: the
/// verdict of each rank ("" when it passed, else its error message).
std::vector<std::string> proveOnThreads(const std::vector<Program>& programs, pipeline::VerifyResult* result = nullptr) {
  const int n = static_cast<int>(programs.size());
  tessel::test::ThreadGroup group(n);
  std::vector<std::string> verdict(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      tessel::test::ThreadCommunicator comm(group, r);
      try {
        const pipeline::VerifyResult got = proveProgram(programs[static_cast<size_t>(r)], comm, "train_step");
        if (r == 0 && result) *result = got;
      } catch (const std::runtime_error& e) {
        verdict[static_cast<size_t>(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return verdict;
}

/// The one message every rank threw (a failure if some rank passed or the messages differ).
std::string proofError(const std::vector<Program>& programs) {
  const std::vector<std::string> verdict = proveOnThreads(programs);
  for (size_t r = 0; r < verdict.size(); ++r) {
    EXPECT_FALSE(verdict[r].empty()) << "rank " << r << " accepted";
    EXPECT_EQ(verdict[r], verdict[0]) << "rank " << r << " disagrees";
  }
  EXPECT_HAS(verdict[0], std::string("the compiled program can hang or mismatch: "));
  return verdict[0];
}

/// Stage `stage` of pp=2 with %a [4, 8] and %b [4, 8] (f32) and the given steps.
Program stage(std::vector<Step> steps) {
  return withSteps({{"pp", 2}}, {buffer("%a", {4, 8}, BufferKind::Temp, 0), buffer("%b", {4, 8}, BufferKind::Temp, 128),
                                 buffer("%flat", {32}, BufferKind::Temp, 256)},
                   std::move(steps));
}

TEST(ProgramProof, ConsistentStagesAndThreeDProgramsPass) {
  // 1F1B's pair: stage 0 sends then receives in one group, stage 1 receives then sends.
  pipeline::VerifyResult r;
  const std::vector<std::string> ok =
      proveOnThreads({stage({sendRecv({0, 1}, {1, 1}, 1, {"SEND_F mb 0 chunk 0", "RECV_B mb 0 chunk 0"})}),
                      stage({sendRecv({0}, {0}, 0, {"RECV_F mb 0 chunk 1"}), sendRecv({1}, {0}, 1, {"SEND_B mb 0 chunk 1"})})},
                     &r);
  EXPECT_EQ(ok, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(r.events, 3);
  EXPECT_EQ(r.p2pGroups, 3);
  // Eight ranks of the same 3-D stage program (peers at pp coordinate 1 on stage 0 and 0 on
  // stage 1): 7 events each, 4 of them collectives or starts.
  std::vector<Program> eight(8, threeDStage());
  for (int rank = 4; rank < 8; ++rank)
    std::get<CollectiveStep>(eight[static_cast<size_t>(rank)].functions[0].steps[1]).peers = {0, 0};
  // Stage 1 receives the f32 activation and sends the bf16 gradient: swap the roles.
  for (int rank = 4; rank < 8; ++rank) {
    auto& sr = std::get<CollectiveStep>(eight[static_cast<size_t>(rank)].functions[0].steps[1]);
    sr.tensors = {1, 0};
  }
  EXPECT_EQ(proveOnThreads(eight, &r), std::vector<std::string>(8, ""));
  EXPECT_EQ(r.events, 8 * 7);
  EXPECT_EQ(r.p2pGroups, 8);
  EXPECT_EQ(r.collectives, 8 * 4);
}

TEST(ProgramProof, SendWhosePeerLacksTheRecvIsNamed) {
  const std::string e =
      proofError({stage({CopyStep{0, 1}, sendRecv({0}, {1}, 1, {"SEND_F mb 0 chunk 0"})}), stage({CopyStep{0, 1}})});
  EXPECT_HAS(e, "rank 0, event 0 (@train_step step 1: send_recv SEND_F mb 0 chunk 0 over pp) sends to rank 1, which "
                "never receives it");
}

TEST(ProgramProof, TwoStagesThatBothSendFirstDeadlockUnderRendezvous) {
  // Each stage sends its activation in a group of its own before it receives: with large
  // messages neither send completes, as neither rank has posted its recv.
  const Step send0 = sendRecv({0}, {1}, 1, {"SEND_F mb 0 chunk 0"}), recv0 = sendRecv({1}, {1}, 0, {"RECV_B mb 0 chunk 0"});
  const Step send1 = sendRecv({0}, {0}, 1, {"SEND_B mb 0 chunk 1"}), recv1 = sendRecv({1}, {0}, 0, {"RECV_F mb 0 chunk 1"});
  const std::string e = proofError({stage({send0, recv0}), stage({send1, recv1})});
  EXPECT_HAS(e, "rank 0, event 0 (@train_step step 0: send_recv SEND_F mb 0 chunk 0 over pp) waits for");
  EXPECT_HAS(e, "rank 1 is blocked at event 0 (@train_step step 0: send_recv SEND_B mb 0 chunk 1 over pp)");
  EXPECT_HAS(e, "cycle");
}

TEST(ProgramProof, CollectiveInOneStagesProgramOnlyIsNamed) {
  // The loss all-reduce over pp issued by the last stage only: the first would never join.
  const Step loss = allReduce(K::AllReduceStart, 0, 2, 0, "loss", {"pp"}, 2, true);
  const Step lossWait = allReduce(K::AllReduceWait, 0, 2, 0, "loss", {"pp"}, 2, true);
  const std::string e = proofError({stage({CopyStep{0, 1}}), stage({CopyStep{0, 1}, loss, lossWait})});
  EXPECT_HAS(e, "rank 1, event 0 (@train_step step 1: all_reduce 'loss' over pp) is collective number 1 of the group "
                "{0,1}, which rank 0 never issues");
}

TEST(ProgramProof, ShapeMismatchBetweenSendAndRecvIsNamed) {
  Program receiver = stage({sendRecv({1}, {0}, 0, {"RECV_F mb 0 chunk 1"})});
  receiver.buffers[1].shape = {8, 4};  // the same 128 bytes of f32, transposed
  const std::string e = proofError({stage({sendRecv({0}, {1}, 1, {"SEND_F mb 0 chunk 0"})}), receiver});
  EXPECT_HAS(e, "rank 0, event 0 (@train_step step 0: send_recv SEND_F mb 0 chunk 0 over pp) sends 128 bytes f32 "
                "[4,8] to rank 1, but the recv it is paired with");
  EXPECT_HAS(e, "rank 1, event 0 (@train_step step 0: send_recv RECV_F mb 0 chunk 1 over pp), receives 128 bytes f32 "
                "[8,4]");
}

TEST(ProgramProof, DataAndTensorParallelCollectivesThatDifferAreNamed) {
  // dp=2: rank 1's gradient bucket packs twice the bytes of rank 0's.
  auto dpRank = [](int64_t elements) {
    return withSteps({{"dp", 2}}, {buffer("%dw", {elements}, BufferKind::Temp, 0),
                                   buffer("%flat", {elements}, BufferKind::Temp, 64)},
                     {allReduce(K::AllReduceStart, 0, 1, 0, "w", {"dp"}, 2, false),
                      allReduce(K::AllReduceWait, 0, 1, 0, "w", {"dp"}, 2, false)});
  };
  EXPECT_HAS(proofError({dpRank(6), dpRank(12)}),
             "rank 0, event 0 (@train_step step 0: all_reduce start bucket 0 over dp) (start all_reduce sum 24 bytes "
             "f32) is collective number 1 of the group {0,1}, but rank 1, event 0 (@train_step step 0: all_reduce "
             "start bucket 0 over dp) is (start all_reduce sum 48 bytes f32)");
  // tp=2: the two ranks issue two forward all-reduces of different sizes in opposite orders.
  auto tpRank = [](bool swapped) {
    const int first = swapped ? 1 : 0, second = 1 - first;
    auto pair = [](int t, const std::string& name) {
      return std::vector<Step>{allReduce(K::AllReduceStart, t, 2 + t, t, name, {"tp"}, 2, true),
                               allReduce(K::AllReduceWait, t, 2 + t, t, name, {"tp"}, 2, true)};
    };
    std::vector<Step> steps = pair(first, first ? "blocks.0.mlp.proj" : "blocks.0.attn.proj");
    for (Step& s : pair(second, second ? "blocks.0.mlp.proj" : "blocks.0.attn.proj")) steps.push_back(s);
    return withSteps({{"tp", 2}}, {buffer("%a", {8}, BufferKind::Temp, 0), buffer("%m", {16}, BufferKind::Temp, 64),
                                   buffer("%fa", {8}, BufferKind::Temp, 128), buffer("%fm", {16}, BufferKind::Temp, 192)},
                     steps);
  };
  EXPECT_HAS(proofError({tpRank(false), tpRank(true)}),
             "rank 0, event 0 (@train_step step 0: all_reduce 'blocks.0.attn.proj' over tp) (all_reduce sum 32 bytes "
             "f32) is collective number 1 of the group {0,1}, but rank 1, event 0 (@train_step step 0: all_reduce "
             "'blocks.0.mlp.proj' over tp) is (all_reduce sum 64 bytes f32)");
}

TEST(ProgramProof, OneRankProvesNothingAndProofLineCounts) {
  tessel::test::ThreadGroup group(1);
  tessel::test::ThreadCommunicator comm(group, 0);
  const pipeline::VerifyResult r = proveTraining(threeDStage(), comm);
  EXPECT_EQ(r.events, 0);
  EXPECT_EQ(proofLine(pipeline::VerifyResult{56, 8, 32}, 8),
            "proof: 56 events on 8 ranks (8 send/recv groups, 32 collectives): no rank can hang, every transfer and "
            "collective matches\n");
}

}  // namespace
