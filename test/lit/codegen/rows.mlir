// Row kernels (layer_norm, causal softmax, their gradients) in both languages: rows of the
// last dimension, max-subtracted softmax, two-pass layer norm shifted by the row's first
// element; on the GPU one block per row with block reductions (warp shuffles, then one
// partial per warp). layer_norm_grad sums dgamma/dbeta across rows in two levels: chunk sums
// in the scratch argument, added in chunk order by the last block.
// RUN: tessel-translate --tessel-to-cpp -split-input-file %s | FileCheck %s --check-prefix=CPP
// RUN: tessel-translate --tessel-to-cuda -split-input-file %s | FileCheck %s --check-prefix=CUDA

// CPP-LABEL: // func @rows: 2 steps
// CPP-NEXT: //   kernel [[$LN:k[0-9]+_layer_norm]](%{{[0-9]+}}, rows.arg0, rows.arg1, rows.arg2)
// CPP-NEXT: //   kernel [[$SM:k[0-9]+_softmax]](%{{[0-9]+}}, rows.arg3)
// CPP-LABEL: // tessel.layer_norm at
// CPP: extern "C" void [[$LN]](void** args) {
// CPP-NEXT: float* out = static_cast<float*>(args[0]); // out [B, T, C] = [2, 4, 8]
// CPP-NEXT: const float* inp = static_cast<const float*>(args[1]); // inp [B, T, C] = [2, 4, 8]
// CPP-NEXT: const float* gamma = static_cast<const float*>(args[2]); // gamma [C] = [8]
// CPP-NEXT: const float* beta = static_cast<const float*>(args[3]); // beta [C] = [8]
// CPP-NEXT: constexpr int64_t N = 8; // rows
// CPP: const float x0 = x[0];
// CPP: for (int64_t i = 0; i < C; ++i) sum += x[i] - x0;
// CPP: const float rstd = 1.0f / std::sqrt(ss / C + EPS);
// CPP-LABEL: // tessel.softmax at
// CPP-NEXT: // out = softmax over the last dimension T of entries j <= i (query i = row % T);
// CPP: extern "C" void [[$SM]](void** args) {
// CPP: const int64_t valid = r % L + 1;
// CPP: for (int64_t i = 0; i < valid; ++i) mx = x[i] > mx ? x[i] : mx;
// CPP: for (int64_t i = 0; i < valid; ++i) sum += tessel_exp(x[i] - mx);
// CPP: for (int64_t i = valid; i < L; ++i) y[i] = 0.0f;

// CUDA-LABEL: // func @rows: 2 steps
// CUDA-NEXT: //   kernel [[$LN:k[0-9]+_layer_norm]](%{{[0-9]+}}, rows.arg0, rows.arg1, rows.arg2) grid [8,1,1] block [64,1,1]
// CUDA-NEXT: //   kernel [[$SM:k[0-9]+_softmax]](%{{[0-9]+}}, rows.arg3) grid [8,1,1] block [64,1,1]
// CUDA-LABEL: // tessel.layer_norm at
// CUDA: extern "C" __global__ void __launch_bounds__(64, 16) [[$LN]](
// CUDA-NEXT: float* out, // out [B, T, C] = [2, 4, 8]
// CUDA-NEXT: const float* inp, // inp [B, T, C] = [2, 4, 8]
// CUDA-NEXT: const float* gamma, // gamma [C] = [8]
// CUDA-NEXT: const float* beta) { // beta [C] = [8]
// CUDA-NEXT: // launch: grid (8, 1, 1), block (64, 1, 1): one block per row (grid-stride over rows)
// CUDA: __shared__ float red[32];
// CUDA: sum = tessel_warp_sum(sum); // block sum: warps, then one partial per warp
// CUDA: ss = tessel_warp_sum(ss); // block sum: warps, then one partial per warp
// CUDA-LABEL: // tessel.softmax at
// CUDA: mx = tessel_warp_max(mx); // block max: warps, then one partial per warp
// CUDA: sum = tessel_warp_sum(sum); // block sum: warps, then one partial per warp
func.func @rows(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>, %s: tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  %n = tessel.layer_norm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %p = tessel.softmax %s causal : tensor<2x4x4xf32>
  return %n, %p : tensor<2x4x8xf32>, tensor<2x4x4xf32>
}

// -----

