// One save's writing and the multi-rank commit (Checkpoint.h's steps 1-3; SaveJob.h).
//
// Every rank: step_N.tmp/rank_RRRRR.safetensors (through a temporary name, fsynced, renamed,
// folder fsynced), then its marker rank_RRRRR.done (its shard entries and each tensor's kind,
// dtype and global shape, so that rank 0 can index tensors its own pipeline stage does not
// have). Rank 0 then polls for every rank's marker of this save, merges them into index.json,
// renames the folder, updates `latest` and prunes.
#include "runtime/ckpt/SaveJob.h"

#include "runtime/ckpt/Checkpoint.h"  // stepFolderName

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <fcntl.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace tessel::ckpt::detail {

namespace {

std::string errnoText() { return std::strerror(errno); }

/// "1.2 MB", "3.4 kB", "512 bytes" (decimal units, as the durable line reports sizes).
std::string sizeText(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} bytes", bytes);
}

/// The step of a committed folder name ("step_00000010" -> 10), or -1 for any other name.
int64_t committedStep(const std::string& name) {
  if (name.size() < 13 || name.rfind("step_", 0) != 0) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (INT64_MAX - 9) / 10) return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

StDType dtypeNamed(const std::string& name, const std::string& where) {
  StDType d;
  if (!dtypeFromName(name, d)) throw CheckpointError(fmt::format("{}: unknown dtype '{}'", where, name));
  return d;
}

nlohmann::json shardToJson(const ShardEntry& s) {
  return {{"offsets", s.offsets}, {"lengths", s.lengths}, {"file", s.file}, {"key", s.key},
          {"byte_range", {s.begin, s.end}}, {"block_bytes", s.blockBytes}, {"crc32", s.crc32}};
}

ShardEntry shardFromJson(const nlohmann::json& j) {
  ShardEntry s;
  s.offsets = j.at("offsets").get<std::vector<int64_t>>();
  s.lengths = j.at("lengths").get<std::vector<int64_t>>();
  s.file = j.at("file").get<std::string>();
  s.key = j.at("key").get<std::string>();
  s.begin = j.at("byte_range").at(0).get<int64_t>();
  s.end = j.at("byte_range").at(1).get<int64_t>();
  s.blockBytes = j.at("block_bytes").get<int64_t>();
  s.crc32 = j.at("crc32").get<std::vector<uint32_t>>();
  return s;
}

/// Writes this rank's shard file (runtime/io/SafeTensors.h's writer: a temporary name,
/// fsynced, renamed) and returns each box's entry by tensor name. No file when the rank writes
/// no box. The boxes' bytes move into the file's tensors.
std::vector<std::pair<std::string, ShardEntry>> writeShardFile(SaveJob& job, const std::string& dir) {
  std::vector<std::pair<std::string, ShardEntry>> out;
  if (job.boxes.empty()) return out;
  const std::string file = rankStem(job.rank) + ".safetensors";
  SafeTensorsFile shards;
  shards.metadata = {{"format", "pt"}, {"tessel_checkpoint_step", std::to_string(job.step)}};
  for (SnapshotBox& b : job.boxes) {
    const TensorMeta& meta = job.tensors.at(b.name);
    ShardEntry e;
    e.offsets = b.offsets;
    e.lengths = b.lengths;
    e.file = file;
    e.key = boxKey(b.name, b.offsets, b.lengths, meta.shape);
    e.blockBytes = job.blockBytes;
    e.crc32 = blockCrcs(b.bytes.data(), b.bytes.size(), job.blockBytes);
    shards.tensors[e.key] = StTensor{meta.dtype, b.lengths, std::move(b.bytes)};
    out.emplace_back(b.name, std::move(e));
  }
  const std::string path = dir + "/" + file;
  StByteRanges ranges;
  try {
    ranges = writeSafeTensorsWithOffsets(path, shards);
  } catch (const SafeTensorsError& e) {
    throw CheckpointError(e.what());
  }
  for (auto& [name, e] : out) std::tie(e.begin, e.end) = ranges.at(e.key);
  syncFolder(dir);
  return out;
}

/// The marker of a rank: this save's id, and per tensor it writes, its description and shards.
std::string markerText(const SaveJob& job, const std::vector<std::pair<std::string, ShardEntry>>& entries) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, e] : entries) {
    nlohmann::json& t = tensors[name];
    if (t.is_null()) {
      const TensorMeta& m = job.tensors.at(name);
      t = {{"kind", m.kind}, {"dtype", dtypeName(m.dtype)}, {"shape", m.shape}, {"shards", nlohmann::json::array()}};
    }
    t["shards"].push_back(shardToJson(e));
  }
  return nlohmann::json{{"save", job.saveId}, {"rank", job.rank}, {"step", job.step}, {"tensors", tensors}}.dump();
}

/// The JSON of `path` when it is a marker of save `saveId`; null otherwise (absent, an older
/// save's, or unreadable: an older run's leftovers are not this save's agreement).
nlohmann::json readMarker(const std::string& path, const std::string& saveId) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("save") || j["save"] != saveId) return nullptr;
  return j;
}

