// TEMPORARY: a minimal stand-in for Index.cpp/Reader.cpp's functions so that the engine's tests
// link before the format part lands. Removed once it does.
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/Boxes.h"

#include <fmt/format.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessel::ckpt {

int64_t elementCount(const std::vector<int64_t>& extents, const std::string& what) {
  int64_t n = 1;
  for (int64_t e : extents) {
    if (e < 0) throw CheckpointError(what + ": negative extent");
    n *= e;
  }
  return n;
}

uint32_t crc32Of(const void* data, size_t n) {
  return static_cast<uint32_t>(::crc32(0, static_cast<const Bytef*>(data), static_cast<uInt>(n)));
}

std::vector<uint32_t> blockCrcs(const void* data, size_t n, int64_t blockBytes) {
  std::vector<uint32_t> out;
  for (size_t at = 0; at < n || (n == 0 && out.empty()); at += static_cast<size_t>(blockBytes)) {
    out.push_back(crc32Of(static_cast<const char*>(data) + at, std::min(n - at, static_cast<size_t>(blockBytes))));
    if (n == 0) break;
  }
  return out;
}

std::string serializeIndex(const Index& index) {
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [name, e] : index.tensors) {
    nlohmann::json shards = nlohmann::json::array();
    for (const ShardEntry& s : e.shards)
      shards.push_back({{"offsets", s.offsets}, {"lengths", s.lengths}, {"file", s.file}, {"key", s.key},
                        {"byte_range", {s.begin, s.end}}, {"block_bytes", s.blockBytes}, {"crc32", s.crc32}});
    t[name] = {{"kind", e.kind}, {"dtype", dtypeName(e.dtype)}, {"shape", e.shape}, {"shards", shards}};
  }
  return nlohmann::json{{"format", "tessel-checkpoint"}, {"version", 1}, {"step", index.step},
                        {"optimizer_state", index.optimizerState}, {"tensors", t}, {"trainer", index.trainer}}
      .dump(1);
}

Index parseIndex(const std::string& text, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text);
  Index index;
  index.step = j.at("step");
  index.optimizerState = j.at("optimizer_state");
  index.trainer = j.at("trainer");
  for (const auto& [name, t] : j.at("tensors").items()) {
    TensorEntry e;
    e.kind = t.at("kind");
    for (StDType d : {StDType::F32, StDType::BF16, StDType::I32})
      if (t.at("dtype") == dtypeName(d)) e.dtype = d;
    e.shape = t.at("shape").get<std::vector<int64_t>>();
    for (const nlohmann::json& s : t.at("shards"))
      e.shards.push_back({s.at("offsets"), s.at("lengths"), s.at("file"), s.at("key"), s.at("byte_range").at(0),
                          s.at("byte_range").at(1), s.at("block_bytes"), s.at("crc32")});
    index.tensors[name] = e;
  }
  return index;
}

Index readIndex(const std::string& dir) {
  std::ifstream in(dir + "/index.json");
  if (!in) throw CheckpointError(fmt::format("cannot open '{}/index.json'", dir));
  std::stringstream s;
  s << in.rdbuf();
  return parseIndex(s.str(), dir + "/index.json");
}

void readRegion(const std::string& dir, const Index& index, const std::string& name,
                const std::vector<int64_t>& offsets, const std::vector<int64_t>& lengths, void* out,
                ReadStats* stats) {
  const TensorEntry& t = index.tensors.at(name);
  for (const ShardEntry& s : t.shards) {
    std::ifstream in(dir + "/" + s.file, std::ios::binary);
    std::vector<char> bytes(static_cast<size_t>(s.end - s.begin));
    in.seekg(s.begin);
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!in) throw CheckpointError("short " + s.file);
    if (blockCrcs(bytes.data(), bytes.size(), s.blockBytes) != s.crc32) throw CheckpointError("crc " + s.file);
    copyIntersection(bytes.data(), s.offsets, s.lengths, out, offsets, lengths, dtypeSize(t.dtype));
    if (stats) stats->bytesRead += static_cast<int64_t>(bytes.size());
  }
}

std::string resolveCheckpoint(const std::string& path, std::vector<std::string>* notes) {
  if (std::filesystem::exists(path + "/index.json")) return path;
  std::ifstream in(path + "/latest");
  std::string name;
  if (!in || !std::getline(in, name)) throw CheckpointError("no checkpoint in '" + path + "'");
  return path + "/" + name;
}

}  // namespace tessel::ckpt
