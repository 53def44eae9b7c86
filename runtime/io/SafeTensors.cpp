// safetensors reader and element types (see SafeTensors.h for the format and the promise); the
// writer is SafeTensorsWrite.cpp.
//
// Reader: reads the 8-byte length, checks it against the file size and a 100 MB cap (the
// reference implementation's limit), parses the JSON, validates every entry, then checks that
// the tensors' byte ranges tile the data area exactly (sorted by offset, no gap, no overlap,
// ending at the end of the file). Only then is tensor data read. readSafeTensorsHeader stops
// after those checks, so a checkpoint reader can read single tensors by their absolute ranges.
#include "runtime/io/SafeTensors.h"
#include "runtime/io/SafeTensorsInternal.h"
#include "runtime/io/MessageText.h"
#include "runtime/io/RegularFile.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

namespace tessel {

// Tensor bytes are copied to and from memory as they are; the format is little-endian.
static_assert(std::endian::native == std::endian::little,
              "SafeTensors.cpp assumes a little-endian host");

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

/// The reference implementation's cap on the header length (100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
/// Deepest JSON nesting a header may have; the format needs 3 (header, entry, shape).
constexpr int kMaxHeaderDepth = 8;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

[[noreturn]] void fail(const std::string& path, const std::string& cause) {
  throw SafeTensorsError(fmt::format("safetensors file '{}': {}", path, cause));
}

std::string shapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

/// Element count of `shape`, or -1 if a dimension is negative or the product overflows.
int64_t checkedNumel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

template <typename T>
StTensor fromValues(StDType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  StTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const int64_t numel = checkedNumel(t.shape);
  if (numel < 0 || static_cast<uint64_t>(numel) != values.size())
    throw SafeTensorsError(fmt::format("tensor of shape {} cannot hold {} values",
                                       shapeString(t.shape), values.size()));
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

template <typename T>
void appendAs(const std::vector<uint8_t>& bytes, std::vector<double>& out) {
  for (size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
    T v;
    std::memcpy(&v, bytes.data() + i, sizeof(T));
    out.push_back(static_cast<double>(v));
  }
}

/// A non-negative JSON integer as uint64, or false.
bool getUnsigned(const json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

/// IEEE binary16 to double, exactly: sign, 5-bit exponent (bias 15), 10-bit fraction;
/// exponent 0 is subnormal (fraction x 2^-24), 31 is infinity or NaN.
double halfToDouble(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int exponent = (h >> 10) & 0x1F;
  const int fraction = h & 0x3FF;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  if (exponent == 31)
    return fraction == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

/// One header entry after validation.
struct Entry {
  std::string name;
  StTensor tensor;  // bytes not yet read
  uint64_t begin = 0, end = 0;
};

Entry parseEntry(const std::string& path, const std::string& name, const json& j) {
  auto bad = [&](const std::string& cause) {
    fail(path, fmt::format("tensor '{}': {}", name, cause));
  };
  if (!j.is_object()) bad("header entry is not a JSON object");
  Entry e;
  e.name = name;
  auto dtype = j.find("dtype");
  if (dtype == j.end() || !dtype->is_string()) bad("missing or non-string \"dtype\"");
  if (!dtypeFromName(dtype->get<std::string>(), e.tensor.dtype))
    bad(fmt::format("unsupported dtype '{}' (supported: F32, F64, BF16, F16, I32, I64)",
                    abbreviated(dtype->get<std::string>())));
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) bad("missing or non-array \"shape\"");
  for (const json& d : *shape) {
    uint64_t v = 0;
    if (!getUnsigned(d, v) || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad(fmt::format("shape {} has a dimension that is not a non-negative integer",
                      abbreviated(shape->dump())));
    e.tensor.shape.push_back(static_cast<int64_t>(v));
  }
  auto offsets = j.find("data_offsets");
  if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 ||
      !getUnsigned((*offsets)[0], e.begin) || !getUnsigned((*offsets)[1], e.end))
    bad("\"data_offsets\" must be [begin, end] with non-negative integers");
  if (e.begin > e.end)
    bad(fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
  const int64_t numel = checkedNumel(e.tensor.shape);
  const uint64_t size = dtypeSize(e.tensor.dtype);
  if (numel < 0 || static_cast<uint64_t>(numel) > std::numeric_limits<uint64_t>::max() / size)
    bad(fmt::format("shape {} is too large", shapeString(e.tensor.shape)));
  if (e.end - e.begin != static_cast<uint64_t>(numel) * size)
    bad(fmt::format("data_offsets [{}, {}] hold {} bytes but {} {} needs {}", e.begin, e.end,
                    e.end - e.begin, dtypeName(e.tensor.dtype), shapeString(e.tensor.shape),
                    static_cast<uint64_t>(numel) * size));
  return e;
}


}  // namespace

namespace detail {

/// Throws unless t.bytes holds exactly dtypeSize x numel bytes.
void checkTensor(const std::string& what, const std::string& name, const StTensor& t) {
  const int64_t numel = checkedNumel(t.shape);
  if (numel < 0)
    throw SafeTensorsError(
        fmt::format("{}: tensor '{}' has an invalid shape {}", what, name, shapeString(t.shape)));
  if (t.bytes.size() != static_cast<uint64_t>(numel) * dtypeSize(t.dtype))
    throw SafeTensorsError(fmt::format("{}: tensor '{}' has {} bytes but {} {} needs {}", what,
                                       name, t.bytes.size(), dtypeName(t.dtype),
                                       shapeString(t.shape), numel * dtypeSize(t.dtype)));
}

}  // namespace detail

size_t dtypeSize(StDType dtype) {
  switch (dtype) {
    case StDType::F32:
      return 4;
    case StDType::F64:
      return 8;
    case StDType::BF16:
      return 2;
    case StDType::I32:
      return 4;
    case StDType::I64:
      return 8;
    case StDType::F16:
      return 2;
  }
  return 0;  // unreachable for valid enumerators
}

const char* dtypeName(StDType dtype) {
  switch (dtype) {
    case StDType::F32:
      return "F32";
    case StDType::F64:
      return "F64";
    case StDType::BF16:
      return "BF16";
    case StDType::I32:
      return "I32";
    case StDType::I64:
      return "I64";
    case StDType::F16:
      return "F16";
  }
  return "?";
}

bool dtypeFromName(std::string_view name, StDType& out) {
  for (StDType d : {StDType::F32, StDType::F64, StDType::BF16, StDType::I32, StDType::I64, StDType::F16}) {
    if (name == dtypeName(d)) {
      out = d;
      return true;
    }
  }
  return false;
}

StTensor StTensor::fromF32(std::vector<int64_t> shape, const std::vector<float>& values) {
  return fromValues(StDType::F32, std::move(shape), values);
}
StTensor StTensor::fromI32(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  return fromValues(StDType::I32, std::move(shape), values);
}
StTensor StTensor::fromF64(std::vector<int64_t> shape, const std::vector<double>& values) {
  return fromValues(StDType::F64, std::move(shape), values);
}

int64_t StTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<double> StTensor::toF64() const {
  detail::checkTensor("toF64", "<unnamed>", *this);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(numel()));
  switch (dtype) {
    case StDType::F32:
      appendAs<float>(bytes, out);
      break;
    case StDType::F64:
      appendAs<double>(bytes, out);
      break;
    case StDType::I32:
      appendAs<int32_t>(bytes, out);
      break;
    case StDType::I64:
      appendAs<int64_t>(bytes, out);
      break;
    case StDType::BF16:
      // bf16 is the top 16 bits of an f32: widen by shifting into the high half.
      for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
        uint16_t h;
        std::memcpy(&h, bytes.data() + i, 2);
        out.push_back(static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(h) << 16)));
      }
      break;
    case StDType::F16:
      for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
        uint16_t h;
        std::memcpy(&h, bytes.data() + i, 2);
        out.push_back(halfToDouble(h));
      }
      break;
  }
  return out;
}

