// The action-level verifier (Verify.h): ranges and placement, each action's inputs earlier in
// its rank's list, exactly one F and one backward per (microbatch, chunk), the FIFO pairs on
// every channel moving the same value, then the rendezvous simulation of the comm groups
// (VerifyEngine.h).
#include "runtime/pipeline/VerifyEngine.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace tessel::rt::pipeline {
namespace {

using Key = std::tuple<ActionKind, int64_t, int64_t>;  // kind, microbatch, stage
Key key(ActionKind kind, int64_t microbatch, int64_t stage) { return {kind, microbatch, stage}; }
std::string textOf(ActionKind kind, int64_t microbatch, int64_t stage) {
  return Action{kind, microbatch, stage}.text();
}

/// The recv a send is meant for: SEND_F(m, c) feeds RECV_F(m, c+1), SEND_B(m, c) feeds RECV_B(m, c-1).
Action recvFor(const Action& send) {
  return send.kind == ActionKind::SendF ? Action{ActionKind::RecvF, send.microbatch, send.stage + 1}
                                        : Action{ActionKind::RecvB, send.microbatch, send.stage - 1};
}

class ActionChecker {
public:
  ActionChecker(const Schedule& s, int64_t p, int64_t m, int64_t v) : s_(s), p_(p), m_(m), chunks_(p * v) {}

  void run() {
    for (int64_t r = 0; r < p_; ++r) checkRank(r);
    checkChannels();
    checkComplete();
    simulate();
  }

private:
  const Schedule& s_;
  int64_t p_, m_, chunks_;
  std::vector<std::map<Key, int64_t>> done_;  // per rank: action -> its index

  [[noreturn]] void fail(int64_t r, int64_t i, const std::string& what) const {
    throw ScheduleError(r, i, fmt::format("rank {}, action {} ({}) {}", r, i, s_[r][i].text(), what));
  }

  void checkRank(int64_t r) {
    done_.emplace_back();
    std::map<Key, int64_t>& done = done_.back();
    auto has = [&](ActionKind k, int64_t mb, int64_t c) { return done.count(key(k, mb, c)) > 0; };
    for (int64_t i = 0; i < static_cast<int64_t>(s_[r].size()); ++i) {
      const Action& a = s_[r][i];
      const int64_t c = a.stage, mb = a.microbatch;
      if (c < 0 || c >= chunks_)
        fail(r, i, fmt::format("names stage {}, which is not a chunk of the pipeline ({} chunks: {} ranks x {} per "
                               "rank)", c, chunks_, p_, chunks_ / p_));
      if (mb < 0 || mb >= m_) fail(r, i, fmt::format("names microbatch {}, but there are {}", mb, m_));
      if (c % p_ != r) fail(r, i, fmt::format("runs on rank {}, but chunk {} belongs to rank {} (chunk c runs on "
                                              "rank c % {})", r, c, c % p_, p_));
      if (auto it = done.find(key(a.kind, mb, c)); it != done.end())
        fail(r, i, fmt::format("appears twice (first at action {})", it->second));
      const bool last = c == chunks_ - 1;
      auto need = [&](ActionKind k, int64_t needC, const char* why) {
        if (!has(k, mb, needC))
          fail(r, i, fmt::format("waits for {} ({}), which is not earlier in rank {}'s list", textOf(k, mb, needC), why, r));
      };
      switch (a.kind) {
        case ActionKind::F:
          if (c > 0) p_ == 1 ? need(ActionKind::F, c - 1, "its input") : need(ActionKind::RecvF, c, "its input");
          break;
        case ActionKind::B:
        case ActionKind::I:
          need(ActionKind::F, c, "the forward it differentiates");
          if (!last && p_ == 1 && !has(ActionKind::B, mb, c + 1)) need(ActionKind::I, c + 1, "its output's gradient");
          if (!last && p_ > 1) need(ActionKind::RecvB, c, "its output's gradient");
          break;
        case ActionKind::W: need(ActionKind::I, c, "the input gradient that W completes"); break;
        case ActionKind::SendF:
        case ActionKind::RecvB:
        case ActionKind::SendB:
        case ActionKind::RecvF: {
          const bool forward = a.kind == ActionKind::SendF || a.kind == ActionKind::RecvB;
          if (forward ? last : c == 0)
            fail(r, i, fmt::format("has no peer: chunk {} is the {} chunk", c, forward ? "last" : "first"));
          if (p_ == 1) fail(r, i, "moves a value between two chunks of the same rank; no comm action is needed");
          if (a.kind == ActionKind::SendF) need(ActionKind::F, c, "the forward whose output it sends");
          if (a.kind == ActionKind::SendB && !has(ActionKind::B, mb, c))
            need(ActionKind::I, c, "the backward whose input gradient it sends");
          break;
        }
      }
      done[key(a.kind, mb, c)] = i;
    }
  }

