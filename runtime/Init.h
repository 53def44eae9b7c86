// Parameter initialisation, owned by the runtime.
//
// Promise: the values of a parameter depend only on (seed, parameter name, element index
// order), never on how many parameters there are or in what order they are created, so a
// model initialises identically however it is built, and a shard can be reproduced from
// the full tensor's stream. The generator is std::mt19937_64 (fully specified by the C++
// standard) seeded from a 64-bit FNV-1a hash of the name mixed with the seed; normals come
// from the Box-Muller transform written out here (std::normal_distribution is
// implementation-defined, so it is not used).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tessel {

/// How a parameter starts. Normal uses `std`; Zeros and Ones ignore it.
enum class InitKind { Normal, Zeros, Ones };

/// Fills `out` (n floats) for the parameter called `name`.
void initParameter(float* out, int64_t n, InitKind kind, double stddev, uint64_t seed,
                   std::string_view name);

/// Convenience: a freshly initialised vector of n floats.
std::vector<float> initParameter(int64_t n, InitKind kind, double stddev, uint64_t seed,
                                 std::string_view name);

}  // namespace tessel
