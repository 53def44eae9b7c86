// The rendezvous simulation shared by verifySchedule (actions) and verifyEvents (a compiled
// program's events); see Verify.h for the semantics. Internal to tessel_pipeline.
#pragma once

#include "runtime/pipeline/Verify.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt::pipeline::detail {

/// A transfer with what a message names: the label and index of the action or event it belongs to.
struct EngineTransfer {
  Transfer transfer;
  std::string label;  // "0SEND_F1" (action level) or the event's label
  int64_t index = 0;  // the action's or event's index in its rank's list
};

/// One event of a rank: a CommEvent whose transfers carry their own labels and indices.
struct EngineEvent {
  CommEvent::Kind kind = CommEvent::Kind::P2P;
  std::string label;
  int64_t index = 0;
  std::vector<EngineTransfer> transfers;
  std::vector<int> group;
  std::string op;
  int64_t bytes = 0;
  std::string dtype;
  int64_t slot = -1;
};

/// Checks the ranks' events (perRank[r]: world rank r's, in order) as Verify.h describes and
/// throws ScheduleError; `word` is what an index counts in messages ("action" or "event").
VerifyResult runEngine(const std::vector<std::vector<EngineEvent>>& perRank, const char* word);

}  // namespace tessel::rt::pipeline::detail
