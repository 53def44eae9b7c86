// Resharding loads; see Checkpoint.h loadCheckpoint.
//
// Two agreements keep the ranks together: after each rank has read the index and compared it
// with its own program (the ranks of different pipeline stages have different tensors), and
// after each has read its boxes. At each, every rank's problems are all-gathered, so every
// rank throws the same error or none does; buffers are written only once every rank has read
// everything, so a failed load leaves the executor as it was.
#include "runtime/ckpt/Checkpoint.h"

#include "runtime/ckpt/Boxes.h"
#include "runtime/ckpt/SaveJob.h"  // indexDType, indexKind
#include "runtime/comm/GatherBytes.h"
#include "runtime/exec/Sharding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <set>

namespace tessel::ckpt {

namespace {

/// Every rank's `mine` (a JSON value), in rank order.
std::vector<nlohmann::json> gatherJson(rt::Communicator* world, const nlohmann::json& mine, const std::string& what) {
  if (!world || world->worldSize() == 1) return {mine};
  std::vector<nlohmann::json> out;
  for (const std::string& s : rt::allGatherBytes(*world, mine.dump(), what)) out.push_back(nlohmann::json::parse(s));
  return out;
}

/// The union over ranks of the string lists under `key`.
std::set<std::string> unionOf(const std::vector<nlohmann::json>& all, const char* key) {
  std::set<std::string> out;
  for (const nlohmann::json& j : all)
    for (const nlohmann::json& s : j[key]) out.insert(s.get<std::string>());
  return out;
}

std::string describe(StDType dtype, const std::vector<int64_t>& shape) {
  return fmt::format("{} [{}]", dtypeName(dtype), fmt::join(shape, ", "));
}

/// One buffer this rank loads: its id and, once read, its new local contents.
struct Pending {
  int buffer = -1;
  bool zero = false;  // a State buffer under a weights-only checkpoint
  std::vector<uint8_t> bytes;
};

}  // namespace

LoadResult loadCheckpoint(rt::ProgramExecutor& ex, rt::Communicator* world, const std::string& path,
                          const LoadOptions& options) {
  const rt::Program& p = ex.program();
  const int rank = world ? world->rank() : 0;
  LoadResult result;
  // 1. The index, against this rank's program.
  nlohmann::json mine = {{"names", nlohmann::json::array()}, {"missing", nlohmann::json::array()},
                         {"errors", nlohmann::json::array()}};
  std::vector<Pending> pending;
  try {
    result.dir = resolveCheckpoint(path, &result.notes);
    result.index = readIndex(result.dir);
  } catch (const std::exception& e) {
    mine["errors"].push_back(e.what());
  }
  if (!p.mesh.empty() && rt::meshLayoutOf(p).size() != (world ? world->worldSize() : 1))
    mine["errors"].push_back(fmt::format("the program's mesh {} has {} ranks but the world has {}",
                                         rt::meshLayoutOf(p).describe(), rt::meshLayoutOf(p).size(),
                                         world ? world->worldSize() : 1));
  const bool indexRead = mine["errors"].empty();
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const rt::Buffer& b = p.buffers[i];
    if (b.kind != rt::BufferKind::Parameter && b.kind != rt::BufferKind::State) continue;
    mine["names"].push_back(b.name);
    if (!indexRead) continue;
    if (b.kind == rt::BufferKind::State && !result.index.optimizerState) {
      pending.push_back({static_cast<int>(i), true, {}});
      continue;
    }
    const auto it = result.index.tensors.find(b.name);
    if (it == result.index.tensors.end()) {
      mine["missing"].push_back(b.name);
      continue;
    }
    const std::vector<int64_t> shape = b.globalShape.empty() ? b.shape : b.globalShape;
    const std::string kind = detail::indexKind(b.kind);
    if (it->second.dtype != detail::indexDType(b.dtype) || it->second.shape != shape || it->second.kind != kind)
      mine["errors"].push_back(fmt::format("tensor '{}' is {} {} in the checkpoint but {} {} in the program", b.name,
                                           it->second.kind, describe(it->second.dtype, it->second.shape), kind,
                                           describe(detail::indexDType(b.dtype), shape)));
    else
      pending.push_back({static_cast<int>(i), false, {}});
  }
  const std::vector<nlohmann::json> all = gatherJson(world, mine, "the checkpoint's tensors");
  const std::string where = result.dir.empty() ? path : result.dir;
  std::set<std::string> errors = unionOf(all, "errors");
  const std::set<std::string> missing = unionOf(all, "missing"), names = unionOf(all, "names");
  std::vector<std::string> unexpected;
  if (indexRead)
    for (const auto& [name, t] : result.index.tensors)
      if (!names.count(name)) unexpected.push_back(name);
  std::vector<std::string> partial;
  if (!missing.empty())
    partial.push_back(fmt::format("not in the checkpoint: {}", fmt::join(missing, ", ")));
  if (!unexpected.empty())
    partial.push_back(fmt::format("in the checkpoint but in no rank's program: {}", fmt::join(unexpected, ", ")));
  if (!options.allowPartial)
    for (const std::string& s : partial) errors.insert(s + " (--allow-partial loads the tensors both have)");
  if (!errors.empty())
    throw CheckpointError(fmt::format("cannot load checkpoint '{}': {}", where, fmt::join(errors, "; ")));
  for (const std::string& s : partial) result.notes.push_back(fmt::format("--allow-partial: {}", s));
  if (!result.index.optimizerState)
    result.notes.push_back(fmt::format("'{}' holds weights only: the optimizer state starts at zero", where));

