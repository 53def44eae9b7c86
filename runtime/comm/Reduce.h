// Elementwise arithmetic shared by the communicators (internal to runtime/comm).
//
// Reductions run in a wider accumulator type and are narrowed once per element at the end:
//   F32  accumulates in float   (result: the f32 sum, or the f32 sum divided by the world size)
//   BF16 accumulates in float   (rounded to bf16 once, to nearest even, after the division)
//   I32  accumulates in int64   (Sum wraps modulo 2^32 as two's complement; Avg is the exact
//                                int64 sum divided by the world size, truncated toward zero)
// so the result does not depend on how many partial sums a rank forwards. Max runs through the
// same accumulators (exact: widening and narrowing a value that came from `dtype` is lossless);
// a NaN operand wins, so one NaN anywhere makes the result NaN.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/numeric/BFloat16.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessel::rt::comm {

/// The one bf16 rounding of the project (runtime/numeric/BFloat16.h).
using numeric::floatFromBF16;
using numeric::bf16FromFloat;

/// Bytes per element of the accumulator type of `dtype` (F32, BF16: 4; I32: 8).
inline int64_t accumulatorBytes(DType dtype) { return dtype == DType::I32 ? 8 : 4; }

/// acc[0:n) = widen(src[0:n)) (src holds `dtype` elements).
void widen(DType dtype, const void* src, void* acc, int64_t n);
/// acc[0:n) = acc[0:n) (+ or max) other[0:n), both accumulators of `dtype`: Sum and Avg add,
/// Max keeps the larger (a NaN in either wins).
void accumulate(DType dtype, ReduceOp op, void* acc, const void* other, int64_t n);
/// dst[0:n) = narrow(acc[0:n) / (op == Avg ? world : 1)) in `dtype` (see the file comment).
void narrow(DType dtype, ReduceOp op, int world, const void* acc, void* dst, int64_t n);

/// Argument checks every backend runs when a collective is issued. Each throws CommError
/// "<kind> '<name>': <cause>" for a negative element count, a null buffer with a non-zero
/// count, or a root/peer outside [0, world) (a peer also must not be `self`).
/// Pass the one buffer twice for in-place collectives.
void checkCount(const char* kind, const std::string& name, int64_t count, const void* a,
                const void* b);
void checkRoot(const char* kind, const std::string& name, int root, int world);
void checkPeer(const char* kind, const std::string& name, int peer, int self, int world);
/// Throws CommError "group <label>: <cause>" unless `ranks` is ascending, within [0, world),
/// without repeats and contains `self` (Communicator::subgroup's precondition).
void checkSubgroup(const std::vector<int>& ranks, int self, int world, const std::string& label);

}  // namespace tessel::rt::comm
