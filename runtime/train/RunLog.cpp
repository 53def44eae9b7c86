// The log's memory and communication fields; see RunLog.h.
#include "runtime/train/RunLog.h"

#include "runtime/exec/MemoryBreakdown.h"
#include "runtime/train/FlagChecks.h"  // parseMemorySize

#include <fmt/format.h>

#include <stdexcept>

#include <cstring>
#include <vector>

namespace tessel::trainer {

RankMemory rankMemory(const rt::Program& program, const rt::AllocationCounter* counter) {
  RankMemory m;
  for (const rt::Buffer& b : program.buffers) {
    if (b.kind == rt::BufferKind::Parameter) m.parameters += b.bytes();
    if (b.kind == rt::BufferKind::State) m.optimizerState += b.bytes();
    if (b.kind == rt::BufferKind::Input) m.inputs += b.bytes();
  }
  m.activationArena = program.arenaBytes();
  m.predicted = rt::memoryBreakdown(program).total();
  if (counter) {
    m.measuredPeak = counter->peak();
    m.measuredArena = counter->peak(rt::MemoryRole::Arena);
  }
  return m;
}

nlohmann::json memoryByRank(const rt::Program& program, const rt::AllocationCounter* counter, rt::Communicator* comm) {
  const RankMemory mine = rankMemory(program, counter);
  constexpr size_t kFields = 7;
  const int64_t fields[kFields] = {mine.parameters, mine.optimizerState, mine.inputs,       mine.activationArena,
                                   mine.predicted,  mine.measuredPeak,   mine.measuredArena};
  const int world = comm ? comm->worldSize() : 1;
  std::vector<int64_t> all(kFields * static_cast<size_t>(world));
  if (world > 1) {
    // The communicators move f32, i32 and bf16; the int64 fields travel as pairs of i32 words.
    constexpr int64_t words = kFields * sizeof(int64_t) / sizeof(int32_t);
    comm->allGather(fields, all.data(), words * world, rt::DType::I32, "memory by rank")->wait();
  } else {
    std::memcpy(all.data(), fields, sizeof fields);
  }
  nlohmann::json out = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    const int64_t* f = &all[kFields * static_cast<size_t>(r)];
    out.push_back({{"rank", r}, {"parameters", f[0]}, {"optimizer_state", f[1]}, {"inputs", f[2]},
                   {"activation_arena", f[3]}, {"predicted_bytes", f[4]}, {"measured_peak_bytes", f[5]},
                   {"measured_arena_bytes", f[6]}});
  }
  return out;
}

void requireDeviceMemory(const rt::Program& program, const std::string& deviceMemory, int rank,
                         const std::string& plan) {
  if (deviceMemory.empty()) return;
  const std::string refusal =
      rt::deviceMemoryRefusal(rt::memoryBreakdown(program), parseMemorySize(deviceMemory), rank);
  if (!refusal.empty())
    throw std::runtime_error(fmt::format("--device-memory {}: the plan {} does not fit: {}; shard more (a larger fsdp "
                                         "degree), checkpoint activations or lower the batch",
                                         deviceMemory, plan, refusal));
}

void addStepCommunication(nlohmann::json& record, const rt::CollectiveCounters& before,
                          const rt::CollectiveCounters& after) {
  nlohmann::json bytes = nlohmann::json::object();
  for (int k = 0; k < rt::kCollectiveKinds; ++k)
    if (after.kindCollectives[k] > before.kindCollectives[k])
      bytes[rt::collectiveKindName(k)] = after.kindPayloadBytes[k] - before.kindPayloadBytes[k];
  record["comm_bytes"] = bytes;
  record["comm_exposed_s"] = after.waitSeconds - before.waitSeconds;
}

}  // namespace tessel::trainer
