// Step traces (runtime/exec/Trace.h): idle time fills exactly the gaps between a step's
// direct children, recording stops when inactive, and the events are valid trace-event JSON.
#include "runtime/exec/Trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>

namespace tessel::rt {
namespace {

using Clock = TraceRecorder::Clock;
using std::chrono::microseconds;

TEST(Trace, IdleFillsTheGapsBetweenDirectChildren) {
  TraceRecorder trace;
  trace.alignClocks(nullptr);
  trace.setActive(true);
  const Clock::time_point t = Clock::now();
  auto at = [&](int us) { return t + microseconds(us); };
  // A step [0, 40) with children [10, 20) (holding [12, 15)) and [25, 30): idle is
  // [0, 10), [20, 25) and [30, 40), 25 us, and the children plus idle cover the step exactly.
  trace.complete("child", "function", at(10), at(20));
  trace.complete("grandchild", "kernel", at(12), at(15));
  trace.complete("child", "data", at(25), at(30));
  trace.fillIdle(at(0), at(40));
  double idle = 0;
  int idleEvents = 0;
  for (const TraceEvent& e : trace.events())
    if (e.category == "idle") idle += e.durationUs, ++idleEvents;
  EXPECT_EQ(idleEvents, 3);
  EXPECT_NEAR(idle, 25.0, 1e-6);  // microseconds from integer clock ticks; doubles round at 1e-9
}

TEST(Trace, NothingIsRecordedWhileInactive) {
  TraceRecorder trace;
  const Clock::time_point t = Clock::now();
  trace.complete("x", "kernel", t, t);
  { TraceScope scope(&trace, "y", "function"); }
  trace.fillIdle(t, t + microseconds(5));
  EXPECT_TRUE(trace.events().empty());
  trace.setActive(true);
  { TraceScope scope(&trace, "y", "function"); }
  EXPECT_EQ(trace.events().size(), 1u);
}

TEST(Trace, EventsAreTraceEventJson) {
  TraceRecorder trace;
  trace.setActive(true);
  const Clock::time_point t = Clock::now();
  trace.complete("k0_add", "kernel", t, t + microseconds(3), "model.h:1:2");
  nlohmann::json events = nlohmann::json::parse("[" + traceEventsJson(trace, 3, "host") + "]");
  ASSERT_EQ(events.size(), 4u);  // process name, sort index, thread name, the event
  EXPECT_EQ(events[0]["ph"], "M");
  EXPECT_EQ(events[0]["args"]["name"], "rank 3 (host)");
  const nlohmann::json& e = events[3];
  EXPECT_EQ(e["ph"], "X");
  EXPECT_EQ(e["pid"], 3);
  EXPECT_EQ(e["tid"], 0);
  EXPECT_EQ(e["cat"], "kernel");
  EXPECT_NEAR(e["dur"].get<double>(), 3.0, 1e-6);
  EXPECT_EQ(e["args"]["detail"], "model.h:1:2");
}

}  // namespace
}  // namespace tessel::rt
