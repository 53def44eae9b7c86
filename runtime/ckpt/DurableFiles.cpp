// Durable small files and folders; see DurableFiles.h.
#include "runtime/ckpt/DurableFiles.h"

#include "runtime/ckpt/Index.h"  // CheckpointError
#include "runtime/io/RegularFile.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tessel::ckpt {

namespace {

std::string errnoText() { return std::strerror(errno); }

}  // namespace

void syncFolder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(fmt::format("cannot open folder '{}': {}", dir, errnoText()));
  const int rc = ::fsync(fd);
  const std::string cause = rc != 0 ? errnoText() : "";
  ::close(fd);
  if (rc != 0) throw CheckpointError(fmt::format("cannot fsync folder '{}': {}", dir, cause));
}

void writeFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  // O_NONBLOCK: a FIFO at the temporary's name must be refused, not waited on for a reader.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    const std::string cause = errnoText();
    if (const std::string problem = replaceableFileProblem(tmp); !problem.empty())
      throw CheckpointError(fmt::format("cannot create '{}': it {}", tmp, problem));
    throw CheckpointError(fmt::format("cannot create '{}': {}", tmp, cause));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw CheckpointError(
        fmt::format("cannot create '{}': it is {}, not a regular file", tmp, fileKindName(st.st_mode)));
  }
  std::string problem;
  for (size_t done = 0; done < text.size() && problem.empty();) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w > 0) done += static_cast<size_t>(w);
    else if (w == 0 || errno != EINTR) problem = fmt::format("cannot write '{}': {}", tmp, w == 0 ? "no progress" : errnoText());
  }
  if (problem.empty() && ::fsync(fd) != 0) problem = fmt::format("cannot fsync '{}': {}", tmp, errnoText());
  if (::close(fd) != 0 && problem.empty()) problem = fmt::format("cannot close '{}': {}", tmp, errnoText());
  if (problem.empty() && std::rename(tmp.c_str(), path.c_str()) != 0)
    problem = fmt::format("cannot rename '{}' to '{}': {}", tmp, path, errnoText());
  if (!problem.empty()) {
    ::unlink(tmp.c_str());  // never a partial file under the final name, nor a stray temporary
    throw CheckpointError(problem);
  }
  syncFolder(std::filesystem::path(path).parent_path().string());
}

}  // namespace tessel::ckpt
