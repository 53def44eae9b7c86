// The built-in pipeline schedules (runtime/pipeline/Schedule.h) and their CSV form: every one
// passes the verifier wherever it is defined and is refused with a reason elsewhere; 1F1B's
// phases are the standard ones; the CSV round-trips and names the bad token.
#include "runtime/pipeline/Schedule.h"
#include "runtime/pipeline/Simulate.h"
#include "runtime/pipeline/Verify.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using namespace tessel::rt::pipeline;

const ScheduleKind kKinds[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                               ScheduleKind::ZeroBubble};

/// Where Schedule.h says each schedule is defined (written from the doc, not from the code).
bool defined(ScheduleKind kind, int64_t p, int64_t m, int64_t v) {
  if (kind == ScheduleKind::Interleaved) return p >= 2 && v >= 2 && m % p == 0;
  return v == 1;
}

TEST(PipelineSchedule, EveryBuiltinVerifiesWhereDefinedAndIsRefusedElsewhere) {
  int64_t verified = 0;
  for (ScheduleKind kind : kKinds)
    for (int64_t p = 2; p <= 8; ++p)
      for (int64_t m = 1; m <= 16; ++m)
        for (int64_t v = 1; v <= 4; ++v) {
          const ScheduleSpec spec{kind, p, m, v};
          SCOPED_TRACE(testing::Message() << scheduleKindName(kind) << " p=" << p << " M=" << m << " v=" << v);
          if (!defined(kind, p, m, v)) {
            EXPECT_THROW(buildSchedule(spec), std::invalid_argument);
            continue;
          }
          const Schedule s = buildSchedule(spec);
          ASSERT_EQ(static_cast<int64_t>(s.size()), p);
          try {
            verifySchedule(s, p, m, v);
            ++verified;
          } catch (const ScheduleError& e) {
            ADD_FAILURE() << e.what();
          }
        }
  // 7 p x 16 M for each of gpipe, 1f1b, zero-bubble; interleaved: v in 2..4 and M a multiple of p.
  int64_t interleaved = 0;
  for (int64_t p = 2; p <= 8; ++p) interleaved += 3 * (16 / p);
  EXPECT_EQ(verified, 3 * 7 * 16 + interleaved);
}

