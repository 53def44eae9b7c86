// The cost-model simulator and the closed forms (Simulate.h).
//
// Algorithm: each rank keeps a clock and walks its list. A compute action advances the clock by
// its chunk's cost. A group of comm actions is posted at the rank's clock; once every transfer's
// other end has been posted (pairs by FIFO order per channel, as the verifier pairs them), the
// group ends at max(its post time, the latest peer post) + p2pSeconds: the wait is idle, the rest
// p2p. Post times depend only on a rank's own past, so repeating passes over the ranks until none
// advances gives the same times as an event-driven simulation.
#include "runtime/pipeline/Simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

namespace tessel::rt::pipeline {
namespace {

double costOf(const Action& a, const StageCosts& costs) {
  const std::vector<double>* table = nullptr;
  const char* name = "";
  switch (a.kind) {
    case ActionKind::F: table = &costs.forward, name = "forward"; break;
    case ActionKind::B: table = &costs.backward, name = "backward"; break;
    case ActionKind::I: table = &costs.inputGrad, name = "inputGrad"; break;
    case ActionKind::W: table = &costs.weightGrad, name = "weightGrad"; break;
    default: return 0;
  }
  if (a.stage < 0 || a.stage >= static_cast<int64_t>(table->size()))
    throw std::invalid_argument(fmt::format("simulate: {} needs StageCosts::{}[{}], but it has {} entries", a.text(),
                                            name, a.stage, table->size()));
  const double c = (*table)[a.stage];
  if (!std::isfinite(c) || c < 0)
    throw std::invalid_argument(fmt::format("simulate: StageCosts::{}[{}] is {}; a cost is a finite number of seconds "
                                            ">= 0", name, a.stage, c));
  return c;
}

}  // namespace

StageCosts uniformCosts(int64_t chunks, double forwardSeconds, double backwardSeconds, double p2pSeconds) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(chunks, 0));
  return StageCosts{std::vector<double>(n, forwardSeconds), std::vector<double>(n, backwardSeconds),
                    std::vector<double>(n, backwardSeconds / 2), std::vector<double>(n, backwardSeconds / 2),
                    p2pSeconds};
}

Simulation simulate(const Schedule& schedule, const StageCosts& costs) {
  const int64_t p = static_cast<int64_t>(schedule.size());
  if (!std::isfinite(costs.p2pSeconds) || costs.p2pSeconds < 0)
    throw std::invalid_argument(fmt::format("simulate: p2pSeconds is {}; it must be a finite number >= 0", costs.p2pSeconds));
  // Per rank, per comm action: its group's post time (NaN: not yet); the FIFO pairs per channel.
  std::vector<std::vector<double>> posted(p);
  for (int64_t r = 0; r < p; ++r) {
    posted[r].assign(schedule[r].size(), std::numeric_limits<double>::quiet_NaN());
    for (const Action& a : schedule[r]) costOf(a, costs);
  }
  Channels channels = channelsOf(schedule);
  auto& sends = channels.sends;
  auto& recvs = channels.recvs;
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> partner;
  for (auto& [channel, list] : sends) {
    const auto& theirs = recvs[channel];
    if (list.size() != theirs.size())
      throw std::runtime_error(fmt::format("simulate: {} send(s) but {} recv(s) on the channel rank {} -> rank {}; "
                                           "verifySchedule names the offending action", list.size(), theirs.size(),
                                           channel.first, channel.second));
    for (size_t k = 0; k < list.size(); ++k) partner[list[k]] = theirs[k], partner[theirs[k]] = list[k];
  }
  for (auto& [channel, list] : recvs)
    if (!sends.count(channel))
      throw std::runtime_error(fmt::format("simulate: rank {} receives from rank {}, which sends it nothing",
                                           channel.second, channel.first));

  Simulation sim;
  std::vector<std::vector<TimelineEvent>> timeline(p);
  std::vector<double> clock(p, 0.0), compute(p, 0.0);
  std::vector<size_t> pos(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < p; ++r) {
      const std::vector<Action>& list = schedule[r];
      while (pos[r] < list.size()) {
        const Action& a = list[pos[r]];
        if (a.isCompute()) {
          const double c = costOf(a, costs);
          timeline[r].push_back({r, fmt::format("{}{}.{}", kindName(a.kind), a.microbatch, a.stage), "compute",
                                 clock[r], clock[r] + c});
          clock[r] += c, compute[r] += c, ++pos[r], progress = true;
          continue;
        }
        size_t end = pos[r];
        while (end < list.size() && !list[end].isCompute()) ++end;
        double ready = clock[r];
        bool all = true;
        std::string name;
        for (size_t i = pos[r]; i < end; ++i) {
          if (std::isnan(posted[r][i])) posted[r][i] = clock[r], progress = true;
          const auto [q, j] = partner.at({r, static_cast<int64_t>(i)});
          const double theirs = posted[q][j];
          if (std::isnan(theirs)) all = false;
          else ready = std::max(ready, theirs);
          name += (name.empty() ? "" : "+") + list[i].text();
        }
        if (!all) break;
        if (ready > clock[r]) timeline[r].push_back({r, "idle", "idle", clock[r], ready});
        if (costs.p2pSeconds > 0) timeline[r].push_back({r, name, "p2p", ready, ready + costs.p2pSeconds});
        clock[r] = ready + costs.p2pSeconds;
        pos[r] = end, progress = true;
      }
    }
  }
  for (int64_t r = 0; r < p; ++r)
    if (pos[r] < schedule[r].size())
      throw std::runtime_error(fmt::format("simulate: rank {} is blocked at action {} ({}): the schedule deadlocks; "
                                           "verifySchedule names the cycle", r, pos[r], schedule[r][pos[r]].text()));
  sim.makespan = p ? *std::max_element(clock.begin(), clock.end()) : 0;
  double busy = 0;
  for (int64_t r = 0; r < p; ++r) {
    if (clock[r] < sim.makespan) timeline[r].push_back({r, "idle", "idle", clock[r], sim.makespan});
    sim.events.insert(sim.events.end(), timeline[r].begin(), timeline[r].end());
    busy += compute[r];
    int64_t live = 0, peak = 0;
    for (const Action& a : schedule[r]) {
      live += a.kind == ActionKind::F ? 1 : (a.kind == ActionKind::B || a.kind == ActionKind::W) ? -1 : 0;
      peak = std::max(peak, live);
    }
    sim.peakLiveActivations.push_back(peak);
  }
  sim.bubbleFraction = sim.makespan > 0 ? 1 - busy / (static_cast<double>(p) * sim.makespan) : 0;
  return sim;
}

double closedFormBubble(ScheduleKind kind, int64_t p, int64_t m, int64_t v) {
  if (p < 1 || m < 1 || v < 1)
    throw std::invalid_argument(fmt::format("closedFormBubble: p = {}, m = {}, v = {}; each must be at least 1", p, m, v));
  const double bubble = static_cast<double>(p - 1);
  switch (kind) {
    case ScheduleKind::GPipe:
    case ScheduleKind::OneFOneB: return bubble / static_cast<double>(m + p - 1);
    case ScheduleKind::Interleaved: return bubble / static_cast<double>(v * m + p - 1);
    case ScheduleKind::ZeroBubble: return bubble / static_cast<double>(3 * m + p - 1);
  }
  return 0;
}

}  // namespace tessel::rt::pipeline