  void checkComplete() const {
    for (int64_t c = 0; c < chunks_; ++c)
      for (int64_t mb = 0; mb < m_; ++mb) {
        const int64_t r = c % p_;
        const std::map<Key, int64_t>& done = done_[r];
        const int64_t end = static_cast<int64_t>(s_[r].size());
        auto missing = [&](const std::string& what) {
          throw ScheduleError(r, end, fmt::format("rank {}, action {} (the end of its list): chunk {} microbatch {} {}",
                                                  r, end, c, mb, what));
        };
        const bool f = done.count(key(ActionKind::F, mb, c)), b = done.count(key(ActionKind::B, mb, c));
        const bool in = done.count(key(ActionKind::I, mb, c)), w = done.count(key(ActionKind::W, mb, c));
        if (!f) missing(fmt::format("has no forward ({})", textOf(ActionKind::F, mb, c)));
        if (b && (in || w)) missing("has both a full backward B and a split one (I, W)");
        if (!b && !in) missing(fmt::format("has no backward ({} or {})", textOf(ActionKind::B, mb, c),
                                           textOf(ActionKind::I, mb, c)));
        if (in && !w) missing(fmt::format("has I but no W ({})", textOf(ActionKind::W, mb, c)));
      }
  }

  /// The k-th send on a channel must be meant for the k-th recv on it, and every send and recv
  /// needs its pair; of several faults the one of the lowest (rank, index) is reported.
  void checkChannels() const {
    Channels channels = channelsOf(s_);
    std::optional<std::tuple<int64_t, int64_t, std::string>> first;
    auto fault = [&](std::pair<int64_t, int64_t> at, std::string what) {
      if (!first || std::pair{std::get<0>(*first), std::get<1>(*first)} > at) first = {at.first, at.second, what};
    };
    for (const auto& [channel, list] : channels.sends) {
      const auto& theirs = channels.recvs[channel];
      for (size_t k = 0; k < list.size(); ++k) {
        const Action& send = s_[list[k].first][list[k].second];
        if (k >= theirs.size()) {
          fault(list[k], fmt::format("sends to rank {}, which never receives it: rank {} posts {} recv(s) from rank {} "
                                     "and this is send number {}", channel.second, channel.second, theirs.size(),
                                     channel.first, k + 1));
          continue;
        }
        const Action& recv = s_[theirs[k].first][theirs[k].second];
        if (!(recvFor(send) == recv))
          fault(list[k], fmt::format("is send number {} on the channel rank {} -> rank {}, so it pairs (FIFO order) "
                                     "with recv number {} there, rank {}, action {} ({}), which is not {}: the two "
                                     "ranks order this channel's transfers differently", k + 1, channel.first,
                                     channel.second, k + 1, theirs[k].first, theirs[k].second, recv.text(),
                                     recvFor(send).text()));
      }
    }
    for (const auto& [channel, list] : channels.recvs) {
      const size_t sent = channels.sends.count(channel) ? channels.sends.at(channel).size() : 0;
      for (size_t k = sent; k < list.size(); ++k)
        fault(list[k], fmt::format("receives from rank {}, which never sends it: rank {} posts {} send(s) to rank {} "
                                   "and this is recv number {}", channel.first, channel.first, sent, channel.second,
                                   k + 1));
    }
    if (first) fail(std::get<0>(*first), std::get<1>(*first), std::get<2>(*first));
  }

  void simulate() const {
    std::vector<std::vector<detail::EngineEvent>> events(p_);
    for (int64_t r = 0; r < p_; ++r) {
      for (int64_t i = 0; i < static_cast<int64_t>(s_[r].size()); ++i) {
        const Action& a = s_[r][i];
        if (a.isCompute()) continue;
        const bool startsGroup = i == 0 || s_[r][i - 1].isCompute();
        if (startsGroup) events[r].push_back({CommEvent::Kind::P2P, a.text(), i, {}, {}, "", 0, "", -1});
        Transfer t;
        t.send = a.isSend();
        t.peer = static_cast<int>(peerRank(a, p_));
        events[r].back().transfers.push_back({t, a.text(), i});
      }
    }
    detail::runEngine(events, "action");
  }
};

}  // namespace

void verifySchedule(const Schedule& schedule, int64_t ranks, int64_t microbatches, int64_t virtualStages) {
  if (ranks < 1 || microbatches < 1 || virtualStages < 1)
    throw ScheduleError(-1, -1, fmt::format("a pipeline of {} ranks, {} microbatches and {} chunks per rank: each "
                                            "must be at least 1", ranks, microbatches, virtualStages));
  if (static_cast<int64_t>(schedule.size()) != ranks)
    throw ScheduleError(-1, -1, fmt::format("the schedule has {} rank(s) (rows), but the pipeline has {}",
                                            schedule.size(), ranks));
  ActionChecker(schedule, ranks, microbatches, virtualStages).run();
}

}  // namespace tessel::rt::pipeline
