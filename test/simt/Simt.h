// SIMT harness: runs CUDA C++ kernels on the CPU, so generated GPU kernels are executed and
// checked in CI, which has no GPU.
//
// Promise: a kernel written for CUDA compiles as host C++ after including this header, and
// `simt::launch` runs it with CUDA's execution model: every block's threads run as fibers
// (ucontext) on one OS thread; `__syncthreads()` is a real barrier (a fiber waits until every
// live thread of its block arrives); warp shuffles exchange values among the 32 lanes of a
// warp, which also meet at the shuffle; `__shared__` variables are shared by the threads of
// a block. Fibers switch only at barriers and shuffles, and run in thread order in between,
// so a missing `__syncthreads()` makes a reduction read values not yet written: races show
// up deterministically instead of by luck.
//
// Modelled: threadIdx, blockIdx, blockDim, gridDim, warpSize, __syncthreads,
// __shfl_sync/__shfl_xor_sync/__shfl_down_sync/__shfl_up_sync (float, int, double),
// __shared__, atomicAdd on float, int and unsigned (blocks run one at a time, so plain adds
// are atomic), __threadfence (a no-op: one OS thread sees every write), __ldg, float4/int4/uint2
// with make_float4/make_int4 (16-byte aligned, as in CUDA), the math functions CUDA and C++
// share, and __nv_bfloat16 with its conversions. Not modelled (kernels
// using them run only on a GPU): tensor-core instructions (wmma/wgmma), TMA, clusters,
// cooperative groups, asynchronous copies.
#pragma once

#include <cmath>
#include <math.h>  // expf, sqrtf, tanhf, ... in the global namespace, as in CUDA
#include <cstdint>
#include <cstring>
#include <functional>

namespace simt {

/// CUDA's dim3.
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/// What a running fiber sees as its CUDA thread.
struct ThreadState {
  dim3 thread, block, blockSize, gridSize;  // threadIdx, blockIdx, blockDim, gridDim
  unsigned linear = 0;                      // threadIdx flattened (x fastest)
};

/// The state of the fiber running now. Valid only inside a launched kernel.
ThreadState& current();

/// Block-wide barrier (__syncthreads).
void syncthreads();

/// Warp exchange: every lane of the calling thread's warp publishes `value` and receives the
/// value of lane `source(lane)`. All lanes of the warp must call it (as CUDA requires with a
/// full mask).
float shuffle(float value, const std::function<int(int lane)>& source);
int shuffle(int value, const std::function<int(int lane)>& source);
double shuffle(double value, const std::function<int(int lane)>& source);

/// Runs `body` once per thread of each block of `grid` x `block` (blocks in order, threads as
/// fibers). Throws std::runtime_error if the threads of a block deadlock (some wait at a
/// barrier that others never reach, e.g. __syncthreads inside a divergent branch).
void launch(dim3 grid, dim3 block, const std::function<void()>& body);

/// Number of fiber switches in the last launch (for tests of the harness itself).
uint64_t lastLaunchSwitches();

}  // namespace simt

// ---- the CUDA surface, for kernels compiled as host C++ ----------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define threadIdx (::simt::current().thread)
#define blockIdx (::simt::current().block)
#define blockDim (::simt::current().blockSize)
#define gridDim (::simt::current().gridSize)
#define warpSize 32

using simt::dim3;

inline void __syncthreads() { simt::syncthreads(); }

template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int laneMask, int width = 32) {
  return simt::shuffle(v, [=](int lane) { return (lane ^ laneMask) % width + lane / width * width; });
}
template <typename T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  return simt::shuffle(v, [=](int lane) {
    int base = lane / width * width, src = lane + static_cast<int>(delta);
    return src < base + width ? src : lane;
  });
}
template <typename T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  return simt::shuffle(v, [=](int lane) {
    int base = lane / width * width, src = lane - static_cast<int>(delta);
    return src >= base ? src : lane;
  });
}
template <typename T>
inline T __shfl_sync(unsigned, T v, int srcLane, int width = 32) {
  return simt::shuffle(v, [=](int lane) { return lane / width * width + srcLane % width; });
}

inline float atomicAdd(float* p, float v) { float old = *p; *p += v; return old; }
inline int atomicAdd(int* p, int v) { int old = *p; *p += v; return old; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned old = *p; *p += v; return old; }
inline void __threadfence() {}

/// CUDA's 16-byte vector types (128-bit loads and stores).
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
template <typename T>
inline T __ldg(const T* p) { return *p; }
inline float __expf(float x) { return std::exp(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

/// bf16 storage with round-to-nearest-even conversion, as cuda_bf16.h.
struct __nv_bfloat16 {
  uint16_t bits = 0;
};
inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((u >> 16) | 0x40)};  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return {static_cast<uint16_t>(u >> 16)};
}
