// The checkpoint index (runtime/ckpt/Index.h): serializeIndex, and parseIndex, which trusts
// nothing in its input.
//
// parseIndex in steps:
//   1. size cap, then JSON parsing with a callback that refuses a key repeated in any object
//      (nlohmann would silently keep the last one, so two readers could disagree);
//   2. the top level: exactly the known fields, format "tessel-checkpoint", version 1;
//   3. each tensor: kind, dtype, shape (non-negative integers whose product times the dtype size
//      fits int64);
//   4. each shard: offsets and lengths of the tensor's rank, inside the tensor without overflow,
//      a plain file name, a key, a byte range whose size is the box's bytes, a block size and
//      one CRC per block; a (file, key) pair used once in the whole index;
//   5. exact cover per tensor: no two shards overlap (a sweep in offset order along one
//      dimension, comparing only shards whose ranges meet there) and their element counts sum
//      to the tensor's, which together leave no gap;
//   6. the trainer object, whose "step" equals the index's step.
// Every number goes through one function (integerField) that accepts only JSON integers in
// [min, int64 max]: floats, exponent forms, negative numbers and anything larger are refused
// by name. NaN and Infinity are not JSON, so the parser already refuses them.
#include "runtime/ckpt/FileNames.h"
#include "runtime/ckpt/Index.h"
#include "runtime/io/MessageText.h"
#include "runtime/io/RegularFile.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

namespace tessel::ckpt {

namespace {

using nlohmann::json;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr size_t kMaxRank = kMaxTensorRank;
/// Most shards one tensor may have: far above any mesh (a shard per rank and block).
constexpr size_t kMaxShardsPerTensor = size_t{1} << 16;
/// Most box comparisons the overlap check makes for one tensor. Real layouts need about one
/// per shard and band (a 256 x 256 grid: 2^23); only a contrived index of many thin, interleaved boxes
/// comes near, and it is refused rather than checked for seconds.
constexpr int64_t kMaxOverlapComparisons = int64_t{1} << 25;
/// Deepest JSON nesting accepted (the schema needs 5 levels; the trainer object a few more).
/// Deeper input is refused while parsing: copying, comparing or printing a JSON value
/// recurses once per level, so unbounded nesting could exhaust the stack.
constexpr int kMaxDepth = 64;

/// Throws the index's error: "checkpoint index 'PATH': CONTEXT: CAUSE".
[[noreturn]] void fail(const std::string& path, const std::string& context, const std::string& cause) {
  throw CheckpointError(context.empty() ? fmt::format("checkpoint index '{}': {}", path, cause)
                                        : fmt::format("checkpoint index '{}': {}: {}", path, context, cause));
}

/// Where in the index an error lies, for its message.
struct Where {
  const std::string& path;
  std::string context;
  [[noreturn]] void fail(const std::string& cause) const { ckpt::fail(path, context, cause); }
  /// The file and context, for errors raised by helpers (elementCount).
  std::string describe() const { return fmt::format("checkpoint index '{}': {}", path, context); }
};

/// The field `key` of object `j`, or an error naming it.
const json& field(const Where& w, const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) w.fail(fmt::format("missing field \"{}\"", key));
  return *it;
}

/// A JSON integer in [min, int64 max]; anything else (float, exponent form, string, negative
/// or too large) is an error naming the field.
int64_t integerValue(const Where& w, const json& v, const std::string& name, int64_t min = 0) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(kInt64Max))
      w.fail(fmt::format("\"{}\" is {}, beyond int64", name, abbreviated(v.dump())));
  } else if (!v.is_number_integer()) {
    w.fail(fmt::format("\"{}\" must be an integer, not {}", name,
                       v.is_number() ? abbreviated(v.dump()) : v.type_name()));
  }
  const int64_t x = v.get<int64_t>();
  if (x < min) w.fail(fmt::format("\"{}\" is {}, below the least allowed {}", name, x, min));
  return x;
}

int64_t integerField(const Where& w, const json& j, const char* key, int64_t min = 0) {
  return integerValue(w, field(w, j, key), key, min);
}

