// Opening files that must be regular files, without blocking on anything else.
//
// A path a user or a checkpoint names may turn out to be a FIFO (an open for reading blocks
// until a writer appears, forever), a folder, a device (/dev/zero reads without end, /dev/full
// cannot be replaced) or a socket. Readers open with O_NONBLOCK, so that the open itself never
// waits, check the descriptor's type with fstat and refuse anything but a regular file with
// the kind named; then O_NONBLOCK is cleared (it has no effect on regular files anyway).
// Writers that replace a path by renaming over it refuse a path that exists and is not a
// regular file (following symbolic links), so that a device or FIFO is never replaced.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tessel {

/// The kind of file `mode` (a stat st_mode) describes, for messages: "a regular file",
/// "a folder", "a FIFO", "a character device", "a block device", "a socket",
/// "a symbolic link" or "a file of unknown type".
inline const char* fileKindName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a file of unknown type";
}

/// Opens `path` read-only (O_CLOEXEC) if it is a regular file (symbolic links followed),
/// never blocking: returns the descriptor (the caller closes it), or -1 with `error` set to
/// the cause as a phrase without the path ("is a FIFO, not a regular file", "cannot open: No
/// such file or directory"). A socket cannot be opened at all: its cause names it too.
inline int openRegularFile(const std::string& path, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      error = fmt::format("is {}, not a regular file", fileKindName(st.st_mode));
    else if (err == ELOOP)
      error = "is a symbolic link loop, not a regular file";
    else
      error = fmt::format("cannot open: {}", std::strerror(err));
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error = fmt::format("cannot stat: {}", std::strerror(errno));
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    error = fmt::format("is {}, not a regular file", fileKindName(st.st_mode));
    ::close(fd);
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

/// Reads the whole of regular file `path` into `out` if it holds at most `maxBytes` bytes.
/// Returns false with `error` set to the cause (as openRegularFile, or "N bytes, more than the
/// M-byte limit", or a read error).
inline bool readRegularFile(const std::string& path, size_t maxBytes, std::string& out, std::string& error) {
  const int fd = openRegularFile(path, error);
  if (fd < 0) return false;
  out.clear();
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = fmt::format("cannot read: {}", std::strerror(errno));
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > maxBytes) {
      struct stat st {};
      const long long size = ::fstat(fd, &st) == 0 ? static_cast<long long>(st.st_size) : -1;
      error = size >= 0 ? fmt::format("{} bytes, more than the {}-byte limit", size, maxBytes)
                        : fmt::format("more than the {}-byte limit", maxBytes);
      ::close(fd);
      return false;
    }
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

/// Why `path` must not be replaced by a writer, or "" when it does not exist or is a regular
/// file (or a symbolic link to one): "is a FIFO, not a regular file", "is a symbolic link
/// loop, not a regular file", ... A dangling symbolic link is "" (renaming over it replaces
/// the link only).
inline std::string replaceableFileProblem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    return S_ISREG(st.st_mode) ? "" : fmt::format("is {}, not a regular file", fileKindName(st.st_mode));
  if (errno == ELOOP) return "is a symbolic link loop, not a regular file";
  return "";
}

}  // namespace tessel
