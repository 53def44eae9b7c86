// Where --log-json may write, MLIR-free: shared by the trainers (dsl/trainer) and tessel-run.
//
// Promise: the training log is never a file the process reads, nor inside a folder it reads
// (the data file or folder, a bundle folder, the kernel cache), whichever way the path is
// spelled (relative, through a symbolic link, "..", a hard link to a read file). Writing it
// there would destroy what is read: a kernel library truncated under its own mapping dies of
// SIGBUS, a bundle's program.json or a training file turns into the log. The check runs before
// anything is opened for writing.
#pragma once

#include <string>
#include <vector>

namespace tessel::trainer {

/// A path the process reads, and what it is in a message ("the data", "the bundle folder",
/// "the kernel cache").
struct ReadPath {
  std::string what;
  std::string path;
};

/// Throws std::runtime_error ("--log-json 'X' is inside the kernel cache 'Y', which this
/// process reads; ...") if `logJson` is one of `reads` or lies inside one of them. Nothing for
/// an empty `logJson`; empty entries of `reads` are skipped. Paths need not exist yet. `flag`
/// names the flag the path came from in the message (--report checks DIR/index.html too).
void requireLogIsNotRead(const std::string& logJson, const std::vector<ReadPath>& reads,
                         const std::string& flag = "--log-json");

/// The page `--report DIR` writes, DIR/index.html ("" for an empty `dir`), for
/// requireLogIsNotRead.
std::string reportPagePath(const std::string& dir);

}  // namespace tessel::trainer
