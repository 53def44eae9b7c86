// Kernels of the Llama block's ops in both languages: rms_norm (one row per thread in C++,
// one block per row with a block reduction of the squares on the GPU), rms_norm_grad
// (dweight summed in two levels: chunk sums of 32 rows, added in chunk order; on the GPU in the
// scratch argument by the last block), silu and silu_grad as elementwise kernels, and the
// fused SwiGLU gate and residual add + rms_norm, named by what they fuse.
// RUN: tessel-translate --tessel-to-cpp -split-input-file %s | FileCheck %s --check-prefix=CPP
// RUN: tessel-translate --tessel-to-cuda -split-input-file %s | FileCheck %s --check-prefix=CUDA
// RUN: tessel-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(tessel-fuse))' \
// RUN:   | tessel-translate --tessel-to-cpp -split-input-file | FileCheck %s --check-prefix=FUSED

// CPP-LABEL: // func @norm: 4 steps
// CPP-NEXT: //   kernel [[$RN:k[0-9]+_rms_norm]](%{{[0-9]+}}, norm.arg0, norm.arg1)
// CPP-NEXT: //   kernel [[$RG:k[0-9]+_rms_norm_grad]](%{{[0-9]+}}, %{{[0-9]+}}, norm.arg0, norm.arg1, norm.arg2)
// CPP-NEXT: //   kernel [[$SI:k[0-9]+_silu]](%{{[0-9]+}}, norm.arg0)
// CPP-NEXT: //   kernel [[$SG:k[0-9]+_silu_grad]](%{{[0-9]+}}, norm.arg0, norm.arg2)
// CPP-LABEL: // tessel.rms_norm at
// CPP: extern "C" void [[$RN]](void** args) {
// CPP-NEXT: float* out = static_cast<float*>(args[0]); // out [B, T, C] = [2, 40, 8]
// CPP-NEXT: const float* inp = static_cast<const float*>(args[1]); // inp [B, T, C] = [2, 40, 8]
// CPP-NEXT: const float* weight = static_cast<const float*>(args[2]); // weight [C] = [8]
// CPP-NEXT: constexpr int64_t N = 80; // rows
// CPP: const float rstd = 1.0f / std::sqrt(ss / C + EPS);
// CPP-LABEL: // tessel.rms_norm_grad at
// CPP: extern "C" void [[$RG]](void** args) {
// CPP: constexpr int64_t CHUNKS = 3;
// CPP: dx[i] = rstd * (dy[i] * weight[i] - x[i] * rstd * m);
// CPP-LABEL: // tessel.silu at
// CPP: out[i] = tessel_silu(x);
// CPP-LABEL: // tessel.silu_grad at
// CPP: dinp[i] = tessel_silu_grad(x, dy);

// The GPU's rms_norm_grad takes a scratch (its chunk sums and block count) as its last
// argument, zeroed by a reset step before it.
// CUDA-LABEL: // func @norm: 5 steps
// CUDA-NEXT: //   kernel [[$RN:k[0-9]+_rms_norm]](%{{[0-9]+}}, norm.arg0, norm.arg1) grid [80,1,1] block [64,1,1]
// CUDA-NEXT: //   kernel {{k[0-9]+}}_reset_scratch(%[[SCRATCH:[0-9]+]]) grid
// CUDA-NEXT: //   kernel [[$RG:k[0-9]+_rms_norm_grad]](%{{[0-9]+}}, %{{[0-9]+}}, norm.arg0, norm.arg1, norm.arg2, %[[SCRATCH]]) grid [3,1,1]
// CUDA-LABEL: // tessel.rms_norm at
// CUDA: extern "C" __global__ void __launch_bounds__({{.*}}) [[$RN]](
// CUDA: __shared__ float red[32];
// CUDA: const float rstd = 1.0f / sqrtf(ss / C + EPS);
// CUDA-LABEL: // tessel.rms_norm_grad at
// CUDA: __shared__ float rowRstd[CHUNK];
// CUDA: chunkSums[ch * C + i] = g;
// CUDA-LABEL: // tessel.silu at
// CUDA: tessel_silu(

func.func @norm(%x: tensor<2x40x8xf32>, %w: tensor<8xf32>, %dy: tensor<2x40x8xf32>) -> (tensor<2x40x8xf32>, tensor<2x40x8xf32>, tensor<8xf32>, tensor<2x40x8xf32>, tensor<2x40x8xf32>) {
  %y = tessel.rms_norm %x, %w : (tensor<2x40x8xf32>, tensor<8xf32>) -> tensor<2x40x8xf32>
  %dx, %dw = tessel.rms_norm_grad %x, %w, %dy : (tensor<2x40x8xf32>, tensor<8xf32>, tensor<2x40x8xf32>) -> (tensor<2x40x8xf32>, tensor<8xf32>)
  %s = tessel.silu %x : tensor<2x40x8xf32>
  %ds = tessel.silu_grad %x, %dy : tensor<2x40x8xf32>
  return %y, %dx, %dw, %s, %ds : tensor<2x40x8xf32>, tensor<2x40x8xf32>, tensor<8xf32>, tensor<2x40x8xf32>, tensor<2x40x8xf32>
}

// -----

// FUSED-LABEL: // func @block
// FUSED-NEXT: //   kernel [[$AN:k[0-9]+_fused_add_rms_norm]](
// FUSED-NEXT: //   gemm
// FUSED-NEXT: //   gemm
// FUSED-NEXT: //   kernel [[$SW:k[0-9]+_fused_silu_mul]](
// FUSED-LABEL: // tessel.fused at {{.*}}: 8 rows of C = 8: add, rms_norm
// FUSED: ss += x[c] * x[c];
// FUSED-LABEL: // tessel.fused at {{.*}}: 8 rows of C = 16: silu, mul
// FUSED: tessel_silu(
func.func @block(%x: tensor<2x4x8xf32>, %d: tensor<2x4x8xf32>, %n: tensor<8xf32>, %w1: tensor<16x8xf32>, %w3: tensor<16x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x16xf32>) {
  %h = tessel.add %x, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %a = tessel.rms_norm %h, %n : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %g = tessel.matmul %a, %w1 transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %u = tessel.matmul %a, %w3 transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %s = tessel.silu %g : tensor<2x4x16xf32>
  %p = tessel.mul %s, %u : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %h, %p : tensor<2x4x8xf32>, tensor<2x4x16xf32>
}
