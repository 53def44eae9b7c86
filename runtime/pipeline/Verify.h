// The pipeline verifier: proves, before any rank starts, that the ranks' communication cannot
// hang or mismatch.
//
// Semantics (rendezvous, as MPI for large messages and NCCL): each rank runs its list in order.
// A run of consecutive comm actions with no compute action between them is one p2p group: its
// transfers are posted together and the group completes when every one of them has completed.
// A send from a to b matches the recv at b from a of the same FIFO position on the channel
// (a, b) (MPI's non-overtaking order; NCCL's per-peer order), and a transfer completes once both
// ends are posted (the peer's current event is the group that holds its end). A synchronous
// collective completes once every member of its group has reached it; an asynchronous start
// (all_reduce_start, all_gather_start) never blocks, and its wait completes once every member has
// issued the matching start. When no rank can progress and some are unfinished, the lowest
// blocked rank is reported, with what it waits for, where that rank is blocked, and the cycle of
// waits if there is one.
#pragma once

#include "runtime/pipeline/Schedule.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::rt::pipeline {

/// A schedule or event list that can hang, mismatch or miss an action. what() is one line:
/// "rank R, action K (<text>) <what is wrong or what it waits for>". rank and index are -1
/// where the fault is not one action's (e.g. the number of rows).
struct ScheduleError : std::runtime_error {
  /// `message` is the whole line what() returns (it already names the rank and index).
  ScheduleError(int64_t rank, int64_t index, const std::string& message)
      : std::runtime_error(message), rank(rank), index(index) {}
  int64_t rank;   // the offending rank (a CSV row)
  int64_t index;  // the offending action's or event's index in that rank's list (a CSV cell)
};

/// Checks an action-level schedule for p = `ranks` ranks, M = `microbatches` and v =
/// `virtualStages` chunks per rank (chunk c on rank c % p):
///   1. every action is in range and on its chunk's rank, and no action appears twice;
///   2. every action has its inputs earlier in its rank's list: F(m, c) its RECV_F (or F(m, c-1)
///      on the same rank), B/I(m, c) F(m, c) and its RECV_B (or the next chunk's B/I on the same
///      rank), W(m, c) I(m, c), a send the action that produces its value;
///   3. every send has its recv and the FIFO pairs on each channel move the same value;
///   4. every (microbatch, chunk) has exactly one F and either one B or one I and one W;
///   5. the comm groups are simulated with rendezvous semantics; a deadlock is reported at the
///      lowest blocked rank with the action it waits for and the cycle of waits.
/// Throws ScheduleError naming the first offending action (its rank, its index in the list, the
/// action and what it waits for).
void verifySchedule(const Schedule& schedule, int64_t ranks, int64_t microbatches, int64_t virtualStages);

/// One point-to-point transfer of a P2P event.
struct Transfer {
  bool send = false;           // true: this rank sends to `peer`; false: it receives from `peer`
  int peer = 0;                // world rank
  int64_t bytes = 0;           // a send and its recv must agree on bytes, dtype and shape
  std::string dtype;           // "f32", "bf16", ...
  std::vector<int64_t> shape;  // the tensor's (local) shape
};

/// One communication event of a compiled rank's program, in program order.
struct CommEvent {
  /// P2P: a group of transfers posted together, complete together (one send_recv step).
  /// Collective: a synchronous collective of `group`. Start: an asynchronous collective's start
  /// (does not block). Wait: waits for the Start of the same `slot` on this rank.
  enum class Kind { P2P, Collective, Start, Wait } kind = Kind::P2P;
  std::string label;               // for messages: "SEND_F mb 2 chunk 0", "all_reduce dp bucket 3"
  std::vector<Transfer> transfers;  // P2P
  std::vector<int> group;           // Collective/Start/Wait: the members' world ranks, ascending
  std::string op;                   // Collective/Start: e.g. "all_reduce sum"; must agree in a group
  int64_t bytes = 0;                // Collective/Start: must agree in a group
  std::string dtype;                // Collective/Start: must agree in a group
  int64_t slot = -1;                // Start/Wait: pairs a wait with its start within the rank
};

/// What verifyEvents checked.
struct VerifyResult {
  int64_t events = 0;       // all ranks' events
  int64_t p2pGroups = 0;    // P2P events
  int64_t collectives = 0;  // Collective and Start events
};

/// Checks the ranks' event lists together (perRank[r] is world rank r's list) with the
/// semantics above: every send has its recv with the same bytes, dtype and shape; the members
/// of every group issue the same sequence of collectives and starts (kind, op, bytes, dtype),
/// so one issued on one rank only is named; every wait has an earlier start of its slot and
/// group, every start a later wait; and nothing can deadlock. Throws ScheduleError (a
/// std::runtime_error) with the message of the file header: "rank R, event K (<label>) waits for
/// <what> (rank Q is blocked at event J (<label>)); cycle of waits: ...".
VerifyResult verifyEvents(const std::vector<std::vector<CommEvent>>& perRank);

}  // namespace tessel::rt::pipeline