TEST(PipelineSchedule, RefusalsSayWhy) {
  auto message = [](const ScheduleSpec& spec) {
    try {
      buildSchedule(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message({ScheduleKind::Interleaved, 4, 2, 2}).find("needs a multiple of the pipeline size"), std::string::npos);
  EXPECT_NE(message({ScheduleKind::Interleaved, 4, 4, 1}).find("at least 2"), std::string::npos);
  EXPECT_NE(message({ScheduleKind::OneFOneB, 4, 4, 2}).find("only interleaved"), std::string::npos);
  EXPECT_NE(message({ScheduleKind::GPipe, 4, 0, 1}).find("0 microbatches"), std::string::npos);
  EXPECT_THROW(parseScheduleKind("1F1B-interleaved"), std::invalid_argument);
  for (ScheduleKind k : kKinds) EXPECT_EQ(parseScheduleKind(scheduleKindName(k)), k);
}

/// 1F1B on stage s: min(p - s - 1, M) warmup forwards, then alternating, and its comm actions
/// exactly where Megatron-LM places them (the design's two-rank example, written by hand).
TEST(PipelineSchedule, OneFOneBIsTheStandardOne) {
  const Schedule s = buildSchedule({ScheduleKind::OneFOneB, 2, 2, 1});
  EXPECT_EQ(scheduleCsv(s), "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n");
  for (int64_t p = 2; p <= 8; ++p) {
    const int64_t m = 2 * p;  // >= p - s + 1 on every stage, so the phases are unambiguous
    const Schedule big = buildSchedule({ScheduleKind::OneFOneB, p, m, 1});
    for (int64_t st = 0; st < p; ++st) {
      const Phases ph = phasesOf(big[st]);
      EXPECT_EQ(ph.warmup, p - st - 1) << "p=" << p << " stage " << st;
      EXPECT_EQ(ph.steady, m - (p - st - 1));
      EXPECT_EQ(ph.cooldown, p - st - 1);
    }
  }
  // M < p: the warmup is clamped to M (all forwards, then all backwards).
  const Phases clamped = phasesOf(buildSchedule({ScheduleKind::OneFOneB, 8, 3, 1})[0]);
  EXPECT_EQ(clamped.warmup, 3);
  EXPECT_EQ(clamped.steady, 0);
}

/// Interleaved: Megatron-LM's order for p = 2, v = 2, M = 4 on rank 0 (virtual steps k: microbatch
/// (k / 4) * 2 + k % 2, local chunk (k % 4) / 2; warmup (p - 1) * 2 + (v - 1) * p = 4).
TEST(PipelineSchedule, InterleavedFollowsMegatron) {
  const Schedule s = buildSchedule({ScheduleKind::Interleaved, 2, 4, 2});
  std::vector<std::string> compute;
  for (const Action& a : s[0])
    if (a.isCompute()) compute.push_back(a.text());
  const std::vector<std::string> expected = {"0F0", "0F1", "2F0", "2F1",            // warmup
                                             "0F2", "2B0", "0F3", "2B1",            // steady: F then B
                                             "2F2", "0B0", "2F3", "0B1",
                                             "2B2", "2B3", "0B2", "0B3"};          // cooldown
  EXPECT_EQ(compute, expected);
}

TEST(PipelineSchedule, ZeroBubbleSplitsBackwardAndDefersW) {
  const int64_t p = 4, m = 8;
  const Schedule s = buildSchedule({ScheduleKind::ZeroBubble, p, m, 1});
  for (int64_t st = 0; st < p; ++st) {
    int64_t f = 0, i = 0, w = 0, b = 0, firstW = -1, iBeforeFirstW = 0;
    for (const Action& a : s[st]) {
      f += a.kind == ActionKind::F, i += a.kind == ActionKind::I, b += a.kind == ActionKind::B;
      if (a.kind == ActionKind::W && firstW < 0) firstW = w, iBeforeFirstW = i;
      w += a.kind == ActionKind::W;
    }
    EXPECT_EQ(f, m);
    EXPECT_EQ(i, m);
    EXPECT_EQ(w, m);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(iBeforeFirstW, st + 1) << "stage " << st << " defers its first " << st << " W's";
  }
}

TEST(PipelineScheduleCsv, RoundTripsEveryBuiltin) {
  for (ScheduleKind kind : kKinds) {
    const int64_t v = kind == ScheduleKind::Interleaved ? 2 : 1;
    const Schedule s = buildSchedule({kind, 4, 8, v});
    const std::string csv = scheduleCsv(s);
    EXPECT_EQ(parseScheduleCsv(csv, "x.csv"), s) << scheduleKindName(kind);
    EXPECT_EQ(parseScheduleCsv("# a comment\n\n" + csv + "\n# the end\n", "x.csv"), s);
  }
  // Spaces, trailing empty cells (PyTorch's None) and a trailing comment are accepted.
  const Schedule s = parseScheduleCsv(" 0F0 , 0SEND_F0,, # rank 0\n1RECV_F0,1F0,\n", "x.csv");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].size(), 2u);
  EXPECT_EQ(s[1][1], (Action{ActionKind::F, 0, 1}));
}

TEST(PipelineScheduleCsv, ParseErrorsNameFileLineAndToken) {
  auto error = [](const std::string& text) -> std::pair<std::string, ScheduleError> {
    try {
      parseScheduleCsv(text, "sched.csv");
    } catch (const ScheduleError& e) {
      return {e.what(), e};
    }
    return {"(accepted)", ScheduleError(-2, -2, "")};
  };
  auto [m1, e1] = error("# rank 0\n0F0,0SEND_F0\n1RECV_F0,1X0\n");
  EXPECT_NE(m1.find("sched.csv:3:"), std::string::npos) << m1;
  EXPECT_NE(m1.find("'1X0'"), std::string::npos) << m1;
  EXPECT_EQ(e1.rank, 1);
  EXPECT_EQ(e1.index, 1);
  EXPECT_NE(error("0F\n").first.find("no microbatch"), std::string::npos);
  EXPECT_NE(error("F0\n").first.find("does not start with a stage"), std::string::npos);
  EXPECT_NE(error("0UNSHARD\n").first.find("FSDP"), std::string::npos);
  EXPECT_NE(error("0F1x\n").first.find("not a number"), std::string::npos);
  EXPECT_NE(error("# only a comment\n").first.find("no rows"), std::string::npos);
  EXPECT_EQ(parseAction("12RECV_B345"), (Action{ActionKind::RecvB, 345, 12}));
  EXPECT_EQ((Action{ActionKind::SendF, 2, 1}).text(), "1SEND_F2");
}

}  // namespace