  // 2. This rank's boxes, each read alone (readRegion reads only the CRC blocks it needs).
  std::unique_ptr<rt::MeshLayout> layout;
  std::vector<int> coordinates;
  std::string problem;
  try {
    if (!p.mesh.empty()) {
      layout = std::make_unique<rt::MeshLayout>(rt::meshLayoutOf(p));
      coordinates = layout->coordinates(rank);
    }
    for (Pending& load : pending) {
      const rt::Buffer& b = p.buffers[static_cast<size_t>(load.buffer)];
      load.bytes.assign(static_cast<size_t>(b.bytes()), 0);  // padding stays zero
      if (load.zero) continue;
      const size_t element = static_cast<size_t>(rt::dtypeBytes(b.dtype));
      const std::vector<LocalBox> local = localBoxes(b, layout.get(), coordinates);
      if (local.size() == 1 && local[0].lengths == b.shape) {  // the whole local buffer: read in place
        readRegion(result.dir, result.index, b.name, local[0].offsets, local[0].lengths, load.bytes.data(),
                   &result.stats);
        continue;
      }
      // Every box of the buffer in one call (each CRC block read once), then into place.
      std::vector<std::vector<uint8_t>> staged(local.size());
      std::vector<Box> boxes;
      std::vector<void*> outs;
      for (size_t k = 0; k < local.size(); ++k) {
        staged[k].resize(static_cast<size_t>(elementCount(local[k].lengths, b.name)) * element);
        boxes.emplace_back(local[k].offsets, local[k].lengths);
        outs.push_back(staged[k].data());
      }
      readRegions(result.dir, result.index, b.name, boxes, outs, &result.stats);
      for (size_t k = 0; k < local.size(); ++k) insertBox(load.bytes.data(), b.shape, local[k], element, staged[k].data());
    }
  } catch (const std::exception& e) {
    problem = fmt::format("rank {}: {}", rank, e.what());
  }
  const std::vector<nlohmann::json> read = gatherJson(world, problem, "the checkpoint's reads");
  std::vector<std::string> failed;
  for (const nlohmann::json& j : read)
    if (!j.get<std::string>().empty()) failed.push_back(j.get<std::string>());
  if (!failed.empty())
    throw CheckpointError(fmt::format("cannot load checkpoint '{}': {}", where, fmt::join(failed, "; ")));

  // 3. Every rank has everything: only now are the buffers replaced.
  for (const Pending& load : pending) ex.writeBuffer(load.buffer, load.bytes.data());
  return result;
}

}  // namespace tessel::ckpt
