// The checks of every numeric command-line flag of the Tessel binaries (tessel-gpt,
// tessel-mlp, tessel-run): one set, so that every range error reads the same way.
//
// Promise: a value out of range is refused by CLI11 with one line that names the flag and
// says the range in words ("--lr: 0 is not a positive number", "--layers: 0 is not an
// integer in [1, 4096]"); bounds that are powers of two from 2^20 up are written 2^k, so no
// message holds a long number the user did not type (CLI11's own PositiveNumber printed
// DBL_MAX in full: 309 digits). NaN, infinities and non-numbers are refused by every check.
// The checks run on the text before CLI11 converts it to the flag's type.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace tessel::trainer {

/// A finite number > 0: "0 is not a positive number".
const CLI::Validator& positiveNumber();

/// A finite number >= 0: "-1 is not a number >= 0".
const CLI::Validator& nonNegativeNumber();

/// A whole number in [min, max] (decimal digits with an optional sign): "0 is not an integer
/// in [1, 4096]".
CLI::Validator integerIn(int64_t min, int64_t max);

/// A finite number in [min, max]: "0 is not a number in [0.001, 100]".
CLI::Validator numberIn(double min, double max);

/// A finite number in (0, max]: "1e+10 is not a number in (0, 1e+06]".
CLI::Validator positiveUpTo(double max);

/// A non-empty value: "an empty value is not a <what>" (e.g. what = "folder"), for the flags
/// that take a path or a name, where an empty value would silently mean "not given".
CLI::Validator nonEmpty(const std::string& what);

/// A file the run will write at its end (--export-params): not empty, not an existing
/// folder, and in an existing folder this process may write to, so that a bad path is refused
/// before training rather than after it: "'/no/such/x.safetensors': the folder '/no/such'
/// does not exist".
CLI::Validator writableFile();

/// A memory size with its unit: a positive number followed by B, KB, KiB, MB, MiB, GB, GiB,
/// TB or TiB (decimal units are powers of 10^3, binary ones of 2^10; spaces between the
/// number and the unit are allowed, the unit's case is not): "80GiB" -> 85899345920.
/// Returns whole bytes (rounded down). Throws std::invalid_argument "'80XB' is not a memory
/// size such as 80GiB (...)" for anything else, zero, or more than 2^60 bytes.
int64_t parseMemorySize(const std::string& text);

/// --device-memory's check: a memory size parseMemorySize reads, else its message.
CLI::Validator memorySize();

}  // namespace tessel::trainer
