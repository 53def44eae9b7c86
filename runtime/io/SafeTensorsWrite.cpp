// The safetensors writer (see SafeTensors.h for the format and the promise; the reader is
// SafeTensors.cpp).
//
// Header JSON {"__metadata__": {...}, "<name>": {"dtype", "shape", "data_offsets"}, ...} with
// tensors in name order and their data packed back to back in the same order; the JSON is
// padded with spaces to a multiple of 8 bytes, as the reference implementation does, so the
// data area starts 8-byte aligned. The file is written to "<path>.tmp", flushed, fsynced and
// renamed over `path`; on any failure the tmp file is removed.
#include "runtime/io/RegularFile.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/SafeTensorsInternal.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace tessel {

namespace {

using nlohmann::ordered_json;
using detail::checkTensor;

/// Writes all of `data` or throws with errno's message.
void writeAll(std::FILE* f, const void* data, size_t n, const std::string& tmp) {
  if (n != 0 && std::fwrite(data, 1, n, f) != n)
    throw SafeTensorsError(fmt::format("cannot write '{}': {}", tmp, std::strerror(errno)));
}

}  // namespace

StByteRanges writeSafeTensorsWithOffsets(const std::string& path, const SafeTensorsFile& file,
                                         bool durable) {
  const std::string what = fmt::format("cannot write safetensors file '{}'", path);
  // 1. Header JSON, tensors in name order (std::map order), data packed in the same order.
  ordered_json header = ordered_json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  StByteRanges ranges;
  for (const auto& [name, t] : file.tensors) {
    if (name == "__metadata__")
      throw SafeTensorsError(
          fmt::format("{}: '__metadata__' is reserved, not a tensor name", what));
    checkTensor(what, name, t);
    header[name] = {{"dtype", dtypeName(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    ranges[name] = {static_cast<int64_t>(offset), static_cast<int64_t>(offset + t.bytes.size())};
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const ordered_json::exception& e) {  // e.g. a name that is not valid UTF-8
    throw SafeTensorsError(fmt::format("{}: {}", what, e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  const int64_t dataBegin = 8 + static_cast<int64_t>(text.size());
  for (auto& [name, range] : ranges) range = {dataBegin + range.first, dataBegin + range.second};
  uint8_t lengthLE[8];
  for (int i = 0; i < 8; ++i) lengthLE[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));

  // 2. Write "<path>.tmp", flush, fsync, close, rename; remove the tmp file on any failure.
  // A device, FIFO, socket or folder at `path` (or at the tmp name) is refused, never replaced
  // by the rename nor written into (opening a FIFO to write blocks until a reader comes).
  if (std::string problem = replaceableFileProblem(path); !problem.empty())
    throw SafeTensorsError(fmt::format("{}: it {}", what, problem));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0644);
  struct stat st {};
  if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    ::close(fd);
    throw SafeTensorsError(fmt::format("{}: its temporary file '{}' is {}, not a regular file", what, tmp,
                                       fileKindName(st.st_mode)));
  }
  std::FILE* f = fd >= 0 ? ::fdopen(fd, "wb") : nullptr;
  if (!f) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (std::string problem = replaceableFileProblem(tmp); !problem.empty())
      throw SafeTensorsError(fmt::format("{}: its temporary file '{}' {}", what, tmp, problem));
    throw SafeTensorsError(fmt::format("{}: cannot create '{}': {}", what, tmp, std::strerror(err)));
  }
  if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  try {
    writeAll(f, lengthLE, 8, tmp);
    writeAll(f, text.data(), text.size(), tmp);
    for (const auto& [name, t] : file.tensors) writeAll(f, t.bytes.data(), t.bytes.size(), tmp);
    if (std::fflush(f) != 0 || (durable && ::fsync(fileno(f)) != 0))
      throw SafeTensorsError(fmt::format("cannot flush '{}': {}", tmp, std::strerror(errno)));
    std::FILE* closing = f;
    f = nullptr;
    if (std::fclose(closing) != 0)
      throw SafeTensorsError(fmt::format("cannot close '{}': {}", tmp, std::strerror(errno)));
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw SafeTensorsError(fmt::format("cannot rename '{}': {}", tmp, std::strerror(errno)));
  } catch (const SafeTensorsError& e) {
    if (f) std::fclose(f);
    std::remove(tmp.c_str());
    throw SafeTensorsError(fmt::format("{}: {}", what, e.what()));
  }
  // 3. Best effort: make the rename itself durable by syncing the directory.
  if (!durable) return ranges;
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return ranges;
}

void writeSafeTensors(const std::string& path, const SafeTensorsFile& file) {
  writeSafeTensorsWithOffsets(path, file, /*durable=*/true);
}

}  // namespace tessel
