// bfloat16 conversions: the one definition the runtime, the reference interpreter and the
// tests share (the generated kernels carry the same arithmetic in their preambles,
// codegen/CppEmitter.cpp and codegen/CudaPreamble.cpp, and a test checks them bit for bit).
//
// bfloat16 is the upper 16 bits of an IEEE-754 binary32: 1 sign, 8 exponent and 7 mantissa
// bits (Kalamkar et al., "A Study of BFLOAT16 for Deep Learning Training", 2019). f32 to
// bf16 rounds to nearest, ties to even, on the dropped 16 bits; finite values that round
// past the largest bf16 become infinity; NaN stays a (quiet) NaN. This matches PyTorch's
// `tensor.to(torch.bfloat16)` and CUDA's __float2bfloat16_rn.
#pragma once

#include <cstdint>
#include <cstring>

namespace tessel::numeric {

/// The bf16 bit pattern nearest to `f` (ties to even); NaN gives 0x7FC0 with f's sign.
inline uint16_t bf16FromFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// The f32 value of a bf16 bit pattern (exact).
inline float floatFromBF16(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// `x` rounded to the nearest bf16 value, through f32 (so a double first rounds to f32: the
/// value a kernel computing in f32 would store).
inline double roundToBF16(double x) {
  return floatFromBF16(bf16FromFloat(static_cast<float>(x)));
}

/// Converts `n` bf16 values to f32 (exact), and `n` f32 values to bf16 (rounded).
inline void bf16ToFloat(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = floatFromBF16(in[i]);
}
inline void floatToBF16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16FromFloat(in[i]);
}

}  // namespace tessel::numeric