/// A JSON array of integers >= min; `expected` >= 0 fixes its length.
std::vector<int64_t> integerArray(const Where& w, const json& j, const char* key, int64_t min,
                                  int64_t expected = -1) {
  const json& a = field(w, j, key);
  if (!a.is_array()) w.fail(fmt::format("\"{}\" must be an array, not {}", key, a.type_name()));
  if (expected >= 0 && static_cast<int64_t>(a.size()) != expected)
    w.fail(fmt::format("\"{}\" has {} entries, expected {}", key, a.size(), expected));
  if (a.size() > kMaxRank && expected < 0)
    w.fail(fmt::format("\"{}\" has {} entries, more than {}", key, a.size(), kMaxRank));
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) out.push_back(integerValue(w, a[i], fmt::format("{}[{}]", key, i), min));
  return out;
}

std::string stringField(const Where& w, const json& j, const char* key) {
  const json& v = field(w, j, key);
  if (!v.is_string()) w.fail(fmt::format("\"{}\" must be a string, not {}", key, v.type_name()));
  return v.get<std::string>();
}

/// Refuses any field of `j` not in `known` (version 1 has a fixed schema: a misspelt field is
/// an error, not silently ignored).
void onlyFields(const Where& w, const json& j, std::initializer_list<const char*> known) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; }))
      w.fail(fmt::format("unknown field {}", quoteName(it.key())));
  }
}

/// Whether boxes a and b (same rank) share an element.
bool boxesOverlap(const ShardEntry& a, const ShardEntry& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.offsets[d] >= b.offsets[d] + b.lengths[d] || b.offsets[d] >= a.offsets[d] + a.lengths[d]) return false;
  }
  return true;
}

std::string boxString(const ShardEntry& s) {
  std::string out = "[";
  for (size_t d = 0; d < s.offsets.size(); ++d) {
    // Not yet known to lie inside the tensor: an end past int64 is written as offset+length.
    int64_t end = 0;
    if (__builtin_add_overflow(s.offsets[d], s.lengths[d], &end))
      out += fmt::format("{}{}:{}+{}", d ? ", " : "", s.offsets[d], s.offsets[d], s.lengths[d]);
    else
      out += fmt::format("{}{}:{}", d ? ", " : "", s.offsets[d], end);
  }
  return out + "]";
}

/// Step 5: the shards of `t` cover it exactly once. Shards already lie inside the tensor.
void checkExactCover(const Where& w, const TensorEntry& t) {
  const int64_t total = elementCount(t.shape, w.describe());
  if (t.shape.empty()) {  // a scalar: exactly one (empty) box
    if (t.shards.size() != 1) w.fail(fmt::format("a scalar needs exactly 1 shard, found {}", t.shards.size()));
    return;
  }
  // Sweep along the dimension with the most distinct offsets (dimension 0 for row-split
  // tensors, 1 for column-split ones): a shard is compared only with the later shards that
  // start before its end there, so the usual layouts cost O(n log n), not O(n^2).
  size_t axis = 0, mostDistinct = 0;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    std::vector<int64_t> starts;
    for (const ShardEntry& s : t.shards) starts.push_back(s.offsets[d]);
    std::sort(starts.begin(), starts.end());
    const auto distinct = static_cast<size_t>(std::unique(starts.begin(), starts.end()) - starts.begin());
    if (distinct > mostDistinct) axis = d, mostDistinct = distinct;
  }
  std::vector<size_t> order(t.shards.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return t.shards[a].offsets[axis] < t.shards[b].offsets[axis]; });
  int64_t comparisons = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const ShardEntry& a = t.shards[order[i]];
    for (size_t j = i + 1; j < order.size(); ++j) {
      const ShardEntry& b = t.shards[order[j]];
      if (b.offsets[axis] >= a.offsets[axis] + a.lengths[axis]) break;
      if (++comparisons > kMaxOverlapComparisons)
        w.fail(fmt::format("{} shards interleave too much to check for overlaps in {} box comparisons",
                           t.shards.size(), kMaxOverlapComparisons));
      if (boxesOverlap(a, b))
        w.fail(fmt::format("shards {} {} and {} {} overlap", order[i], boxString(a), order[j], boxString(b)));
    }
  }
  int64_t covered = 0;  // no overlap and all inside: at most `total`, so no overflow
  for (const ShardEntry& s : t.shards) covered += elementCount(s.lengths, w.describe());
  if (covered != total)
    w.fail(fmt::format("shards cover {} of the tensor's {} elements (a gap)", covered, total));
}

