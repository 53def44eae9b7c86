// The SIMT harness runs CUDA-style kernels with real barriers and warp exchanges, and it
// exposes the classic bug of a block reduction without __syncthreads.
#include "test/simt/Simt.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

namespace {

// Tree reduction in shared memory: out[block] = sum of in[block * 256 .. +256].
__global__ void blockSum(float* out, const float* in, bool withBarriers) {
  __shared__ float buf[256];
  unsigned t = threadIdx.x;
  buf[t] = in[blockIdx.x * blockDim.x + t];
  if (withBarriers) __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) buf[t] += buf[t + stride];
    if (withBarriers) __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = buf[0];
}

// Warp-shuffle reduction: every lane ends with the warp's sum.
__global__ void warpSum(float* out, const float* in) {
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

std::vector<float> randomInput(size_t n) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

double sumOf(const std::vector<float>& v, size_t from, size_t n) {
  return std::accumulate(v.begin() + from, v.begin() + from + n, 0.0);
}

TEST(Simt, BlockReductionWithBarriersIsCorrect) {
  std::vector<float> in = randomInput(3 * 256), out(3);
  simt::launch(dim3(3), dim3(256), [&] { blockSum(out.data(), in.data(), true); });
  // float sums of 256 terms of size <= 1 in a tree: error <= 8 levels * 2^-24 * 256.
  for (int b = 0; b < 3; ++b) EXPECT_NEAR(out[b], sumOf(in, b * 256, 256), 1e-3);
}

TEST(Simt, MissingSyncthreadsIsCaught) {
  // Without barriers thread 0 runs the whole tree before the others write their inputs, so
  // the result is wrong: the planted bug a test of generated kernels must detect.
  std::vector<float> in = randomInput(256), out(1);
  simt::launch(dim3(1), dim3(256), [&] { blockSum(out.data(), in.data(), false); });
  EXPECT_GT(std::abs(out[0] - sumOf(in, 0, 256)), 1e-2);
}

TEST(Simt, WarpShuffleReduction) {
  std::vector<float> in = randomInput(2 * 64), out(2 * 64);
  simt::launch(dim3(2), dim3(64), [&] { warpSum(out.data(), in.data()); });
  for (size_t w = 0; w < 4; ++w)
    for (size_t lane = 0; lane < 32; ++lane)
      EXPECT_NEAR(out[w * 32 + lane], sumOf(in, w * 32, 32), 1e-5);
}

TEST(Simt, ShuffleUpDownAndBroadcast) {
  std::vector<int> down(32), up(32), bcast(32);
  simt::launch(dim3(1), dim3(32), [&] {
    int lane = static_cast<int>(threadIdx.x);
    down[lane] = __shfl_down_sync(0xffffffffu, lane * 10, 3);
    up[lane] = __shfl_up_sync(0xffffffffu, lane * 10, 2);
    bcast[lane] = __shfl_sync(0xffffffffu, lane * 10, 5);
  });
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(down[lane], (lane + 3 < 32 ? lane + 3 : lane) * 10);
    EXPECT_EQ(up[lane], (lane >= 2 ? lane - 2 : lane) * 10);
    EXPECT_EQ(bcast[lane], 50);
  }
}

TEST(Simt, DivergentBarrierIsADeadlock) {
  EXPECT_THROW(simt::launch(dim3(1), dim3(64),
                            [&] {
                              // Half of warp 0 waits at the block barrier, the other half
                              // at a full-warp shuffle: neither can ever complete.
                              if (threadIdx.x < 16) __syncthreads();
                              else __shfl_xor_sync(0xffffffffu, 1.0f, 1);
                            }),
               std::runtime_error);
}

TEST(Simt, MultiDimensionalIndices) {
  std::vector<int> seen(2 * 3 * 4 * 5, 0);
  simt::launch(dim3(2, 3), dim3(4, 5), [&] {
    unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
    unsigned thread = threadIdx.y * blockDim.x + threadIdx.x;
    ++seen[block * 20 + thread];
  });
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(Simt, Bfloat16RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1.0).
  EXPECT_EQ(__bfloat162float(__float2bfloat16(1.0f + 0x1p-8f)), 1.0f);
  // 1 + 3 * 2^-8 lies between 1 + 2^-7 and 1 + 2^-6: ties to even, i.e. 1 + 2^-6.
  EXPECT_EQ(__bfloat162float(__float2bfloat16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_EQ(__bfloat162float(__float2bfloat16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(__bfloat162float(__float2bfloat16(NAN))));
}

}  // namespace
