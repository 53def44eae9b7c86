// The built-in schedules and the placement of their comm actions; see Schedule.h.
//
// Each schedule is built in two steps:
//   1. per rank its compute actions in order, cut into "steps": a step is run without any
//      communication between its actions (one action per step, except in the interleaved
//      schedule's steady phase, where Megatron-LM runs a forward and a backward back to back and
//      then exchanges all four tensors in one send_forward_backward_recv_forward_backward);
//   2. placeCommunication: before each step the recvs of its inputs, after it the sends of its
//      outputs, so the sends of one step and the recvs of the next are adjacent: one group, as
//      Megatron-LM's send_forward_recv_backward and send_backward_recv_forward.
// Zero-bubble is built differently (zeroBubble below): its W's and its groups come from a
// unit-cost lockstep simulation.
#include "runtime/pipeline/Schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <stdexcept>

namespace tessel::rt::pipeline {

namespace {

using Step = std::vector<Action>;
using RankSteps = std::vector<Step>;

Action act(ActionKind kind, int64_t microbatch, int64_t stage) { return Action{kind, microbatch, stage}; }

/// The recvs an action needs from other ranks before it runs (chunk c on rank c % p).
void appendRecvs(const Action& a, int64_t p, int64_t chunks, std::vector<Action>& out) {
  const int64_t rank = a.stage % p;
  if (a.kind == ActionKind::F && a.stage > 0 && (a.stage - 1) % p != rank)
    out.push_back(act(ActionKind::RecvF, a.microbatch, a.stage));
  if ((a.kind == ActionKind::B || a.kind == ActionKind::I) && a.stage + 1 < chunks && (a.stage + 1) % p != rank)
    out.push_back(act(ActionKind::RecvB, a.microbatch, a.stage));
}

/// The sends of an action's outputs to other ranks after it runs.
void appendSends(const Action& a, int64_t p, int64_t chunks, std::vector<Action>& out) {
  const int64_t rank = a.stage % p;
  if (a.kind == ActionKind::F && a.stage + 1 < chunks && (a.stage + 1) % p != rank)
    out.push_back(act(ActionKind::SendF, a.microbatch, a.stage));
  if ((a.kind == ActionKind::B || a.kind == ActionKind::I) && a.stage > 0 && (a.stage - 1) % p != rank)
    out.push_back(act(ActionKind::SendB, a.microbatch, a.stage));
}

Schedule placeCommunication(const std::vector<RankSteps>& steps, int64_t p, int64_t v) {
  Schedule out(steps.size());
  for (size_t r = 0; r < steps.size(); ++r) {
    for (const Step& step : steps[r]) {
      for (const Action& a : step) appendRecvs(a, p, p * v, out[r]);
      out[r].insert(out[r].end(), step.begin(), step.end());
      for (const Action& a : step) appendSends(a, p, p * v, out[r]);
    }
  }
  return out;
}

/// GPipe: all forwards, then all backwards, both in microbatch order (PyTorch's ScheduleGPipe).
RankSteps gpipe(int64_t s, int64_t m) {
  RankSteps steps;
  for (int64_t i = 0; i < m; ++i) steps.push_back({act(ActionKind::F, i, s)});
  for (int64_t i = 0; i < m; ++i) steps.push_back({act(ActionKind::B, i, s)});
  return steps;
}

/// The standard 1F1B on stage s of p: warmup min(p - s - 1, M) forwards; steady: F(w + j) then
/// B(j) for j < M - w; cooldown: the last w backwards.
RankSteps oneFOneB(int64_t s, int64_t p, int64_t m) {
  const int64_t warmup = std::min(p - s - 1, m);
  RankSteps steps;
  for (int64_t i = 0; i < warmup; ++i) steps.push_back({act(ActionKind::F, i, s)});
  for (int64_t j = 0; j < m - warmup; ++j) {
    steps.push_back({act(ActionKind::F, warmup + j, s)});
    steps.push_back({act(ActionKind::B, j, s)});
  }
  for (int64_t j = m - warmup; j < m; ++j) steps.push_back({act(ActionKind::B, j, s)});
  return steps;
}

/// ZB-H1 (Qi et al. 2023, figure 3) for all p stages: each stage's main order is 1F1B's with I
/// for B (warmup min(p - s - 1, M) forwards); W's are placed by a lockstep simulation with unit
/// costs (F = I = W, the paper's assumption): at each tick a stage runs its next main action if
/// its input has arrived and it would not hold more than min(p, M) microbatches' activations
/// (freed after W; 1F1B's peak, on stage 0), else its oldest pending W, else waits. The comm
/// actions follow the same ticks: after a tick's compute, its sends and the recvs of what other
/// stages sent at that tick, one group. Megatron-LM's placement is written for 1F1B and
/// interleaved only, and placing each recv just before its use would leave a blocking (rendezvous)
/// send of the last stage waiting a whole W on every microbatch; tick-aligned groups never make a
/// send wait (so the unit-cost step takes 3M + p - 1 ticks for M >= p), and no tick's groups wait
/// on a later tick's, so they cannot deadlock.
Schedule zeroBubble(int64_t p, int64_t m) {
  std::vector<std::vector<Action>> main(p);
  for (int64_t s = 0; s < p; ++s)
    for (const Step& step : oneFOneB(s, p, m))
      main[s].push_back(act(step[0].kind == ActionKind::B ? ActionKind::I : ActionKind::F, step[0].microbatch, s));
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> forwardDone(p, std::vector<int64_t>(m, kNever)), inputGradDone = forwardDone;
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> forwards(p, 0), inputGrads(p, 0), weightGrads(p, 0);
  const int64_t cap = std::min(p, m);
  Schedule out(p);
  for (int64_t tick = 0;; ++tick) {
    std::vector<std::vector<Action>> recvs(p);
    bool unfinished = false, ran = false;
    std::vector<Action> doing(p, act(ActionKind::RecvF, -1, -1));  // microbatch -1: nothing this tick
    for (int64_t s = 0; s < p; ++s) {
      if (next[s] == main[s].size() && weightGrads[s] == m) continue;
      unfinished = true;
      bool ready = false;
      if (next[s] < main[s].size()) {
        const Action& a = main[s][next[s]];
        ready = a.kind == ActionKind::F
                    ? (s == 0 || forwardDone[s - 1][a.microbatch] <= tick) && forwards[s] - weightGrads[s] < cap
                    : (s == p - 1 ? forwardDone[s][a.microbatch] : inputGradDone[s + 1][a.microbatch]) <= tick;
      }
      if (ready) doing[s] = main[s][next[s]++];
      else if (weightGrads[s] < inputGrads[s]) doing[s] = act(ActionKind::W, weightGrads[s]++, s);
    }
    if (!unfinished) break;
    for (int64_t s = 0; s < p; ++s) {
      const Action& a = doing[s];
      if (a.microbatch < 0) continue;
      ran = true;
      out[s].push_back(a);
      if (a.kind == ActionKind::F) forwardDone[s][a.microbatch] = tick + 1, ++forwards[s];
      if (a.kind == ActionKind::I) inputGradDone[s][a.microbatch] = tick + 1, ++inputGrads[s];
      std::vector<Action> sent;
      appendSends(a, p, p, sent);
      out[s].insert(out[s].end(), sent.begin(), sent.end());
      for (const Action& x : sent) {
        const bool forward = x.kind == ActionKind::SendF;
        recvs[forward ? s + 1 : s - 1].push_back(
            act(forward ? ActionKind::RecvF : ActionKind::RecvB, x.microbatch, forward ? s + 1 : s - 1));
      }
    }
    if (!ran) throw std::logic_error("zero-bubble: no stage can run (a bug in the schedule's construction)");
    for (int64_t s = 0; s < p; ++s) out[s].insert(out[s].end(), recvs[s].begin(), recvs[s].end());
  }
  return out;
}

/// Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_interleaving) on rank r:
/// virtual step k of M * v runs microbatch (k / (p v)) p + k % p on local chunk (k % (p v)) / p
/// (backwards: local chunk v - 1 - that), i.e. microbatches enter each chunk in rounds of p.
/// Warmup: (p - r - 1) * 2 + (v - 1) * p forwards (all M v of them when M == p); steady: one
/// forward and one backward per step; cooldown: the remaining backwards. Local chunk l of
/// rank r is chunk l p + r.
RankSteps interleaved(int64_t r, int64_t p, int64_t m, int64_t v) {
  const int64_t total = m * v;
  auto virtualAction = [&](ActionKind kind, int64_t k) {
    const int64_t inRound = k % (p * v);
    int64_t local = inRound / p;
    if (kind == ActionKind::B) local = v - 1 - local;
    return act(kind, (k / (p * v)) * p + inRound % p, local * p + r);
  };
  const int64_t warmup = m == p ? total : std::min((p - r - 1) * 2 + (v - 1) * p, total);
  RankSteps steps;
  for (int64_t k = 0; k < warmup; ++k) steps.push_back({virtualAction(ActionKind::F, k)});
  for (int64_t k = 0; k < total - warmup; ++k)
    steps.push_back({virtualAction(ActionKind::F, warmup + k), virtualAction(ActionKind::B, k)});
  for (int64_t k = total - warmup; k < total; ++k) steps.push_back({virtualAction(ActionKind::B, k)});
  return steps;
}

}  // namespace

const char* kindName(ActionKind kind) {
  switch (kind) {
    case ActionKind::F: return "F";
    case ActionKind::B: return "B";
    case ActionKind::I: return "I";
    case ActionKind::W: return "W";
    case ActionKind::SendF: return "SEND_F";
    case ActionKind::RecvF: return "RECV_F";
    case ActionKind::SendB: return "SEND_B";
    case ActionKind::RecvB: return "RECV_B";
  }
  return "?";
}

int64_t peerRank(const Action& comm, int64_t ranks) {
  const bool next = comm.kind == ActionKind::SendF || comm.kind == ActionKind::RecvB;
  return (next ? comm.stage + 1 : comm.stage - 1) % ranks;
}

Channels channelsOf(const Schedule& schedule) {
  const int64_t p = static_cast<int64_t>(schedule.size());
  Channels c;
  for (int64_t r = 0; r < p; ++r)
    for (int64_t i = 0; i < static_cast<int64_t>(schedule[r].size()); ++i) {
      const Action& a = schedule[r][i];
      if (a.isCompute()) continue;
      if (a.isSend()) c.sends[{r, peerRank(a, p)}].push_back({r, i});
      else c.recvs[{peerRank(a, p), r}].push_back({r, i});
    }
  return c;
}

std::string Action::text() const { return fmt::format("{}{}{}", stage, kindName(kind), microbatch); }

Action parseAction(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  const size_t last = text.find_last_not_of(" \t\r");
  const std::string t = first == std::string::npos ? "" : text.substr(first, last - first + 1);
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("'{}' is not an action: {} (expected stage, kind, microbatch as "
                                             "PyTorch prints them, e.g. 0F2, 1SEND_F0; kinds F, B, I, W, SEND_F, "
                                             "RECV_F, SEND_B, RECV_B)", t, why));
  };
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i == 0) throw bad("it does not start with a stage number");
  size_t j = i;
  while (j < t.size() && !std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
  const std::string kind = t.substr(i, j - i);
  if (kind == "UNSHARD" || kind == "RESHARD")
    throw bad(fmt::format("{} is FSDP's unshard/reshard, which Tessel places itself", kind));
  static const ActionKind kKinds[] = {ActionKind::F,     ActionKind::B,     ActionKind::I,     ActionKind::W,
                                      ActionKind::SendF, ActionKind::RecvF, ActionKind::SendB, ActionKind::RecvB};
  const ActionKind* found = std::find_if(std::begin(kKinds), std::end(kKinds),
                                         [&](ActionKind k) { return kind == kindName(k); });
  if (found == std::end(kKinds)) throw bad(fmt::format("'{}' is not a kind", kind));
  if (j == t.size()) throw bad("it has no microbatch number");
  if (t.find_first_not_of("0123456789", j) != std::string::npos) throw bad("the microbatch is not a number");
  if (i > 9 || t.size() - j > 9) throw bad("an index has more than 9 digits");
  return Action{*found, std::stoll(t.substr(j)), std::stoll(t.substr(0, i))};
}

