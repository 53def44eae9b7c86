// The rendezvous simulation of the ranks' communication (Verify.h, VerifyEngine.h) and the
// event-level verifier of compiled programs.
//
// Algorithm:
//   1. static checks: every transfer's peer is another rank of the job; the k-th send on each
//      channel (a, b) is paired with the k-th recv at b from a, none is left over, and a pair
//      agrees on bytes, dtype and shape; per group of ranks, the members issue the same sequence
//      of collectives and starts; every wait has its start;
//   2. simulation: each rank reaches its events in order (reaching a group posts its transfers,
//      reaching a collective is arriving at it, reaching a start issues it) and passes an event
//      once it is complete (a transfer once both ends are reached, a collective once every member
//      arrived, a wait once every member issued the start); repeated until nothing changes;
//   3. a rank left unfinished is a deadlock: the lowest one is reported with the part it waits
//      for, where the awaited rank is blocked, and the cycle of waits found by following them.
#include "runtime/pipeline/VerifyEngine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace tessel::rt::pipeline {
namespace detail {
namespace {

/// Where a transfer or an event sits: rank, event position, transfer position.
struct Ref {
  int rank = -1;
  size_t event = 0, transfer = 0;
};

std::string describeTransfer(const Transfer& t) {
  return fmt::format("{} bytes {} [{}]", t.bytes, t.dtype.empty() ? "-" : t.dtype, fmt::join(t.shape, ","));
}

class Engine {
public:
  Engine(const std::vector<std::vector<EngineEvent>>& perRank, const char* word) : ev_(perRank), word_(word) {}

  VerifyResult run() {
    pairTransfers();
    matchCollectives();
    pairWaits();
    simulate();
    VerifyResult result;
    for (const auto& list : ev_) {
      result.events += static_cast<int64_t>(list.size());
      for (const EngineEvent& e : list) {
        result.p2pGroups += e.kind == CommEvent::Kind::P2P;
        result.collectives += e.kind == CommEvent::Kind::Collective || e.kind == CommEvent::Kind::Start;
      }
    }
    return result;
  }

private:
  const std::vector<std::vector<EngineEvent>>& ev_;
  const char* word_;
  int n() const { return static_cast<int>(ev_.size()); }
  const EngineEvent& at(const Ref& r) const { return ev_[r.rank][r.event]; }
  const EngineTransfer& xfer(const Ref& r) const { return ev_[r.rank][r.event].transfers[r.transfer]; }

  /// "rank R, action K (label)" of a transfer or an event.
  std::string where(const Ref& r, bool transfer) const {
    if (transfer) return fmt::format("rank {}, {} {} ({})", r.rank, word_, xfer(r).index, xfer(r).label);
    return fmt::format("rank {}, {} {} ({})", r.rank, word_, at(r).index, at(r).label);
  }
  [[noreturn]] void fail(const Ref& r, bool transfer, const std::string& what) const {
    throw ScheduleError(r.rank, transfer ? xfer(r).index : at(r).index, where(r, transfer) + " " + what);
  }

  // 1. Static checks.
  std::map<std::tuple<int, size_t, size_t>, Ref> partner_;  // transfer -> its paired transfer

  void pairTransfers() {
    std::map<std::pair<int, int>, std::vector<Ref>> sends, recvs;  // channel (from, to)
    std::map<std::tuple<int, size_t, size_t>, size_t> position;    // a transfer's place on its channel
    for (int r = 0; r < n(); ++r)
      for (size_t e = 0; e < ev_[r].size(); ++e)
        for (size_t t = 0; t < ev_[r][e].transfers.size(); ++t) {
          const Transfer& x = ev_[r][e].transfers[t].transfer;
          const Ref ref{r, e, t};
          if (ev_[r][e].kind != CommEvent::Kind::P2P) fail(ref, false, "has transfers but is not a p2p event");
          if (x.peer < 0 || x.peer >= n() || x.peer == r)
            fail(ref, true, fmt::format("{} rank {}, which is not another rank of the job ({} ranks)",
                                        x.send ? "sends to" : "receives from", x.peer, n()));
          std::vector<Ref>& list = x.send ? sends[{r, x.peer}] : recvs[{x.peer, r}];
          position[{r, e, t}] = list.size();
          list.push_back(ref);
        }
    for (int r = 0; r < n(); ++r)
      for (size_t e = 0; e < ev_[r].size(); ++e)
        for (size_t t = 0; t < ev_[r][e].transfers.size(); ++t) {
          const Ref ref{r, e, t};
          const Transfer& x = xfer(ref).transfer;
          const std::pair<int, int> channel = x.send ? std::pair{r, x.peer} : std::pair{x.peer, r};
          const std::vector<Ref>& theirs = x.send ? recvs[channel] : sends[channel];
          const size_t k = position.at({r, e, t});
          if (k >= theirs.size())
            fail(ref, true, fmt::format("{} rank {}, which never {} it: rank {} posts {} {} rank {} and this is "
                                        "number {}", x.send ? "sends to" : "receives from", x.peer,
                                        x.send ? "receives" : "sends", x.peer, theirs.size(),
                                        x.send ? "recv(s) from" : "send(s) to", r, k + 1));
          const Ref& other = theirs[k];
          const Transfer& y = xfer(other).transfer;
          if (x.send && (x.bytes != y.bytes || x.dtype != y.dtype || x.shape != y.shape))
            fail(ref, true, fmt::format("sends {} to rank {}, but the recv it is paired with (position {} on the "
                                        "channel {} -> {}), {}, receives {}", describeTransfer(x), x.peer, k + 1, r,
                                        x.peer, where(other, true), describeTransfer(y)));
          partner_[{r, e, t}] = other;
        }
  }

