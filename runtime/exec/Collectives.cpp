// Collective schedule reports and checks; see Collectives.h.
#include "runtime/exec/Collectives.h"

#include "runtime/exec/BlockLayout.h"  // shardMovePlan: a shard move's payload
#include "runtime/numeric/Fnv1a.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace tessel::rt {
namespace {

const CollectiveStep* asCollective(const Step& s) { return std::get_if<CollectiveStep>(&s); }

/// What one collective step contributes per rank: a bucket's bytes, or a shard move's
/// payload (Program.h).
int64_t payloadOf(const Program& program, const CollectiveStep& c) {
  if (c.kind == CollectiveStep::Kind::SendRecv) {  // the bytes sent
    int64_t bytes = 0;
    for (int64_t i = 0; i < c.sends; ++i) bytes += program.buffers.at(static_cast<size_t>(c.tensors.at(i))).bytes();
    return bytes;
  }
  if (!c.movesShards()) return program.buffers.at(static_cast<size_t>(c.buffer)).bytes();
  return shardMovePlan(program, c).payloadBytes;  // the executors count the same (padding included)
}

/// "all_reduce A bytes, all_gather B bytes, reduce_scatter C bytes, all_to_all D bytes", then
/// ", send_recv E bytes" in a pipelined program (E > 0).
std::string bytesByKind(const std::array<int64_t, kCollectiveKinds>& bytes) {
  std::string out;
  for (int k = 0; k < kCollectiveKinds; ++k)
    if (k < 4 || bytes[static_cast<size_t>(k)] > 0)
      out += fmt::format("{}{} {} bytes", k ? ", " : "", collectiveKindName(k), bytes[static_cast<size_t>(k)]);
  return out;
}

std::string mib(int64_t bytes) { return fmt::format("{:.3f} MiB", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

CollectiveBytes collectiveBytes(const Program& program, const std::string& function) {
  CollectiveBytes out;
  const Function* f = program.function(function);
  if (!f) return out;
  for (const Step& s : f->steps) {
    const CollectiveStep* c = asCollective(s);
    if (!c || c->kind == CollectiveStep::Kind::AllReduceWait || c->phase == CollectiveStep::Phase::Wait) continue;
    const int64_t bytes = payloadOf(program, *c);
    ++(c->synchronous ? out.synchronous : out.buckets);
    out.payloadBytes += bytes;
    // A ring all-reduce sends 2 (N - 1) / N of the payload; the shard moves (N - 1) / N.
    const double factor = c->movesShards() ? 1.0 : 2.0;
    if (c->kind == CollectiveStep::Kind::SendRecv)
      out.ringWireBytes += static_cast<double>(bytes);  // point to point: what is sent is on the wire
    else
      out.ringWireBytes += factor * static_cast<double>(c->group - 1) / static_cast<double>(c->group) *
                           static_cast<double>(bytes);
    const auto kind = static_cast<size_t>(collectiveKindIndex(*c));
    ++out.kindCollectives[kind];
    out.kindPayloadBytes[kind] += bytes;
  }
  return out;
}

std::string explainCollectives(const Program& program, const std::string& function) {
  const Function* f = program.function(function);
  if (!f) return "";
  std::string out;
  int64_t group = 1;
  for (size_t i = 0; i < f->steps.size(); ++i) {
    const CollectiveStep* c = asCollective(f->steps[i]);
    if (!c) continue;
    group = std::max(group, c->group);
    const int64_t bytes = payloadOf(program, *c);
    const std::string axes = fmt::format("{}", fmt::join(c->axes, ","));
    if (c->kind == CollectiveStep::Kind::SendRecv) {
      std::string transfers;
      for (size_t t = 0; t < c->tensors.size(); ++t)
        transfers += fmt::format("{}{} {} {} {}", t ? ", " : "", static_cast<int64_t>(t) < c->sends ? "send to" : "recv from",
                                 axes, c->peers.at(t), t < c->names.size() ? "[" + c->names[t] + "]" : "");
      out += fmt::format("send_recv over {} ({} ranks): {}; {} bytes sent, step {}/{}\n", axes, c->group, transfers,
                         bytes, i, f->steps.size());
      continue;
    }
    if (c->movesShards() && c->phase == CollectiveStep::Phase::Wait) {
      out += fmt::format("  waits at step {}/{}: all_gather [{}]{}\n", i, f->steps.size(),
                         c->names.empty() ? "?" : c->names[0], c->unit.empty() ? "" : " unit " + c->unit);
      continue;
    }
    if (c->movesShards()) {
      const Buffer& in = program.buffers.at(static_cast<size_t>(c->tensors.at(0)));
      const Buffer& res = program.buffers.at(static_cast<size_t>(c->tensors.at(1)));
      out += fmt::format("forward/backward collective: {}{}{} over {} ({} ranks) {} [{}] -> [{}], {} bytes ({}), "
                         "step {}/{}, {}{}{}\n",
                         collectiveKindName(collectiveKindIndex(*c)),
                         c->phase == CollectiveStep::Phase::Start ? " start" : "",
                         c->kind == CollectiveStep::Kind::ReduceScatter ? " " + c->reduce : "", axes, c->group,
                         c->kind == CollectiveStep::Kind::AllToAll
                             ? fmt::format("split dim {} concat dim {}", c->dim, c->concatDim)
                             : fmt::format("dim {}", c->dim),
                         fmt::join(in.shape, "x"), fmt::join(res.shape, "x"), bytes, mib(bytes), i, f->steps.size(),
                         c->location.empty() ? "?" : c->location,
                         c->names.empty() || c->names[0].empty() ? "" : " [" + c->names[0] + "]",
                         c->unit.empty() ? "" : " unit " + c->unit);
      continue;
    }
    if (c->synchronous) {
      // A forward or backward all-reduce of the partitioned model: its wait is the next step.
      if (c->kind == CollectiveStep::Kind::AllReduceStart)
        out += fmt::format("forward/backward collective {}: all_reduce {} over {} ({} ranks), {} bytes ({}), step "
                           "{}/{}, {}{}\n",
                           c->bucket, c->reduce, axes, c->group, bytes, mib(bytes), i, f->steps.size(),
                           c->location.empty() ? "?" : c->location,
                           c->names.empty() || c->names[0].empty() ? "" : " [" + c->names[0] + "]");
      continue;
    }
    if (c->kind == CollectiveStep::Kind::AllReduceStart) {
      out += fmt::format("bucket {}: all_reduce {} over {} ({} ranks), {} gradients, {} bytes ({}){}\n", c->bucket,
                         c->reduce, axes, c->group, c->tensors.size(), bytes, mib(bytes),
                         c->inPlace ? ", in place (the gradients are views of the bucket: no copies)" : "");
      for (size_t t = 0; t < c->tensors.size(); ++t)
        out += fmt::format("    {:<40} {:>10} bytes\n", t < c->names.size() ? c->names[t] : "?",
                           program.buffers.at(static_cast<size_t>(c->tensors[t])).bytes());
      out += fmt::format("  starts at step {}/{}, {}\n", i, f->steps.size(), c->anchor);
    } else {
      out += fmt::format("  bucket {} waits at step {}/{}, {}\n", c->bucket, i, f->steps.size(), c->anchor);
    }
  }
  if (out.empty()) return out;
  CollectiveBytes b = collectiveBytes(program, function);
  std::string wire = b.movesShards() ? "ring wire bytes 2(N-1)/N x all_reduce payload + (N-1)/N x the rest"
                                     : "ring all-reduce wire bytes 2(N-1)/N x payload";
  if (b.kindCollectives[4] > 0) wire += " + send_recv payload";
  return fmt::format("collectives of @{}: {} bucket{}{}\n", function, b.buckets, b.buckets == 1 ? "" : "s",
                     b.synchronous == 0 ? std::string()
                                        : fmt::format(", {} forward/backward collective{}", b.synchronous,
                                                      b.synchronous == 1 ? "" : "s")) +
         out +
         fmt::format("per rank per step: payload {} bytes ({}); {} = {:.0f} bytes (N = {})\n", b.payloadBytes,
                     mib(b.payloadBytes), wire, b.ringWireBytes, group) +
         fmt::format("per rank per step by kind: {}\n", bytesByKind(b.kindPayloadBytes));
}

uint64_t collectiveScheduleHash(const Program& program) {
  uint64_t h = numeric::kFnv1aOffsetBasis;
  auto mix = [&](const void* data, size_t n) { h = numeric::fnv1a(h, data, n); };
  auto mixInt = [&](int64_t v) { mix(&v, sizeof v); };
  for (const Function& f : program.functions) {
    mix(f.name.data(), f.name.size());
    for (const Step& s : f.steps) {
      const CollectiveStep* c = asCollective(s);
      if (!c) continue;
      mixInt(static_cast<int64_t>(c->kind));
      if (c->phase != CollectiveStep::Phase::Whole) mixInt(100 + static_cast<int64_t>(c->phase));
      mixInt(c->bucket);
      mix(c->reduce.data(), c->reduce.size());
      for (const std::string& a : c->axes) {
        mix(a.data(), a.size());
        mixInt(-1);  // separates the names, so ["d", "p"] and ["dp"] differ
      }
      mixInt(c->synchronous);
      mixInt(c->dim);
      mixInt(c->concatDim);
      mixInt(c->group);
      for (int t : c->tensors) mixInt(program.buffers.at(static_cast<size_t>(t)).numel());
      for (int64_t peer : c->peers) mixInt(peer);
      mixInt(c->sends);
    }
  }
  return h;
}

void checkCollectiveSchedule(const Program& program, Communicator& comm) {
  const int world = comm.worldSize();
  if (world == 1) return;
  // Per rank: its hash (two words), its pipeline stage and stage count (-1 and 0 without a
  // pipeline). Ranks of one stage run one program, so each rank is compared with the lowest
  // rank of its stage; different stages run different programs, which the proof before
  // training (ProgramProof.h) checks against each other.
  const uint64_t mine = collectiveScheduleHash(program);
  int32_t words[4] = {0, 0, program.pipeline ? static_cast<int32_t>(program.pipeline->stage) : -1,
                      program.pipeline ? static_cast<int32_t>(program.pipeline->stages) : 0};
  std::memcpy(words, &mine, sizeof mine);
  std::vector<int32_t> all(static_cast<size_t>(4 * world));
  comm.allGather(words, all.data(), 4 * world, DType::I32, "collective schedule hash")->wait();
  auto hashOf = [&](int r) {
    uint64_t h = 0;
    std::memcpy(&h, all.data() + 4 * r, sizeof h);
    return h;
  };
  auto stageOf = [&](int r) { return all[static_cast<size_t>(4 * r + 2)]; };
  std::string stages;
  for (int r = 1; r < world; ++r)
    if (all[static_cast<size_t>(4 * r + 3)] != all[3])
      stages += fmt::format("{}rank {} ({} stages)", stages.empty() ? "" : ", ", r, all[static_cast<size_t>(4 * r + 3)]);
  if (!stages.empty())
    throw std::runtime_error(fmt::format("--check-schedule: the pipeline of {} differs from rank 0's ({} stages); "
                                         "were the ranks built with the same plan?",
                                         stages, all[3]));
  std::string differ;
  for (int r = 1; r < world; ++r) {
    int first = 0;  // the lowest rank of r's stage
    while (stageOf(first) != stageOf(r)) ++first;
    if (first != r && hashOf(r) != hashOf(first))
      differ += fmt::format("{}rank {} ({:016x}) from rank {}'s ({:016x}){}", differ.empty() ? "" : ", ", r, hashOf(r),
                            first, hashOf(first), stageOf(r) >= 0 ? fmt::format(" in stage {}", stageOf(r)) : "");
  }
  if (!differ.empty())
    throw std::runtime_error(fmt::format(
        "--check-schedule: the collective schedule differs: {}; the ranks would issue different collectives and "
        "hang or reduce the wrong buffers (were they built from the same model, flags and plan?)",
        differ));
}

std::string communicationSummary(const Program& program, const CollectiveCounters& c, int64_t steps, int world) {
  if (c.collectives == 0 || steps <= 0) return "";
  const double n = static_cast<double>(steps);
  const CollectiveBytes b = collectiveBytes(program, "train_step");
  return fmt::format("communication: {:.1f} all-reduces/step, payload {} bytes/step, ring wire {:.0f} "
                     "bytes/step (N = {}), starts {:.3f} ms/step, exposed (waits) {:.3f} ms/step\n",
                     static_cast<double>(c.kindCollectives[0]) / n, c.payloadBytes / steps, b.ringWireBytes, world,
                     1e3 * c.startSeconds / n, 1e3 * c.waitSeconds / n) +
         communicationByKind(c, steps);
}

std::string communicationByKind(const CollectiveCounters& c, int64_t steps) {
  if (c.collectives == 0 || steps <= 0) return "";
  std::string out;
  for (int k = 0; k < kCollectiveKinds; ++k) {
    const auto at = static_cast<size_t>(k);
    if (c.kindCollectives[at] == 0) continue;
    out += fmt::format("{}{} {:.1f}/step {} bytes/step", out.empty() ? "" : ", ", collectiveKindName(k),
                       static_cast<double>(c.kindCollectives[at]) / static_cast<double>(steps),
                       c.kindPayloadBytes[at] / steps);
  }
  return "communication by kind: " + out + "\n";
}

}  // namespace tessel::rt