ShardEntry parseShard(const Where& w, const json& j, const TensorEntry& t) {
  if (!j.is_object()) w.fail(fmt::format("must be an object, not {}", j.type_name()));
  onlyFields(w, j, {"offsets", "lengths", "file", "key", "byte_range", "block_bytes", "crc32"});
  ShardEntry s;
  const auto rank = static_cast<int64_t>(t.shape.size());
  s.offsets = integerArray(w, j, "offsets", 0, rank);
  s.lengths = integerArray(w, j, "lengths", 1, rank);
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (s.offsets[d] > t.shape[d] || s.lengths[d] > t.shape[d] - s.offsets[d])
      w.fail(fmt::format("box {} lies outside the tensor's shape [{}] in dimension {}", boxString(s),
                         fmt::join(t.shape, ", "), d));
  }
  s.file = stringField(w, j, "file");
  if (std::string problem = plainFileNameProblem(s.file); !problem.empty())
    w.fail(fmt::format("\"file\" {} is not a plain file name in the checkpoint folder: {}", quoteName(s.file),
                       problem));
  s.key = stringField(w, j, "key");
  if (s.key.empty() || s.key.find('\0') != std::string::npos || s.key == "__metadata__")
    w.fail(fmt::format("\"key\" {} is not a tensor name", quoteName(s.key)));
  const std::vector<int64_t> range = integerArray(w, j, "byte_range", 0, 2);
  s.begin = range[0];
  s.end = range[1];
  if (s.begin > s.end) w.fail(fmt::format("\"byte_range\" [{}, {}] ends before it begins", s.begin, s.end));
  // The box lies inside the tensor, whose byte size fits int64 (checked by the caller).
  const int64_t bytes = elementCount(s.lengths, w.describe()) * static_cast<int64_t>(dtypeSize(t.dtype));
  if (s.end - s.begin != bytes)
    w.fail(fmt::format("\"byte_range\" [{}, {}] holds {} bytes but {} elements of {} need {}", s.begin, s.end,
                       s.end - s.begin, bytes / static_cast<int64_t>(dtypeSize(t.dtype)), dtypeName(t.dtype),
                       bytes));
  s.blockBytes = integerField(w, j, "block_bytes", 1);
  const json& crcs = field(w, j, "crc32");
  if (!crcs.is_array()) w.fail(fmt::format("\"crc32\" must be an array, not {}", crcs.type_name()));
  const int64_t blocks = bytes / s.blockBytes + (bytes % s.blockBytes != 0);
  if (static_cast<int64_t>(crcs.size()) != blocks)
    w.fail(fmt::format("\"crc32\" has {} entries but {} bytes in blocks of {} make {} blocks", crcs.size(), bytes,
                       s.blockBytes, blocks));
  s.crc32.reserve(crcs.size());
  for (size_t i = 0; i < crcs.size(); ++i) {
    const int64_t c = integerValue(w, crcs[i], fmt::format("crc32[{}]", i));
    if (c > 0xFFFFFFFFll) w.fail(fmt::format("\"crc32[{}]\" is {}, beyond 32 bits", i, c));
    s.crc32.push_back(static_cast<uint32_t>(c));
  }
  return s;
}

TensorEntry parseTensor(const Where& w, const json& j) {
  if (!j.is_object()) w.fail(fmt::format("must be an object, not {}", j.type_name()));
  onlyFields(w, j, {"kind", "dtype", "shape", "shards"});
  TensorEntry t;
  t.kind = stringField(w, j, "kind");
  if (t.kind != "parameter" && t.kind != "optimizer_state")
    w.fail(fmt::format("\"kind\" is {}, not \"parameter\" or \"optimizer_state\"", quoteName(t.kind)));
  const std::string dtype = stringField(w, j, "dtype");
  if (!dtypeFromName(dtype, t.dtype))
    w.fail(fmt::format("unknown \"dtype\" {} (known: F32, F64, BF16, F16, I32, I64)", quoteName(dtype)));
  t.shape = integerArray(w, j, "shape", 0);
  const int64_t numel = elementCount(t.shape, w.describe());
  if (numel > kInt64Max / static_cast<int64_t>(dtypeSize(t.dtype)))
    w.fail(fmt::format("shape [{}] of {} is more than int64 bytes", fmt::join(t.shape, ", "), dtype));
  const json& shards = field(w, j, "shards");
  if (!shards.is_array()) w.fail(fmt::format("\"shards\" must be an array, not {}", shards.type_name()));
  if (shards.size() > kMaxShardsPerTensor)
    w.fail(fmt::format("{} shards, more than the {} allowed", shards.size(), kMaxShardsPerTensor));
  for (size_t i = 0; i < shards.size(); ++i)
    t.shards.push_back(parseShard(Where{w.path, fmt::format("{}: shard {}", w.context, i)}, shards[i], t));
  checkExactCover(w, t);
  return t;
}

