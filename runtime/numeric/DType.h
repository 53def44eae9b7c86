// Element types of runtime buffers and collectives: a leaf header (no other Tessel include),
// so the communicators (runtime/comm) and the program format (runtime/exec) share one DType
// without depending on each other.
#pragma once

#include <cstdint>

namespace tessel::rt {

/// Element types of buffers. BF16 is bfloat16 (1 sign, 8 exponent, 7 mantissa bits: the upper
/// half of an IEEE f32), stored as 16 bits and rounded from f32 to nearest even.
enum class DType { F32, I32, BF16 };

/// Bytes per element.
inline int64_t dtypeBytes(DType d) { return d == DType::BF16 ? 2 : 4; }

/// The element type's name as program.json and messages spell it: "f32", "i32", "bf16".
inline const char* dtypeName(DType d) {
  switch (d) {
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::BF16: return "bf16";
  }
  return "?";
}

}  // namespace tessel::rt