// CPP-LABEL: // func @row_grads: 2 steps
// CPP-NEXT: //   kernel [[$LNG:k[0-9]+_layer_norm_grad]](%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, row_grads.arg0, row_grads.arg1, row_grads.arg2)
// CPP-LABEL: // tessel.layer_norm_grad at
// CPP: extern "C" void [[$LNG]](void** args) {
// CPP-NEXT: float* dinp = static_cast<float*>(args[0]); // dinp [N, C] = [64, 32]
// CPP-NEXT: float* dgamma = static_cast<float*>(args[1]); // dgamma [C] = [32]
// CPP-NEXT: float* dbeta = static_cast<float*>(args[2]); // dbeta [C] = [32]
// CPP-NEXT: const float* inp = static_cast<const float*>(args[3]); // inp [N, C] = [64, 32]
// CPP-NEXT: const float* gamma = static_cast<const float*>(args[4]); // gamma [C] = [32]
// CPP-NEXT: const float* dout = static_cast<const float*>(args[5]); // dout [N, C] = [64, 32]
// CPP-LABEL: // tessel.softmax_grad at
// CPP: float* dinp = static_cast<float*>(args[0]); // dinp [N, C] = [4, 16]

// CUDA-LABEL: // func @row_grads: 3 steps
// CUDA-NEXT: //   kernel [[$RESET:k[0-9]+_reset_scratch]](%[[S:[0-9]+]]) grid [1,1,1] block [32,1,1]
// CUDA-NEXT: //   kernel [[$LNG:k[0-9]+_layer_norm_grad]](%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, row_grads.arg0, row_grads.arg1, row_grads.arg2, %[[S]]) grid [2,1,1] block [64,1,1]
// CUDA-NEXT: //   kernel [[$SMG:k[0-9]+_softmax_grad]](%{{[0-9]+}}, row_grads.arg3, row_grads.arg4) grid [4,1,1]
// CUDA-NOT: __device__ {{(float|double|unsigned)}}
// CUDA-LABEL: // tessel.layer_norm_grad at
// CUDA: extern "C" __global__ void __launch_bounds__(64, 16) [[$LNG]](
// CUDA-NEXT: float* dinp, // dinp [N, C] = [64, 32]
// CUDA-NEXT: float* dgamma, // dgamma [C] = [32]
// CUDA-NEXT: float* dbeta, // dbeta [C] = [32]
// CUDA-NEXT: const float* inp, // inp [N, C] = [64, 32]
// CUDA-NEXT: const float* gamma, // gamma [C] = [32]
// CUDA-NEXT: const float* dout, // dout [N, C] = [64, 32]
// CUDA-NEXT: unsigned char* scratch) { // scratch 528 bytes: counter, then chunk sums
// 528 = 16 (counter, padded) + CHUNKS 2 x 2 C floats
// CUDA: constexpr idx_t CHUNK = 32; // rows per chunk of the dgamma/dbeta sums
// CUDA-NEXT: constexpr idx_t CHUNKS = 2;
// CUDA: float* const chunkSums = reinterpret_cast<float*>(scratch + 16);
// CUDA: chunkSums[ch * 2 * C + i] = g;
// CUDA-NEXT: chunkSums[ch * 2 * C + C + i] = b;
// CUDA: if (threadIdx.x == 0) isLast = atomicAdd(done, 1u) == gridDim.x - 1;
// CUDA: for (idx_t ch = 0; ch < CHUNKS; ++ch) {
// CUDA-NEXT: g += partial[ch * 2 * C + i];
// CUDA-NEXT: b += partial[ch * 2 * C + C + i];
// CUDA: if (threadIdx.x == 0) *done = 0;
// CUDA-LABEL: // tessel.softmax_grad at
// CUDA: extern "C" __global__ void __launch_bounds__(64, 16) [[$SMG]](
// CUDA-NEXT: float* dinp,
// CUDA-NEXT: const float* out,
// CUDA-NEXT: const float* dout) {
// CUDA: dot = tessel_warp_sum(dot);
func.func @row_grads(%x: tensor<64x32xf32>, %g: tensor<32xf32>, %dy: tensor<64x32xf32>, %p: tensor<4x16xf32>, %dp: tensor<4x16xf32>) -> (tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<4x16xf32>) {
  %dx, %dg, %db = tessel.layer_norm_grad %x, %g, %dy : (tensor<64x32xf32>, tensor<32xf32>, tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>)
  %ds = tessel.softmax_grad %p, %dp : tensor<4x16xf32>
  return %dx, %dg, %db, %ds : tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<4x16xf32>
}