/// Step 1: JSON with no key repeated in any object.
json parseJson(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  bool tooDeep = false;
  json::parser_callback_t onEvent = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxDepth) {
      tooDeep = true;
      return false;  // drop the value: nothing this deep is kept
    }
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text, onEvent);
  } catch (const json::exception& e) {
    fail(path, "", fmt::format("not valid JSON: {}", abbreviatedQuotes(e.what())));
  }
  if (tooDeep) fail(path, "", fmt::format("JSON nested deeper than {} levels", kMaxDepth));
  if (!duplicate.empty()) fail(path, "", fmt::format("key {} appears twice in one object", quoteName(duplicate)));
  return j;
}

}  // namespace

std::string plainFileNameProblem(const std::string& name) {
  if (name.empty()) return "empty";
  if (name.size() > 255) return "longer than 255 bytes";
  if (name[0] == '.') return "starts with '.'";
  for (char c : name) {
    if (c == '/' || c == '\\') return "contains a path separator";
    if (c == '\0') return "contains a NUL byte";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "contains a control character";
  }
  return "";
}

std::string quoteName(const std::string& name) {
  std::string out = "'";
  // A hostile name is echoed in part: the first 2 x kMaxEchoedChars bytes, then "...".
  const size_t shown = std::min(name.size(), 2 * kMaxEchoedChars);
  for (unsigned char c : std::string_view(name).substr(0, shown)) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  return out + (shown < name.size() ? "...'" : "'");
}

int64_t elementCount(const std::vector<int64_t>& extents, const std::string& what) {
  int64_t n = 1;
  for (int64_t e : extents) {
    if (e < 0) throw CheckpointError(fmt::format("{}: negative extent {}", what, e));
    if (__builtin_mul_overflow(n, e, &n))
      throw CheckpointError(fmt::format("{}: element count of [{}] overflows int64", what, fmt::join(extents, ", ")));
  }
  return n;
}

std::string serializeIndex(const Index& index) {
  json tensors = json::object();
  for (const auto& [name, t] : index.tensors) {
    json shards = json::array();
    for (const ShardEntry& s : t.shards)
      shards.push_back({{"offsets", s.offsets},
                        {"lengths", s.lengths},
                        {"file", s.file},
                        {"key", s.key},
                        {"byte_range", {s.begin, s.end}},
                        {"block_bytes", s.blockBytes},
                        {"crc32", s.crc32}});
    tensors[name] = {{"kind", t.kind}, {"dtype", dtypeName(t.dtype)}, {"shape", t.shape}, {"shards", shards}};
  }
  const json j = {{"format", "tessel-checkpoint"}, {"version", kIndexVersion},  {"step", index.step},
                  {"optimizer_state", index.optimizerState}, {"tensors", tensors}, {"trainer", index.trainer}};
  try {
    return j.dump(1) + "\n";
  } catch (const json::exception& e) {  // a name that is not UTF-8
    throw CheckpointError(fmt::format("cannot serialize the checkpoint index: {}", e.what()));
  }
}