SafeTensorsHeader parseSafeTensorsHeader(const void* prefix, size_t prefixSize, uint64_t fileSize,
                                         const std::string& path) {
  const auto* bytes = static_cast<const uint8_t*>(prefix);
  // 1. Header length: 8 bytes, little-endian, within the file and the cap.
  if (fileSize < 8)
    fail(path, fmt::format("file is {} bytes, shorter than the 8-byte header length", fileSize));
  if (prefixSize < 8) fail(path, fmt::format("only {} bytes of the 8-byte header length given", prefixSize));
  if (fileSize > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(path, fmt::format("file size {} is beyond int64", fileSize));
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i) headerLen |= uint64_t{bytes[i]} << (8 * i);
  if (headerLen > kMaxHeaderBytes)
    fail(path,
         fmt::format("header length {} exceeds the {}-byte limit", headerLen, kMaxHeaderBytes));
  if (headerLen > fileSize - 8)
    fail(path, fmt::format("header length {} runs past the end of the file ({} bytes)", headerLen,
                           fileSize));
  if (headerLen > prefixSize - 8)
    fail(path, fmt::format("header of {} bytes is truncated to {}", headerLen, prefixSize - 8));

  // 2. Parse the JSON, noting duplicate top-level keys (nlohmann would silently keep the last).
  const std::string_view text(reinterpret_cast<const char*>(bytes + 8), headerLen);
  // Nesting deeper than the format's 3 levels is dropped while parsing (and refused below):
  // printing a value in an error message recurses once per level.
  std::set<std::string> seen;
  std::string duplicate;
  bool tooDeep = false;
  json::parser_callback_t onEvent = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxHeaderDepth) {
      tooDeep = true;
      return false;
    }
    if (depth == 1 && event == json::parse_event_t::key &&
        !seen.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, onEvent);
  } catch (const json::exception& e) {
    fail(path, fmt::format("header is not valid JSON: {}", abbreviatedQuotes(e.what())));
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");
  if (tooDeep) fail(path, fmt::format("header JSON is nested deeper than {} levels", kMaxHeaderDepth));
  if (!duplicate.empty()) fail(path, fmt::format("header names '{}' more than once", duplicate));

  // 3. Validate each entry.
  SafeTensorsHeader result;
  result.fileSize = static_cast<int64_t>(fileSize);
  result.dataBegin = static_cast<int64_t>(8 + headerLen);
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) fail(path, "\"__metadata__\" is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          fail(path, fmt::format("metadata value of '{}' is not a string", m.key()));
        result.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    entries.push_back(parseEntry(path, it.key(), *it));
  }

  // 4. The byte ranges must tile the data area exactly, in offset order.
  const uint64_t dataSize = fileSize - 8 - headerLen;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.end > dataSize)
      fail(path,
           fmt::format("tensor '{}': data_offsets [{}, {}] run past the data area of {} bytes",
                       e.name, e.begin, e.end, dataSize));
    if (e.begin < expected)
      fail(path, fmt::format("tensor '{}': data_offsets [{}, {}] overlap tensor '{}' [{}, {}]",
                             e.name, e.begin, e.end, prev->name, prev->begin, prev->end));
    if (e.begin > expected)
      fail(path, fmt::format("tensor '{}': data_offsets [{}, {}] leave bytes [{}, {}) unused",
                             e.name, e.begin, e.end, expected, e.begin));
    expected = e.end;
    prev = &e;
  }
  if (expected != dataSize)
    fail(path,
         fmt::format("tensors cover {} bytes but the data area has {} (file truncated or padded?)",
                     expected, dataSize));
  for (Entry& e : entries) {
    StTensorInfo& info = result.tensors[e.name];
    info.dtype = e.tensor.dtype;
    info.shape = std::move(e.tensor.shape);
    info.begin = result.dataBegin + static_cast<int64_t>(e.begin);
    info.end = result.dataBegin + static_cast<int64_t>(e.end);
  }
  return result;
}