/// Rank 0's agreement: polls `dir` until every rank's marker of this save exists. Throws on a
/// .failed marker (naming the rank and its reason) or on the timeout (naming the missing ranks).
std::vector<nlohmann::json> awaitMarkers(const SaveJob& job, const std::string& dir) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<nlohmann::json> markers(static_cast<size_t>(job.world));
  auto sleep = std::chrono::milliseconds(1);
  while (true) {
    std::vector<int> missing;
    for (int r = 0; r < job.world; ++r) {
      nlohmann::json& m = markers[static_cast<size_t>(r)];
      if (!m.is_null()) continue;
      const nlohmann::json failed = readMarker(dir + "/" + rankStem(r) + ".failed", job.saveId);
      if (!failed.is_null())
        throw CheckpointError(fmt::format("checkpoint step {} not committed: rank {} failed: {}", job.step, r,
                                          failed.value("reason", std::string("(no reason given)"))));
      m = readMarker(dir + "/" + rankStem(r) + ".done", job.saveId);
      if (m.is_null()) missing.push_back(r);
    }
    if (missing.empty()) return markers;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= job.timeoutSeconds)
      throw CheckpointError(fmt::format(
          "checkpoint step {} not committed: rank{} {} wrote no marker in '{}' within {} s (the previous checkpoint "
          "stays latest)", job.step, missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), dir, job.timeoutSeconds));
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
  }
}

/// The index of this save from every rank's marker; checks that the ranks agree on each
/// tensor's description and that each tensor's shards hold exactly its elements.
Index buildIndex(const SaveJob& job, const std::vector<nlohmann::json>& markers, const std::string& dir) {
  Index index;
  index.step = job.step;
  index.optimizerState = true;
  index.trainer = job.trainer;
  for (size_t r = 0; r < markers.size(); ++r) {
    const std::string where = fmt::format("marker of rank {} in '{}'", r, dir);
    try {
      for (const auto& [name, t] : markers[r].at("tensors").items()) {
        TensorEntry e;
        e.kind = t.at("kind").get<std::string>();
        e.dtype = dtypeNamed(t.at("dtype").get<std::string>(), where);
        e.shape = t.at("shape").get<std::vector<int64_t>>();
        auto [it, fresh] = index.tensors.emplace(name, e);
        if (!fresh && (it->second.kind != e.kind || it->second.dtype != e.dtype || it->second.shape != e.shape))
          throw CheckpointError(fmt::format("{}: tensor '{}' is {} {} {} there but {} {} {} on a lower rank", where,
                                            name, e.kind, dtypeName(e.dtype), e.shape, it->second.kind,
                                            dtypeName(it->second.dtype), it->second.shape));
        for (const nlohmann::json& s : t.at("shards")) it->second.shards.push_back(shardFromJson(s));
      }
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(fmt::format("{}: malformed: {}", where, e.what()));
    }
  }
  for (auto& [name, t] : index.tensors) {
    std::sort(t.shards.begin(), t.shards.end(),
              [](const ShardEntry& a, const ShardEntry& b) { return a.offsets < b.offsets; });
    int64_t held = 0;
    for (const ShardEntry& s : t.shards) held += elementCount(s.lengths, name);
    if (held != elementCount(t.shape, name))
      throw CheckpointError(fmt::format("checkpoint step {}: the shards of '{}' hold {} elements but its shape {} has {}",
                                        job.step, name, held, t.shape, elementCount(t.shape, name)));
  }
  for (const auto& [name, m] : job.tensors)
    if (!index.tensors.count(name))
      throw CheckpointError(fmt::format("checkpoint step {}: no rank wrote tensor '{}'", job.step, name));
  return index;
}

/// Removes every entry of `dir` but the shard files the index names (an older run's leftovers,
/// temporaries, this save's markers), so the committed folder holds exactly index.json and its
/// shards.
void removeAllBut(const std::string& dir, const std::set<std::string>& keep) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (keep.count(name)) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    if (rm) throw CheckpointError(fmt::format("cannot remove '{}': {}", e.path().string(), rm.message()));
  }
  if (ec) throw CheckpointError(fmt::format("cannot list '{}': {}", dir, ec.message()));
}