Index parseIndex(const std::string& text, const std::string& path) {
  if (static_cast<int64_t>(text.size()) > kMaxIndexBytes)
    fail(path, "", fmt::format("{} bytes, more than the {}-byte limit", text.size(), kMaxIndexBytes));
  const json j = parseJson(text, path);
  const Where top{path, ""};
  if (!j.is_object()) top.fail(fmt::format("the index must be a JSON object, not {}", j.type_name()));
  onlyFields(top, j, {"format", "version", "step", "optimizer_state", "tensors", "trainer"});
  if (const std::string format = stringField(top, j, "format"); format != "tessel-checkpoint")
    top.fail(fmt::format("\"format\" is {}, not \"tessel-checkpoint\"", quoteName(format)));
  if (const int64_t version = integerField(top, j, "version"); version != kIndexVersion)
    top.fail(fmt::format("\"version\" is {}; this build reads version {}", version, kIndexVersion));
  Index index;
  index.step = integerField(top, j, "step");
  const json& optimizer = field(top, j, "optimizer_state");
  if (!optimizer.is_boolean()) top.fail("\"optimizer_state\" must be true or false");
  index.optimizerState = optimizer.get<bool>();
  const json& tensors = field(top, j, "tensors");
  if (!tensors.is_object()) top.fail(fmt::format("\"tensors\" must be an object, not {}", tensors.type_name()));
  std::set<std::pair<std::string, std::string>> fileKeys;
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    const Where w{path, fmt::format("tensor {}", quoteName(it.key()))};
    if (it.key().empty() || it.key() == "__metadata__") w.fail("not a tensor name");
    if (it.key().find('\0') != std::string::npos) w.fail("tensor name contains a NUL byte");
    TensorEntry t = parseTensor(w, *it);
    for (size_t i = 0; i < t.shards.size(); ++i) {
      if (!fileKeys.emplace(t.shards[i].file, t.shards[i].key).second)
        w.fail(fmt::format("shard {}: file {} key {} is used by another shard", i, quoteName(t.shards[i].file),
                           quoteName(t.shards[i].key)));
    }
    index.tensors.emplace(it.key(), std::move(t));
  }
  const json& trainer = field(top, j, "trainer");
  if (!trainer.is_object()) top.fail(fmt::format("\"trainer\" must be an object, not {}", trainer.type_name()));
  const int64_t trainerStep = integerField(Where{path, "trainer"}, trainer, "step");
  if (trainerStep != index.step)
    top.fail(fmt::format("trainer \"step\" {} differs from the index's \"step\" {}", trainerStep, index.step));
  index.trainer = trainer;
  return index;
}

Index readIndex(const std::string& dir) {
  const std::string path = dir + "/index.json";
  std::string text, problem;
  // Read at most the cap; a FIFO, folder or device is refused without blocking.
  if (!readRegularFile(path, static_cast<size_t>(kMaxIndexBytes), text, problem)) fail(path, "", problem);
  Index index = parseIndex(text, path);
  // A committed folder's name states its step (Checkpoint.h stepFolderName): the two must agree,
  // or `latest`, keep-K and the skipped-save notes would order the checkpoints wrongly.
  const std::string folder = std::filesystem::path(dir).filename().string();
  if (folder.size() >= 13 && folder.rfind("step_", 0) == 0 &&
      folder.find_first_not_of("0123456789", 5) == std::string::npos) {
    int64_t named = 0;
    bool overflow = false;
    for (size_t i = 5; i < folder.size(); ++i)
      overflow = overflow || __builtin_mul_overflow(named, 10, &named) ||
                 __builtin_add_overflow(named, folder[i] - '0', &named);
    if (overflow || named != index.step)
      fail(path, "", fmt::format("the folder '{}' is step {} by its name, but the index's \"step\" is {}", folder,
                                 overflow ? std::string("(beyond int64)") : std::to_string(named), index.step));
  }
  return index;
}

uint32_t crc32Of(const void* data, size_t n) {
  // zlib's crc32 takes a 32-bit length: feed it in pieces below 1 GiB.
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const size_t piece = std::min<size_t>(n, size_t{1} << 30);
    crc = ::crc32(crc, p, static_cast<uInt>(piece));
    p += piece;
    n -= piece;
  }
  return static_cast<uint32_t>(crc);
}

std::vector<uint32_t> blockCrcs(const void* data, size_t n, int64_t blockBytes) {
  if (blockBytes < 1) throw CheckpointError(fmt::format("CRC block size {} must be at least 1 byte", blockBytes));
  std::vector<uint32_t> out;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t at = 0; at < n; at += static_cast<size_t>(blockBytes))
    out.push_back(crc32Of(p + at, std::min(n - at, static_cast<size_t>(blockBytes))));
  return out;
}

}  // namespace tessel::ckpt