  // Collectives and starts: group -> per member its sequence of event positions.
  std::map<std::vector<int>, std::map<int, std::vector<size_t>>> sequences_;
  std::map<std::pair<int, size_t>, std::pair<std::vector<int>, size_t>> instance_;  // event -> (group, k)

  void matchCollectives() {
    for (int r = 0; r < n(); ++r)
      for (size_t e = 0; e < ev_[r].size(); ++e) {
        const EngineEvent& x = ev_[r][e];
        if (x.kind == CommEvent::Kind::P2P) continue;
        const Ref ref{r, e, 0};
        const std::vector<int>& g = x.group;
        const bool sorted = std::is_sorted(g.begin(), g.end()) && std::adjacent_find(g.begin(), g.end()) == g.end();
        if (!sorted || g.empty() || g.front() < 0 || g.back() >= n() || !std::binary_search(g.begin(), g.end(), r))
          fail(ref, false, fmt::format("has the group {{{}}}, which is not an ascending set of the job's {} ranks "
                                       "holding rank {}", fmt::join(g, ","), n(), r));
        if (x.kind == CommEvent::Kind::Wait) continue;
        std::vector<size_t>& seq = sequences_[g][r];
        instance_[{r, e}] = {g, seq.size()};
        seq.push_back(e);
      }
    for (auto& [group, members] : sequences_) {
      size_t longest = 0;
      for (int m : group) longest = std::max(longest, members[m].size());
      for (size_t k = 0; k < longest; ++k) {
        std::optional<Ref> first;  // the lowest member that has a k-th
        for (int m : group)
          if (k < members[m].size()) {
            first = Ref{m, members[m][k], 0};
            break;
          }
        for (int m : group) {
          if (k >= members[m].size())
            fail(*first, false, fmt::format("is collective number {} of the group {{{}}}, which rank {} never issues "
                                            "(rank {} issues {} in that group)", k + 1, fmt::join(group, ","), m, m,
                                            members[m].size()));
          const EngineEvent& a = at(*first);
          const Ref other{m, members[m][k], 0};
          const EngineEvent& b = at(other);
          if (a.kind != b.kind || a.op != b.op || a.bytes != b.bytes || a.dtype != b.dtype)
            fail(*first, false, fmt::format("({}{} {} bytes {}) is collective number {} of the group {{{}}}, but "
                                            "{} is ({}{} {} bytes {})", a.kind == CommEvent::Kind::Start ? "start " : "",
                                            a.op, a.bytes, a.dtype, k + 1, fmt::join(group, ","), where(other, false),
                                            b.kind == CommEvent::Kind::Start ? "start " : "", b.op, b.bytes, b.dtype));
        }
      }
    }
  }

  std::map<std::pair<int, size_t>, size_t> waitStart_;  // wait event -> its start's position

  void pairWaits() {
    for (int r = 0; r < n(); ++r) {
      std::map<int64_t, size_t> pending;  // slot -> start position
      for (size_t e = 0; e < ev_[r].size(); ++e) {
        const EngineEvent& x = ev_[r][e];
        const Ref ref{r, e, 0};
        if (x.kind == CommEvent::Kind::Start) {
          if (pending.count(x.slot))
            fail(ref, false, fmt::format("starts slot {} again before a wait for its start at {}", x.slot,
                                         where({r, pending[x.slot], 0}, false)));
          pending[x.slot] = e;
        } else if (x.kind == CommEvent::Kind::Wait) {
          auto it = pending.find(x.slot);
          if (it == pending.end()) fail(ref, false, fmt::format("waits for slot {}, which no earlier start on rank {} "
                                                                "has", x.slot, r));
          if (ev_[r][it->second].group != x.group)
            fail(ref, false, fmt::format("waits on the group {{{}}}, but its start, {}, is of the group {{{}}}",
                                         fmt::join(x.group, ","), where({r, it->second, 0}, false),
                                         fmt::join(ev_[r][it->second].group, ",")));
          waitStart_[{r, e}] = it->second;
          pending.erase(it);
        }
      }
      if (!pending.empty()) fail({r, pending.begin()->second, 0}, false,
                                 fmt::format("starts slot {}, which no later wait on rank {} waits for",
                                             pending.begin()->first, r));
    }
  }

