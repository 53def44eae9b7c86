// Names inside a checkpoint folder and root: the checks that keep every path the index or
// `latest` names inside its folder (runtime/ckpt/Index.h's promise). Internal to tessel_ckpt
// and `tessel ckpt`.
#pragma once

#include <string>

namespace tessel::ckpt {

/// Why `name` is not a plain file name inside a folder, or "" when it is one: non-empty, at
/// most 255 bytes, no '/', '\\', NUL or other control character, and no leading '.' (which
/// also excludes "." and ".."). The cause is a short phrase for an error message.
std::string plainFileNameProblem(const std::string& name);

/// `name` quoted for a one-line message: printable ASCII as is, other bytes as \xNN, so a
/// hostile name can neither break the line nor hide its bytes; a name longer than 128 bytes
/// shows its first 128 and "..." (a line stays one line of reasonable length).
std::string quoteName(const std::string& name);

}  // namespace tessel::ckpt