/// Rank 0's commit after the agreement: index.json, the folder's rename, `latest`, pruning.
/// Returns the committed folder.
std::string commit(const SaveJob& job, const std::string& tmp, const Index& index) {
  std::set<std::string> keep;
  for (const auto& [name, t] : index.tensors)
    for (const ShardEntry& s : t.shards) keep.insert(s.file);
  removeAllBut(tmp, keep);
  writeFileAtomically(tmp + "/index.json", serializeIndex(index));
  const std::string name = stepFolderName(job.step);
  const std::string final = job.root + "/" + name;
  std::string replaced;  // a committed folder of the same step, swapped out
  if (fs::exists(final)) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final.c_str(), RENAME_EXCHANGE) == 0) {
      replaced = tmp;
    } else {  // no atomic exchange on this file system: move the old one away first
      replaced = final + ".replaced";
      std::error_code ec;
      fs::remove_all(replaced, ec);
      if (std::rename(final.c_str(), replaced.c_str()) != 0)
        throw CheckpointError(fmt::format("cannot rename '{}' to '{}': {}", final, replaced, errnoText()));
      if (std::rename(tmp.c_str(), final.c_str()) != 0)
        throw CheckpointError(fmt::format("cannot rename '{}' to '{}': {}", tmp, final, errnoText()));
    }
  } else if (std::rename(tmp.c_str(), final.c_str()) != 0) {
    throw CheckpointError(fmt::format("cannot rename '{}' to '{}': {}", tmp, final, errnoText()));
  }
  syncFolder(job.root);
  writeFileAtomically(job.root + "/latest", name + "\n");
  if (!replaced.empty()) {
    std::error_code ec;
    fs::remove(replaced + "/index.json", ec);
    fs::remove_all(replaced, ec);
  }
  pruneCheckpoints(job.root, job.keep);
  return final;
}

}  // namespace

std::string boxKey(const std::string& name, const std::vector<int64_t>& offsets, const std::vector<int64_t>& lengths,
                   const std::vector<int64_t>& shape) {
  return lengths == shape ? name : fmt::format("{}@{}", name, fmt::join(offsets, ","));
}

std::string rankStem(int rank) { return fmt::format("rank_{:05d}", rank); }

std::string tmpFolder(const std::string& root, int64_t step) { return root + "/" + stepFolderName(step) + ".tmp"; }

void pruneCheckpoints(const std::string& root, int64_t keep) {
  if (keep <= 0) return;
  std::string latest;
  if (std::ifstream in(root + "/latest"); in) std::getline(in, latest);
  std::vector<std::pair<int64_t, fs::path>> committed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const int64_t step = committedStep(e.path().filename().string());
    if (step >= 0 && e.is_directory()) committed.emplace_back(step, e.path());
  }
  if (ec) throw CheckpointError(fmt::format("cannot list '{}': {}", root, ec.message()));
  std::sort(committed.begin(), committed.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < committed.size(); ++i) {
    const fs::path& dir = committed[i].second;
    if (dir.filename().string() == latest) continue;
    // index.json first and durably: a crash in the middle leaves a folder no loader accepts.
    if (fs::remove(dir / "index.json", ec); !ec) syncFolder(dir.string());
    fs::remove_all(dir, ec);
    if (ec) throw CheckpointError(fmt::format("cannot remove '{}': {}", dir.string(), ec.message()));
  }
}

StDType indexDType(rt::DType d) {
  switch (d) {
    case rt::DType::F32: return StDType::F32;
    case rt::DType::BF16: return StDType::BF16;
    case rt::DType::I32: return StDType::I32;
  }
  throw CheckpointError("unknown buffer dtype");
}

const char* indexKind(rt::BufferKind kind) {
  return kind == rt::BufferKind::Parameter ? "parameter" : "optimizer_state";
}

std::string runSave(SaveJob job) {
  const auto start = std::chrono::steady_clock::now();
  const std::string dir = tmpFolder(job.root, job.step);
  try {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
      throw CheckpointError(fmt::format("cannot create folder '{}': {}", dir, ec ? ec.message() : "not a folder"));
    const auto entries = writeShardFile(job, dir);
    // The crash test's hook (Checkpoint.h): a rank killed here leaves a shard without a marker.
    if (const char* delay = std::getenv("TESSEL_CKPT_TEST_DELAY_MS"))
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(delay)));
    writeFileAtomically(dir + "/" + rankStem(job.rank) + ".done", markerText(job, entries));
  } catch (const std::exception& e) {
    // Tell rank 0 why, so that it aborts at once instead of waiting for the timeout.
    try {
      writeFileAtomically(dir + "/" + rankStem(job.rank) + ".failed",
                          nlohmann::json{{"save", job.saveId}, {"rank", job.rank}, {"reason", e.what()}}.dump());
    } catch (const std::exception&) {
    }
    throw CheckpointError(fmt::format("checkpoint step {} on rank {}: {}", job.step, job.rank, e.what()));
  }
  if (job.rank != 0) return "";
  const std::vector<nlohmann::json> markers = awaitMarkers(job, dir);
  const Index index = buildIndex(job, markers, dir);
  const std::string final = commit(job, dir, index);
  int64_t bytes = 0;
  for (const auto& [name, t] : index.tensors)
    for (const ShardEntry& s : t.shards) bytes += s.end - s.begin;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return fmt::format("checkpoint step {} durable: {} from {} rank{} in {:.2f} s (blocked {:.3f} s) -> '{}'",
                     job.step, sizeText(bytes), job.world, job.world == 1 ? "" : "s",
                     seconds + job.blockedSeconds, job.async ? job.blockedSeconds : seconds + job.blockedSeconds,
                     final);
}

}  // namespace tessel::ckpt::detail