  // 2. Simulation.
  std::vector<std::vector<char>> reached_;
  std::vector<size_t> pos_;

  /// What blocks event `e` of rank `r`: the first incomplete part (a transfer, or the member's
  /// collective or start that has not been reached); nullopt when the event is complete.
  struct Block {
    Ref self;           // the blocked transfer (transfer = true) or event
    bool transfer;
    Ref awaited;        // the peer's transfer or event it waits for
  };
  std::optional<Block> blockOf(int r, size_t e) const {
    const EngineEvent& x = ev_[r][e];
    if (x.kind == CommEvent::Kind::P2P) {
      for (size_t t = 0; t < x.transfers.size(); ++t) {
        const Ref& other = partner_.at({r, e, t});
        if (!reached_[other.rank][other.event]) return Block{{r, e, t}, true, other};
      }
      return std::nullopt;
    }
    if (x.kind == CommEvent::Kind::Start) return std::nullopt;
    const size_t target = x.kind == CommEvent::Kind::Wait ? waitStart_.at({r, e}) : e;
    const auto& [group, k] = instance_.at({r, target});
    for (int m : group) {
      const size_t theirs = sequences_.at(group).at(m)[k];
      if (!reached_[m][theirs]) return Block{{r, e, 0}, false, {m, theirs, 0}};
    }
    return std::nullopt;
  }

  void simulate() {
    reached_.assign(n(), {});
    for (int r = 0; r < n(); ++r) reached_[r].assign(ev_[r].size(), 0);
    pos_.assign(n(), 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < n(); ++r)
        while (pos_[r] < ev_[r].size()) {
          if (!reached_[r][pos_[r]]) reached_[r][pos_[r]] = 1, progress = true;
          if (blockOf(r, pos_[r])) break;
          ++pos_[r];
          progress = true;
        }
    }
    for (int r = 0; r < n(); ++r)
      if (pos_[r] < ev_[r].size()) reportDeadlock(r);
  }

  // 3. The report.
  std::string blockedAt(int q) const {
    if (pos_[q] >= ev_[q].size()) return fmt::format("rank {} has finished", q);
    const Block b = *blockOf(q, pos_[q]);
    const Ref& s = b.self;
    return fmt::format("rank {} is blocked at {} {} ({})", q, word_, b.transfer ? xfer(s).index : at(s).index,
                       b.transfer ? xfer(s).label : at(s).label);
  }

  [[noreturn]] void reportDeadlock(int r) const {
    const Block b = *blockOf(r, pos_[r]);
    const Ref& a = b.awaited;
    std::string what;
    if (b.transfer)
      what = fmt::format("waits for rank {} to post {} {} ({})", a.rank, word_, xfer(a).index, xfer(a).label);
    else if (at(b.self).kind == CommEvent::Kind::Wait)
      what = fmt::format("waits for rank {} to issue {} {} ({})", a.rank, word_, at(a).index, at(a).label);
    else
      what = fmt::format("waits for rank {} to reach {} {} ({})", a.rank, word_, at(a).index, at(a).label);
    std::string message = fmt::format("{} {} ({})", where(b.self, b.transfer), what, blockedAt(a.rank));
    // Follow the waits from r; a rank seen twice closes a cycle.
    std::vector<int> chain{r};
    for (int q = a.rank; pos_[q] < ev_[q].size();) {
      auto seen = std::find(chain.begin(), chain.end(), q);
      if (seen != chain.end()) {
        std::string cycle;
        for (auto it = seen; it != chain.end(); ++it) {
          const Block c = *blockOf(*it, pos_[*it]);
          cycle += fmt::format("rank {} ({} {}) -> ", *it, word_, c.transfer ? xfer(c.self).index : at(c.self).index);
        }
        message += fmt::format("; cycle of waits: {}rank {}", cycle, q);
        break;
      }
      chain.push_back(q);
      q = blockOf(q, pos_[q])->awaited.rank;
    }
    throw ScheduleError(r, b.transfer ? xfer(b.self).index : at(b.self).index, message);
  }
};

}  // namespace

VerifyResult runEngine(const std::vector<std::vector<EngineEvent>>& perRank, const char* word) {
  return Engine(perRank, word).run();
}

}  // namespace detail

VerifyResult verifyEvents(const std::vector<std::vector<CommEvent>>& perRank) {
  std::vector<std::vector<detail::EngineEvent>> events(perRank.size());
  for (size_t r = 0; r < perRank.size(); ++r)
    for (size_t e = 0; e < perRank[r].size(); ++e) {
      const CommEvent& c = perRank[r][e];
      detail::EngineEvent x{c.kind, c.label, static_cast<int64_t>(e), {}, c.group, c.op, c.bytes, c.dtype, c.slot};
      for (const Transfer& t : c.transfers) x.transfers.push_back({t, c.label, static_cast<int64_t>(e)});
      events[r].push_back(std::move(x));
    }
  return detail::runEngine(events, "event");
}

}  // namespace tessel::rt::pipeline