ScheduleKind parseScheduleKind(const std::string& text) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZeroBubble})
    if (text == scheduleKindName(k)) return k;
  throw std::invalid_argument(
      fmt::format("'{}' is not a pipeline schedule; use gpipe, 1f1b, interleaved or zero-bubble", text));
}

const char* scheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::GPipe: return "gpipe";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved: return "interleaved";
    case ScheduleKind::ZeroBubble: return "zero-bubble";
  }
  return "?";
}

Schedule buildSchedule(const ScheduleSpec& spec) {
  const int64_t p = spec.ranks, m = spec.microbatches, v = spec.virtualStages;
  const char* name = scheduleKindName(spec.kind);
  if (p < 1) throw std::invalid_argument(fmt::format("{}: {} pipeline ranks; at least 1 is needed", name, p));
  if (m < 1) throw std::invalid_argument(fmt::format("{}: {} microbatches; at least 1 is needed", name, m));
  if (spec.kind == ScheduleKind::Interleaved) {
    if (p < 2) throw std::invalid_argument("interleaved: 1 pipeline rank; interleaving needs at least 2");
    if (v < 2)
      throw std::invalid_argument(fmt::format("interleaved: {} virtual stage(s) per rank; interleaving needs at "
                                              "least 2 (with 1 it is 1f1b)", v));
    if (m % p != 0)
      throw std::invalid_argument(fmt::format(
          "interleaved: {} microbatches on {} ranks; Megatron-LM's interleaved schedule needs a multiple of the "
          "pipeline size (microbatches enter each chunk in rounds of p): use {}", m, p,
          m < p ? fmt::format("{} or more", p) : fmt::format("{} or {}", m / p * p, (m / p + 1) * p)));
  } else if (v != 1) {
    throw std::invalid_argument(fmt::format("{}: {} virtual stages per rank; only interleaved has more than 1", name, v));
  }
  if (spec.kind == ScheduleKind::ZeroBubble) return zeroBubble(p, m);
  std::vector<RankSteps> steps;
  for (int64_t r = 0; r < p; ++r) {
    switch (spec.kind) {
      case ScheduleKind::GPipe: steps.push_back(gpipe(r, m)); break;
      case ScheduleKind::OneFOneB: steps.push_back(oneFOneB(r, p, m)); break;
      case ScheduleKind::ZeroBubble: break;
      case ScheduleKind::Interleaved: steps.push_back(interleaved(r, p, m, v)); break;
    }
  }
  return placeCommunication(steps, p, v);
}

Schedule withCommunication(const Schedule& compute, int64_t ranks, int64_t virtualStages) {
  if (ranks < 1 || virtualStages < 1)
    throw std::invalid_argument(fmt::format("withCommunication: {} ranks x {} chunks", ranks, virtualStages));
  std::vector<RankSteps> steps(compute.size());
  for (size_t r = 0; r < compute.size(); ++r) {
    for (const Action& a : compute[r]) {
      if (!a.isCompute())
        throw std::invalid_argument(fmt::format("rank {}: {} is a comm action; the input must be compute only", r, a.text()));
      steps[r].push_back({a});
    }
  }
  return placeCommunication(steps, ranks, virtualStages);
}

}  // namespace tessel::rt::pipeline
