// The pipeline cost model (runtime/pipeline/Simulate.h): the simulated bubble against the closed
// forms, the peak of live activations against their derivation, hand-derived timelines, and the
// chart and trace views.
#include "runtime/pipeline/Schedule.h"
#include "runtime/pipeline/Simulate.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using namespace tessel::rt::pipeline;

/// Uniform stages split evenly into v chunks: F = 1, B = 2 per stage, no p2p time.
Simulation uniform(ScheduleKind kind, int64_t p, int64_t m, int64_t v, double forward = 1, double backward = 2) {
  return simulate(buildSchedule({kind, p, m, v}), uniformCosts(p * v, forward / v, backward / v, 0));
}

// With uniform stages and no p2p time the closed forms are exact for these schedules (the
// simulator's makespan is a sum of whole costs), so 1% (the issue's bound) only absorbs
// rounding; zero-bubble's form needs M >= p and F = I = W (B = 2F).
TEST(PipelineSimulate, BubbleMatchesTheClosedForms) {
  int64_t checked = 0;
  for (int64_t p = 2; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
        const double expected = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
        EXPECT_NEAR(uniform(kind, p, m, 1).bubbleFraction, expected, 0.01 * expected) << p << " " << m;
        // The form does not depend on the F:B ratio.
        EXPECT_NEAR(uniform(kind, p, m, 1, 1, 3).bubbleFraction, expected, 0.01 * expected);
        EXPECT_DOUBLE_EQ(closedFormBubble(kind, p, m, 1), expected);
        ++checked;
      }
      for (int64_t v = 2; v <= 4 && m % p == 0; ++v) {
        const double expected = static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
        EXPECT_NEAR(uniform(ScheduleKind::Interleaved, p, m, v).bubbleFraction, expected, 0.01 * expected)
            << p << " " << m << " " << v;
        EXPECT_DOUBLE_EQ(closedFormBubble(ScheduleKind::Interleaved, p, m, v), expected);
        ++checked;
      }
      if (m >= p) {
        const double expected = static_cast<double>(p - 1) / static_cast<double>(3 * m + p - 1);
        EXPECT_NEAR(uniform(ScheduleKind::ZeroBubble, p, m, 1).bubbleFraction, expected, 0.01 * expected) << p << " " << m;
        ++checked;
      }
    }
  EXPECT_GT(checked, 300);
}

// Zero-bubble's point: with the same costs it beats 1F1B once M >= p, and never loses.
TEST(PipelineSimulate, ZeroBubbleIsNeverSlowerThanOneFOneB) {
  for (int64_t p = 2; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      const double zb = uniform(ScheduleKind::ZeroBubble, p, m, 1).makespan;
      const double ofob = uniform(ScheduleKind::OneFOneB, p, m, 1).makespan;
      EXPECT_LE(zb, ofob + 1e-9) << p << " " << m;  // both sums of whole costs; 1e-9 s: rounding only
      if (m >= p) {
        EXPECT_LT(zb, ofob) << p << " " << m;
      }
    }
}

// 1F1B, stage s: the warmup holds w = min(p - s - 1, M) forwards; if a steady phase follows
// (M > w) its first forward makes w + 1 live before the first backward frees one, and the
// alternation never exceeds that: peak = min(p - s, M). GPipe holds all M; zero-bubble at most
// min(p, M) on every stage, and reaches it (stage 0 runs min(p, M) forwards before any W).
TEST(PipelineSimulate, PeakLiveActivations) {
  for (int64_t p = 2; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      const Simulation ofob = uniform(ScheduleKind::OneFOneB, p, m, 1);
      const Simulation gpipe = uniform(ScheduleKind::GPipe, p, m, 1);
      const Simulation zb = uniform(ScheduleKind::ZeroBubble, p, m, 1);
      for (int64_t s = 0; s < p; ++s) {
        EXPECT_EQ(ofob.peakLiveActivations[s], std::min(p - s, m)) << p << " " << m << " stage " << s;
        EXPECT_EQ(gpipe.peakLiveActivations[s], m);
        EXPECT_LE(zb.peakLiveActivations[s], std::min(p, m));
      }
      EXPECT_EQ(zb.peakLiveActivations[0], std::min(p, m));
    }
}

// GPipe, p = 2, M = 1, F = 1, B = 2, p2p 0.5 (derived by hand): rank 0 runs F0 [0, 1] and
// posts its one group {SEND_F0, RECV_B0} at 1; rank 1's RECV_F0 (posted at 0) completes at
// 1 + 0.5, then F0 [1.5, 2.5], B0 [2.5, 4.5], SEND_B0 posted at 4.5; rank 0's group completes
// when its last transfer does, 4.5 + 0.5, so it waits [1, 4.5] and moves data [4.5, 5]; B0 [5, 7].
// Makespan 7, compute 6 of 2 x 7.
TEST(PipelineSimulate, HandDerivedTimelineWithP2p) {
  const Simulation sim = simulate(buildSchedule({ScheduleKind::GPipe, 2, 1, 1}), uniformCosts(2, 1, 2, 0.5));
  EXPECT_DOUBLE_EQ(sim.makespan, 7);
  EXPECT_DOUBLE_EQ(sim.bubbleFraction, 1 - 6.0 / 14.0);
  std::vector<std::string> rank0;
  for (const TimelineEvent& e : sim.events)
    if (e.rank == 0) rank0.push_back(e.name + "@" + std::to_string(e.start) + "-" + std::to_string(e.end));
  const std::vector<std::string> expected = {"F0.0@0.000000-1.000000", "idle@1.000000-4.500000",
                                             "0SEND_F0+0RECV_B0@4.500000-5.000000", "B0.0@5.000000-7.000000"};
  EXPECT_EQ(rank0, expected);
  // Every rank's events tile [0, makespan] and the bubble is the non-compute share.
  for (int64_t r = 0; r < 2; ++r) {
    double at = 0, compute = 0;
    for (const TimelineEvent& e : sim.events)
      if (e.rank == r) {
        EXPECT_DOUBLE_EQ(e.start, at);
        at = e.end;
        if (e.cat == "compute") compute += e.end - e.start;
      }
    EXPECT_DOUBLE_EQ(at, sim.makespan);
    EXPECT_DOUBLE_EQ(compute, 3);
  }
}

