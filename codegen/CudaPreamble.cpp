// The preamble of every CUDA kernel file (cudaKernelPreamble, CudaEmitter.h): includes, the
// bf16 conversions and the device math the kernels share (exp, gelu, silu and their
// gradients, warp reductions), each the twin of the C++ preamble's function of the same name.
#include "codegen/CudaEmitter.h"

#include "codegen/KernelCommon.h"

#include <string>

namespace tessel {

std::string cudaKernelPreamble() {
  return R"cuda(// Tessel generated kernels: CUDA C++ for NVRTC (codegen/CudaPreamble.cpp). The same text
// compiles as host C++ after test/simt/Simt.h, which the SIMT tests use to run the kernels.
// Each kernel is `extern "C" __global__ void symbol(outputs..., inputs...[, scratch])`.
#if defined(__CUDACC_RTC__)
// NVRTC has no standard headers: the fixed-width types and the float constants by hand.
#include <cuda_bf16.h>
typedef int int32_t;
typedef long long int64_t;
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#elif defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cmath>
#include <cstdint>
#endif

static __device__ __forceinline__ float tessel_bits_to_float(int32_t bits) {
#ifdef __CUDACC__
  return __int_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

static __device__ __forceinline__ int32_t tessel_float_to_bits(float f) {
#ifdef __CUDACC__
  return __float_as_int(f);
#else
  int32_t bits;
  std::memcpy(&bits, &f, sizeof f);
  return bits;
#endif
}

)cuda" + kernelcommon::bf16Preamble("static __device__ __forceinline__",
                                     "__device__ __forceinline__") + R"cuda(
static __device__ __forceinline__ bool tessel_aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15u) == 0;
}

// exp(x) within 1.5 ulp: the C++ kernels' tessel_exp (codegen/CppEmitter.cpp), operation
// for operation, so both back ends compute the same function. Cody-Waite reduction
// x = n ln2 + r, Cephes' degree-6 polynomial, 2^n applied as two factors (subnormals);
// NaN -> NaN, x > 88.7228 -> inf, x < -104 -> 0.
static __device__ __forceinline__ float tessel_exp(float x) {
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x/ln2)
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float nc = n > -150.0f ? (n < 128.0f ? n : 128.0f) : -150.0f;  // NaN -> -150
  const int32_t ni = static_cast<int32_t>(nc);
  const int32_t n1 = ni >> 1, n2 = ni - n1;  // each in [-75, 64]: 2^n1, 2^n2 are normal
  float y = p * tessel_bits_to_float((n1 + 127) << 23) * tessel_bits_to_float((n2 + 127) << 23);
  y = x < -104.0f ? 0.0f : y;
  y = x > 88.7228f ? INFINITY : y;
  return x != x ? x : y;
}

// GELU, tanh form, as x * sigmoid(2u) with u = sqrt(2/pi) (x + 0.044715 x^3).
static __device__ __forceinline__ float tessel_gelu(float x) {
  const float z = 1.5957691216057308f * (x + 0.044715f * x * x * x);  // 2u
  return z < -80.0f ? x * 0.0f : x / (1.0f + tessel_exp(-z));
}

// dy * gelu'(x), with s = sigmoid(2u) and e = exp(-2u) (see the C++ preamble).
static __device__ __forceinline__ float tessel_gelu_grad(float x, float dy) {
  const float z = 1.5957691216057308f * (x + 0.044715f * x * x * x);  // 2u
  const float e = tessel_exp(-z);
  const float s = 1.0f / (1.0f + e);
  const float g = s + 1.5957691216057308f * x * (e * s * s) * (1.0f + 0.134145f * x * x);
  return z < -80.0f ? dy * (x * 0.0f) : z > 40.0f ? dy * (1.0f + x * 0.0f) : dy * g;
}

// SiLU and dy * silu'(x), from e = exp(-|x|) and d = 1 / (1 + e): sigmoid(x) is d or e d,
// 1 - sigmoid(x) the other (see the C++ preamble).
static __device__ __forceinline__ float tessel_silu(float x) {
  const float e = tessel_exp(x < 0.0f ? x : -x);
  const float d = 1.0f / (1.0f + e);
  return x * (x >= 0.0f ? d : e * d);
}
static __device__ __forceinline__ float tessel_silu_grad(float x, float dy) {
  const float e = tessel_exp(x < 0.0f ? x : -x);
  const float d = 1.0f / (1.0f + e);
  const float s = x >= 0.0f ? d : e * d, sn = x >= 0.0f ? e * d : d;
  return dy * (s * (1.0f + x * sn));
}

// Warp reductions by xor butterfly: every lane ends with the same bits (each step adds the
// same two values, in either order), and the tree depends only on the lane numbers.
static __device__ __forceinline__ float tessel_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ __forceinline__ double tessel_warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ __forceinline__ float tessel_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

)cuda";
}

}  // namespace tessel
