// Where --log-json may write; see LogPath.h.
#include "runtime/train/LogPath.h"

#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>

namespace tessel::trainer {

namespace fs = std::filesystem;

namespace {

/// The path with symbolic links, "." and ".." resolved as far as it exists.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::absolute(path).lexically_normal() : p;
}

/// Whether `inner` is `outer` or lies below it (whole path components).
bool within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace

void requireLogIsNotRead(const std::string& logJson, const std::vector<ReadPath>& reads, const std::string& flag) {
  if (logJson.empty()) return;
  const fs::path log = resolved(logJson);
  for (const ReadPath& r : reads) {
    if (r.path.empty()) continue;
    const fs::path read = resolved(r.path);
    std::error_code ec;
    const bool same = log == read || fs::equivalent(log, read, ec);  // equivalent: hard links too
    if (!same && !within(log, read)) continue;
    throw std::runtime_error(fmt::format(
        "{} '{}' {} {} '{}', which this process reads; writing the {} would destroy it (choose a path outside it)",
        flag, logJson, same ? "is" : "is inside", r.what, r.path, flag == "--log-json" ? "log" : "file"));
  }
}

std::string reportPagePath(const std::string& dir) {
  return dir.empty() ? std::string() : (fs::path(dir) / "index.html").string();
}

}  // namespace tessel::trainer