TEST(PipelineSimulate, BadCostsAreNamed) {
  const Schedule s = buildSchedule({ScheduleKind::OneFOneB, 2, 2, 1});
  StageCosts costs = uniformCosts(1, 1, 2, 0);
  try {
    simulate(s, costs);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("1F0 needs StageCosts::forward[1], but it has 1 entries"), std::string::npos)
        << e.what();
  }
  costs = uniformCosts(2, 1, -2, 0);
  EXPECT_THROW(simulate(s, costs), std::invalid_argument);
  costs = uniformCosts(2, 1, 2, NAN);
  EXPECT_THROW(simulate(s, costs), std::invalid_argument);
  EXPECT_THROW(closedFormBubble(ScheduleKind::GPipe, 0, 1, 1), std::invalid_argument);
}

// 1F1B, p = 2, M = 2, F = 1, B = 2 (by hand): rank 0 F0 F1, waits for B0's gradient (rank 1
// runs F0 [1, 2], B0 [2, 4]), B0 [4, 6], waits (rank 1 F1 [4, 5], B1 [5, 7]), B1 [7, 9]; rank 1
// is idle after 7.
TEST(PipelineChart, RowsAndPhases) {
  const std::string chart = asciiChart(buildSchedule({ScheduleKind::OneFOneB, 2, 2, 1}), uniformCosts(2, 1e-3, 2e-3, 0));
  EXPECT_NE(chart.find("rank  0 |F0 F1 .  .  B0 B0 .  B1 B1\n"), std::string::npos) << chart;
  EXPECT_NE(chart.find("rank  1 |.  F0 B0 B0 F1 B1 B1 .  .\n"), std::string::npos) << chart;
  EXPECT_NE(chart.find("rank  0: warmup 2 F, steady 0 F + 0 backward, cooldown 2 backward; peak live activations 2"),
            std::string::npos) << chart;
  EXPECT_NE(chart.find("makespan 9 ms, bubble fraction 0.3333"), std::string::npos) << chart;
  // Interleaved cells carry the chunk.
  const std::string il = asciiChart(buildSchedule({ScheduleKind::Interleaved, 2, 2, 2}), uniformCosts(4, 1e-3, 2e-3, 0));
  EXPECT_NE(il.find("rank  0 |F0.0 F1.0 F0.2"), std::string::npos) << il;
}

TEST(PipelineTrace, EventsNestPerRank) {
  const Simulation sim = simulate(buildSchedule({ScheduleKind::Interleaved, 4, 8, 2}), uniformCosts(8, 0.5e-3, 1e-3, 1e-4));
  const nlohmann::json events = nlohmann::json::parse(traceEvents(sim, {1, "predicted", true}).dump());
  ASSERT_TRUE(events.is_array());
  std::map<int64_t, std::vector<std::pair<double, double>>> spans;  // per rank: [ts, ts + dur], step first
  int64_t threadNames = 0, processNames = 0;
  for (const nlohmann::json& e : events) {
    if (e["ph"] == "M") {
      threadNames += e["name"] == "thread_name" && e["args"]["name"] == "predicted" && e["tid"] == 1;
      processNames += e["name"] == "process_name";
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    ASSERT_EQ(e["tid"], 1);
    const double ts = e["ts"], dur = e["dur"];
    EXPECT_GE(dur, 0);
    spans[e["pid"].get<int64_t>()].push_back({ts, ts + dur});
    if (e["cat"] == "compute") {
      EXPECT_TRUE(e["args"]["action"].is_string());
    }
  }
  EXPECT_EQ(threadNames, 4);
  EXPECT_EQ(processNames, 4);
  ASSERT_EQ(spans.size(), 4u);
  for (auto& [rank, list] : spans) {
    // The step encloses every event; the others are disjoint (in µs, whole nanoseconds).
    const auto step = list.front();
    EXPECT_DOUBLE_EQ(step.second - step.first, sim.makespan * 1e6);
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_GE(list[i].first, step.first);
      EXPECT_LE(list[i].second, step.second);
      if (i > 1) {
        // Boundaries are whole nanoseconds written as µs; 1e-9 µs absorbs the decimal round trip.
        EXPECT_LE(list[i - 1].second, list[i].first + 1e-9) << "rank " << rank << " event " << i;
      }
    }
  }
}

}  // namespace
