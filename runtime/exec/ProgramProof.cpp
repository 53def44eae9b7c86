// The whole program's communication proof; see ProgramProof.h.
//
// Algorithm of proveProgram:
//   1. commEvents: this rank's events of the function, from its own program and its place on
//      the mesh (world ranks of peers and groups resolved here, so the verifier sees world
//      ranks only);
//   2. the events as JSON bytes; all ranks' sizes all-gathered as I32, then every rank's bytes
//      padded to the largest size rounded up to whole I32 words and all-gathered (I32 moves bit
//      for bit on every communicator);
//   3. every rank decodes every list and runs pipeline::verifyEvents: all ranks see the same
//      lists, so all reach the same verdict and, on failure, throw the same message.
#include "runtime/exec/ProgramProof.h"

#include "runtime/comm/GatherBytes.h"
#include "runtime/exec/Sharding.h"  // meshLayoutOf

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>

namespace tessel::rt {
namespace {

using pipeline::CommEvent;
using pipeline::Transfer;
using Kind = CollectiveStep::Kind;
using Phase = CollectiveStep::Phase;

/// What an event's label says a collective step moves: "'name'" of its first named tensor, or
/// "bucket B" for a gradient bucket.
std::string whatMoves(const CollectiveStep& c) {
  if (!c.synchronous && !c.movesShards()) return fmt::format("bucket {}", c.bucket);
  for (const std::string& n : c.names)
    if (!n.empty()) return "'" + n + "'";
  return c.unit.empty() ? fmt::format("bucket {}", c.bucket) : "unit " + c.unit;
}

/// The op of a collective step, as the members of its group must agree on it.
std::string opOf(const CollectiveStep& c) {
  switch (c.kind) {
    case Kind::AllReduceStart:
    case Kind::AllReduceWait: return "all_reduce " + c.reduce;
    case Kind::AllGather: return fmt::format("all_gather dim {}", c.dim);
    case Kind::ReduceScatter: return fmt::format("reduce_scatter {} dim {}", c.reduce, c.dim);
    case Kind::AllToAll: return fmt::format("all_to_all dim {} concat {}", c.dim, c.concatDim);
    case Kind::SendRecv: return "send_recv";
  }
  return "?";
}

nlohmann::json toJson(const CommEvent& e) {
  nlohmann::json transfers = nlohmann::json::array();
  for (const Transfer& t : e.transfers)
    transfers.push_back({{"send", t.send}, {"peer", t.peer}, {"bytes", t.bytes}, {"dtype", t.dtype}, {"shape", t.shape}});
  return {{"kind", static_cast<int>(e.kind)}, {"label", e.label}, {"transfers", transfers}, {"group", e.group},
          {"op", e.op}, {"bytes", e.bytes}, {"dtype", e.dtype}, {"slot", e.slot}};
}

CommEvent fromJson(const nlohmann::json& j) {
  CommEvent e;
  e.kind = static_cast<CommEvent::Kind>(j.at("kind").get<int>());
  e.label = j.at("label").get<std::string>();
  for (const nlohmann::json& t : j.at("transfers"))
    e.transfers.push_back(Transfer{t.at("send").get<bool>(), t.at("peer").get<int>(), t.at("bytes").get<int64_t>(),
                                   t.at("dtype").get<std::string>(), t.at("shape").get<std::vector<int64_t>>()});
  e.group = j.at("group").get<std::vector<int>>();
  e.op = j.at("op").get<std::string>();
  e.bytes = j.at("bytes").get<int64_t>();
  e.dtype = j.at("dtype").get<std::string>();
  e.slot = j.at("slot").get<int64_t>();
  return e;
}

}  // namespace

std::vector<CommEvent> commEvents(const Program& program, const std::string& function, const MeshLayout& mesh,
                                  int rank) {
  std::vector<CommEvent> events;
  const Function* f = program.function(function);
  if (!f) return events;
  std::vector<int> world(static_cast<size_t>(mesh.size()));
  for (int r = 0; r < mesh.size(); ++r) world[static_cast<size_t>(r)] = r;
  auto groupOf = [&](const CollectiveStep& c) {
    return program.mesh.empty() ? world : mesh.groupRanks(rank, c.axes);
  };
  for (size_t s = 0; s < f->steps.size(); ++s) {
    const CollectiveStep* c = std::get_if<CollectiveStep>(&f->steps[s]);
    if (!c) continue;
    const std::string axes = fmt::format("{}", fmt::join(c->axes, ","));
    const std::string at = fmt::format("@{} step {}: ", function, s);
    CommEvent e;
    if (c->kind == Kind::SendRecv) {
      if (c->axes.size() != 1)
        throw std::runtime_error(fmt::format("{}send_recv over [{}]: a send_recv is over exactly one axis", at, axes));
      const size_t axis = static_cast<size_t>(mesh.axisIndex(c->axes[0]));
      const std::vector<int> coordinates = mesh.coordinates(rank);
      e.kind = CommEvent::Kind::P2P;
      e.label = fmt::format("{}send_recv {} over {}", at, fmt::join(c->names, ", "), axes);
      for (size_t i = 0; i < c->tensors.size(); ++i) {
        const Buffer& b = program.buffers.at(static_cast<size_t>(c->tensors[i]));
        std::vector<int> peer = coordinates;
        peer[axis] = static_cast<int>(c->peers.at(i));
        if (peer[axis] < 0 || peer[axis] >= mesh.axes()[axis].size)
          throw std::runtime_error(fmt::format("{}send_recv peer {} is outside axis {} of the mesh {}", at, peer[axis],
                                               c->axes[0], mesh.describe()));
        e.transfers.push_back(Transfer{static_cast<int64_t>(i) < c->sends, mesh.rankAt(peer), b.bytes(),
                                       dtypeName(b.dtype), b.shape});
      }
      events.push_back(std::move(e));
      continue;
    }
    if (c->kind == Kind::AllReduceWait && c->synchronous) continue;  // part of its start's collective
    const bool start = c->kind == Kind::AllReduceStart ? !c->synchronous : c->phase == Phase::Start;
    const bool wait = c->kind == Kind::AllReduceWait || c->phase == Phase::Wait;
    // The bytes and dtype the members must agree on: the bucket buffer of an all-reduce, the
    // input of a shard move (padded alike on every member).
    const Buffer& moved = program.buffers.at(static_cast<size_t>(c->movesShards() ? c->tensors.at(0) : c->buffer));
    e.kind = wait ? CommEvent::Kind::Wait : start ? CommEvent::Kind::Start : CommEvent::Kind::Collective;
    e.group = groupOf(*c);
    const std::string kind = collectiveKindName(collectiveKindIndex(*c));
    e.label = fmt::format("{}{}{} {} over {}", at, kind, wait ? " wait" : start ? " start" : "", whatMoves(*c), axes);
    if (wait) {
      e.slot = c->bucket;
    } else {
      e.op = opOf(*c);
      e.bytes = moved.bytes();
      e.dtype = dtypeName(moved.dtype);
      if (start) e.slot = c->bucket;
    }
    events.push_back(std::move(e));
  }
  return events;
}

pipeline::VerifyResult proveProgram(const Program& mine, Communicator& world, const std::string& function) {
  const int n = world.worldSize();
  const MeshLayout mesh = mine.mesh.empty() ? MeshLayout({MeshAxis{"world", n}}) : meshLayoutOf(mine);
  if (mesh.size() != n)
    throw std::runtime_error(fmt::format("the program's mesh {} has {} ranks but the world has {}", mesh.describe(),
                                         mesh.size(), n));
  nlohmann::json list = nlohmann::json::array();
  for (const CommEvent& e : commEvents(mine, function, mesh, world.rank())) list.push_back(toJson(e));
  const std::string bytes = nlohmann::json{{"function", function}, {"events", list}}.dump();
  std::vector<std::vector<CommEvent>> perRank;
  int rank = 0;
  for (const std::string& text : allGatherBytes(world, bytes, "the communication events of @" + function)) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("events") || j.value("function", "") != function)
      throw std::runtime_error(fmt::format("the communication events of @{} from rank {} are unreadable; were the "
                                           "ranks started from the same build?",
                                           function, rank));
    std::vector<CommEvent>& events = perRank.emplace_back();
    for (const nlohmann::json& e : j.at("events")) events.push_back(fromJson(e));
    ++rank;
  }
  try {
    return pipeline::verifyEvents(perRank);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("the compiled program can hang or mismatch: ") + e.what());
  }
}

pipeline::VerifyResult proveTraining(const Program& mine, Communicator& world) {
  pipeline::VerifyResult total;
  if (world.worldSize() == 1) return total;
  for (const char* function : {"train_step", "accumulate_step", "forward"}) {
    // Every rank takes part in all three exchanges; a function a rank's program lacks is an
    // empty list (so a collective of it on another rank is named as issued on one rank only).
    const pipeline::VerifyResult r = proveProgram(mine, world, function);
    total.events += r.events;
    total.p2pGroups += r.p2pGroups;
    total.collectives += r.collectives;
  }
  return total;
}

std::string proofLine(const pipeline::VerifyResult& result, int world) {
  return fmt::format("proof: {} events on {} ranks ({} send/recv groups, {} collectives): no rank can hang, every "
                     "transfer and collective matches\n",
                     result.events, world, result.p2pGroups, result.collectives);
}

}  // namespace tessel::rt
