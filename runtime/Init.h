// Parameter initialisation, owned by the runtime.
//
// Promise: every element of a parameter is a pure function of (seed, parameter name, the
// element's flat row-major index in the global tensor), so
//   - the values never depend on how many parameters there are or in what order they are
//     created: a model initialises identically however it is built;
//   - any set of elements can be generated on its own, in any order, without the elements
//     before it: a rank generates exactly its shard's elements (runtime/exec/Sharding.h
//     initParameterShard), never the whole tensor, and every plan starts from the same
//     global weights.
// The generator is counter-based: Philox-4x32-10 (runtime/numeric/Philox.h) keyed by a hash
// of (seed, name), with the element pair index as the counter. Normals come from the
// Box-Muller transform written out in Init.cpp, with its own double-precision log, sin and cos
// (std::normal_distribution and the C library's functions differ between implementations),
// so a parameter's values are the same bits on every machine; one Philox call gives one
// Box-Muller pair, elements 2k and 2k+1. Vectorised: about 3 ns per element per core.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tessel {

/// How a parameter starts. Normal uses `std`; Zeros and Ones ignore it.
enum class InitKind { Normal, Zeros, Ones };

/// Fills `out` (n floats) with elements first .. first + n - 1 (flat row-major indices of the
/// global tensor) of the parameter called `name`: the same values as elements first .. of
/// initParameter over any larger n. Work and memory are O(n), whatever `first` is. Throws
/// std::invalid_argument naming the parameter for n < 0, first < 0, first + n > 2^62, a null
/// `out` with n > 0, or (Normal) a standard deviation that is negative or not finite.
void initParameterRange(float* out, int64_t first, int64_t n, InitKind kind, double stddev, uint64_t seed,
                        std::string_view name);

/// Fills `out` (n floats) for the parameter called `name`: initParameterRange from element 0.
void initParameter(float* out, int64_t n, InitKind kind, double stddev, uint64_t seed,
                   std::string_view name);

/// Convenience: a freshly initialised vector of n floats.
std::vector<float> initParameter(int64_t n, InitKind kind, double stddev, uint64_t seed,
                                 std::string_view name);

}  // namespace tessel