namespace {

/// An open file and its size, for the header and data reads below.
struct OpenFile {
  FilePtr f;
  uint64_t size = 0;
};

OpenFile openForReading(const std::string& path) {
  OpenFile file;
  std::string problem;
  const int fd = openRegularFile(path, problem);  // never blocks on a FIFO
  if (fd < 0) fail(path, problem);
  file.f.reset(::fdopen(fd, "rb"));
  if (!file.f) {
    const int err = errno;
    ::close(fd);
    fail(path, fmt::format("cannot open: {}", std::strerror(err)));
  }
  if (std::fseek(file.f.get(), 0, SEEK_END) != 0)
    fail(path, fmt::format("cannot seek: {}", std::strerror(errno)));
  const long endPos = std::ftell(file.f.get());
  if (endPos < 0) fail(path, fmt::format("cannot determine size: {}", std::strerror(errno)));
  file.size = static_cast<uint64_t>(endPos);
  std::rewind(file.f.get());
  return file;
}

void readExactly(const OpenFile& file, const std::string& path, void* dst, size_t n,
                 const std::string& part) {
  if (n != 0 && std::fread(dst, 1, n, file.f.get()) != n)
    fail(path, fmt::format("cannot read {}: {}", part,
                           std::ferror(file.f.get()) ? std::strerror(errno) : "unexpected end of file"));
}

/// Reads the 8-byte length and the header it announces (checked against the cap and the file
/// size before anything is allocated), leaving the file positioned at the data area.
SafeTensorsHeader readHeader(const OpenFile& file, const std::string& path) {
  std::vector<uint8_t> prefix(8);
  if (file.size < 8) return parseSafeTensorsHeader(prefix.data(), 0, file.size, path);
  readExactly(file, path, prefix.data(), 8, "the header length");
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i) headerLen |= uint64_t{prefix[size_t(i)]} << (8 * i);
  if (headerLen <= kMaxHeaderBytes && headerLen <= file.size - 8) {
    prefix.resize(8 + headerLen);
    readExactly(file, path, prefix.data() + 8, headerLen, "the header");
  }
  return parseSafeTensorsHeader(prefix.data(), prefix.size(), file.size, path);
}

}  // namespace

SafeTensorsHeader readSafeTensorsHeader(const std::string& path) {
  return readHeader(openForReading(path), path);
}

SafeTensorsFile readSafeTensors(const std::string& path) {
  const OpenFile file = openForReading(path);
  SafeTensorsHeader header = readHeader(file, path);
  SafeTensorsFile result;
  result.metadata = std::move(header.metadata);
  // The ranges tile the data area, which follows the header: one sequential pass in offset order.
  std::vector<std::pair<const std::string*, StTensorInfo*>> order;
  for (auto& [name, info] : header.tensors) order.emplace_back(&name, &info);
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (auto& [name, info] : order) {
    StTensor t;
    t.dtype = info->dtype;
    t.shape = std::move(info->shape);
    t.bytes.resize(static_cast<size_t>(info->end - info->begin));
    readExactly(file, path, t.bytes.data(), t.bytes.size(),
                fmt::format("the data of tensor '{}'", *name));
    result.tensors.emplace(*name, std::move(t));
  }
  return result;
}

}  // namespace tessel
