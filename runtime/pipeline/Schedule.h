// Pipeline-parallel schedules: the action vocabulary of PyTorch's pipelining runtime
// (torch.distributed.pipelining, `_ComputationType`: F, B, I, W, SEND_F, RECV_F, SEND_B,
// RECV_B), the built-in schedules (GPipe, 1F1B, Megatron-LM's interleaved 1F1B, zero-bubble
// ZB-H1) and their CSV form. Plain C++: no MLIR, no MPI.
//
// Promise: every built-in schedule, wherever buildSchedule defines it, passes verifySchedule
// (Verify.h): each rank's list holds its compute actions and the comm actions between them,
// placed as Megatron-LM places its p2p calls (a send right after the action that produced the
// value, a recv right before the action that needs it, so a send and the next recv are adjacent
// and form one group; zero-bubble, which Megatron-LM lacks, groups by ticks instead), and the
// ranks' groups cannot deadlock under rendezvous semantics.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessel::rt::pipeline {

/// What an action does. F: forward of one microbatch through one chunk; B: its full backward;
/// I: the backward's input gradient only; W: the backward's weight gradient only (zero-bubble
/// splits B into I and W). The comm actions name the chunk whose value moves:
///   SendF(m, c): chunk c's output to chunk c+1's rank;  RecvF(m, c): chunk c's input from chunk c-1's rank;
///   SendB(m, c): the gradient of chunk c's input to chunk c-1's rank;
///   RecvB(m, c): the gradient of chunk c's output from chunk c+1's rank.
enum class ActionKind { F, B, I, W, SendF, RecvF, SendB, RecvB };

/// One action of a rank's list.
struct Action {
  ActionKind kind = ActionKind::F;
  int64_t microbatch = 0;  // 0-based, < M
  int64_t stage = 0;       // the chunk, 0-based, < p * v; chunk c runs on rank c % p
  /// PyTorch's text form: stage, kind, microbatch: "0F2", "1SEND_F0", "1RECV_B3", "0I1".
  std::string text() const;
  /// F, B, I or W (runs a chunk); the others move a value between ranks.
  bool isCompute() const {
    return kind == ActionKind::F || kind == ActionKind::B || kind == ActionKind::I || kind == ActionKind::W;
  }
  /// SEND_F or SEND_B.
  bool isSend() const { return kind == ActionKind::SendF || kind == ActionKind::SendB; }
  /// Same kind, microbatch and chunk.
  friend bool operator==(const Action&, const Action&) = default;
};

/// The rank a comm action exchanges with, for p = `ranks` (chunk c on rank c % p): SEND_F and
/// RECV_B the next chunk's rank, RECV_F and SEND_B the previous chunk's.
int64_t peerRank(const Action& comm, int64_t ranks);

/// The kind's text as PyTorch prints it: "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B".
const char* kindName(ActionKind kind);

/// Parses one action in PyTorch's text form ("0F2", "1SEND_F0"; surrounding spaces allowed).
/// Throws std::invalid_argument naming the text and the expected form.
Action parseAction(const std::string& text);

/// The built-in schedules.
///   GPipe (Huang et al. 2019): every forward, then every backward (microbatch order).
///   OneFOneB: the standard 1F1B (PipeDream-Flush; Narayanan et al. 2021): stage s warms up with
///     min(p - s - 1, M) forwards (none on the last stage), alternates one forward and one
///     backward (steady), then runs the remaining backwards (cooldown).
///   Interleaved: Megatron-LM's interleaved 1F1B (Narayanan et al. 2021, "Efficient Large-Scale
///     Language Model Training on GPU Clusters Using Megatron-LM"), v chunks per rank.
///   ZeroBubble: ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): 1F1B's order with
///     the backward split into I (input gradient, on the critical path) and W (weight gradient),
///     the W's placed where a stage would otherwise wait, and at most min(p, M) microbatches'
///     activations alive on any stage (1F1B's peak, on stage 0). With F = I = W and M >= p its
///     step takes 3M + p - 1 units, against 1F1B's 3(M + p - 1). Its comm groups follow the
///     ticks of that unit-cost timeline (Schedule.cpp says why).
enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubble };

/// Parses "gpipe", "1f1b", "interleaved" or "zero-bubble". Throws std::invalid_argument naming
/// the text and the choices.
ScheduleKind parseScheduleKind(const std::string& text);

/// The name parseScheduleKind reads ("1f1b").
const char* scheduleKindName(ScheduleKind kind);

/// What to build: p ranks (the pipeline axis' size), M microbatches, v chunks per rank.
struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int64_t ranks = 1;          // p
  int64_t microbatches = 1;   // M
  int64_t virtualStages = 1;  // v
};

/// Per rank (index = pp coordinate) its action list, comm actions included.
using Schedule = std::vector<std::vector<Action>>;

/// The comm actions of a schedule per channel (from rank, to rank), as (rank, index in its list)
/// in list order: the sends on the sender's side, the recvs on the receiver's. The k-th send and
/// the k-th recv of a channel are a pair (FIFO order, as MPI and NCCL match them).
struct Channels {
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> sends, recvs;
};
Channels channelsOf(const Schedule& schedule);


/// Builds a built-in schedule. Where each is defined (else std::invalid_argument saying why):
///   GPipe, OneFOneB, ZeroBubble: p >= 1, M >= 1, v == 1 (M < p is fine: the warmup is clamped
///     to M);
///   Interleaved: p >= 2, v >= 2 and M a multiple of p (so M >= p), as Megatron-LM requires:
///     microbatches enter each chunk in rounds of p.
Schedule buildSchedule(const ScheduleSpec& spec);

/// Inserts the comm actions into compute-only lists (F, B, I, W per rank, chunk c on rank
/// c % p): before each compute action the recvs of its inputs from other ranks, after it the
/// sends of its outputs, so the sends of one action and the recvs of the next form one group.
/// Comm actions already present are an error (std::invalid_argument). Used by buildSchedule for
/// the non-interleaved schedules, and to turn a hand-written compute order into a schedule.
Schedule withCommunication(const Schedule& compute, int64_t ranks, int64_t virtualStages);

/// Parses a user schedule: one row per rank (row r is rank r's list), actions comma-separated in
/// PyTorch's text form; `#` starts a comment, blank lines are skipped, empty cells (PyTorch's
/// None) are skipped. Throws ScheduleError (Verify.h; rank = row, index = position in the row)
/// "<source>:<line>: '<token>' is not an action ..." for a bad token and for PyTorch actions
/// Tessel does not run (UNSHARD, RESHARD); an empty text is an error too.
Schedule parseScheduleCsv(const std::string& text, const std::string& source);

/// The CSV parseScheduleCsv reads and PyTorch's `_load_csv` reads: one row per rank, no comments.
std::string scheduleCsv(const Schedule& schedule);

}  // namespace tessel::rt::pipeline
