// The JSON encoding of a Program (program.json); the format is described at the top of
// ProgramJson.cpp. Used by saveProgram/loadProgram (Program.h), which add the kernel sources,
// atomic writes and validation.
#pragma once

#include "runtime/exec/Program.h"

#include <cstdint>
#include <string>

namespace tessel::rt {

/// program.json's text for `program`: keys in the documented order, one space indent, and a
/// final newline. Does not validate (saveProgram does).
std::string encodeProgramJson(const Program& program);

/// Decodes program.json's `text` into a Program's buffers, functions and kernel signatures
/// (not its kernel sources), and sets `version` (kProgramFormatVersionCpu, or
/// kProgramFormatVersion: the program has CUDA kernels; or 5 / 6, the same from before
/// pipeline parallelism: programFormatHasCuda tells). Throws std::runtime_error
/// "<file>: <field>: <problem>" for invalid JSON, an unknown or missing key, a wrong type, or
/// an unsupported version. Does not validate the program (loadProgram does).
Program decodeProgramJson(const std::string& text, const std::string& file, int64_t& version);

}  // namespace tessel::rt
