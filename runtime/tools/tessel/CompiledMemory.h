// `tessel memory --model`'s compiled answer: the `tessel` binary links no compiler (no MLIR),
// so it runs the model's compiler-side binary (tessel-gpt for --model gpt), found next to
// itself, with --memory-json, which compiles and lowers the plan to its per-rank program and
// prints that program's memory (runtime/exec/MemoryBreakdown.h) without building kernels or
// allocating any parameter.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessel::cli {

/// The model binary for `model` ("gpt" -> "tessel-gpt") in the folder of the running
/// executable. Throws std::runtime_error naming the path when it is missing.
std::string modelBinary(const std::string& model);

/// Runs `binary` with `args` plus --memory-json and returns the JSON object it prints. Throws
/// std::runtime_error with the binary's last error line when it fails (a plan it refuses, a
/// model it cannot build), or naming the output when it is not one JSON object.
nlohmann::json compiledMemory(const std::string& binary, const std::vector<std::string>& args);

}  // namespace tessel::cli
