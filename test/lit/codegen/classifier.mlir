// The classifier kernels (cross_entropy, cross_entropy_grad, fused_classifier) in both
// languages: logits [B, T, V] and i32 targets [B, T] in, the loss as a scalar and dlogits out
// (outputs first). On the GPU the loss mean is a two-level sum in double when the tokens
// span several chunks: each chunk's sum goes into the scratch argument and the last block
// adds them in chunk order; with one chunk there is no scratch and no reset step.
// RUN: tessel-translate --tessel-to-cpp -split-input-file %s | FileCheck %s --check-prefix=CPP
// RUN: tessel-translate --tessel-to-cuda -split-input-file %s | FileCheck %s --check-prefix=CUDA

// CPP-LABEL: // func @loss: 3 steps
// CPP-NEXT: //   kernel [[$CE:k[0-9]+_cross_entropy]](%{{[0-9]+}}, loss.arg0, loss.arg1)
// CPP-NEXT: //   kernel [[$CEG:k[0-9]+_cross_entropy_grad]](%{{[0-9]+}}, loss.arg0, loss.arg1, loss.arg2)
// CPP-NEXT: //   kernel [[$FC:k[0-9]+_fused_classifier]](%{{[0-9]+}}, %{{[0-9]+}}, loss.arg0, loss.arg1, loss.arg2)
// CPP-LABEL: // tessel.cross_entropy at
// CPP: extern "C" void [[$CE]](void** args) {
// CPP-NEXT: float* loss = static_cast<float*>(args[0]); // loss scalar
// CPP-NEXT: const float* logits = static_cast<const float*>(args[1]); // logits [B, T, V] = [4, 16, 256]
// CPP-NEXT: const int32_t* targets = static_cast<const int32_t*>(args[2]); // targets [B, T] = [4, 16]
// CPP-NEXT: constexpr int64_t N = 64; // tokens
// CPP-NEXT: constexpr int64_t V = 256;
// CPP-LABEL: // tessel.cross_entropy_grad at
// CPP: extern "C" void [[$CEG]](void** args) {
// CPP-NEXT: float* dlogits = static_cast<float*>(args[0]); // dlogits [B, T, V] = [4, 16, 256]
// CPP-LABEL: // tessel.fused_classifier at
// CPP: extern "C" void [[$FC]](void** args) {
// CPP-NEXT: float* loss = static_cast<float*>(args[0]); // loss scalar
// CPP-NEXT: float* dlogits = static_cast<float*>(args[1]); // dlogits [B, T, V] = [4, 16, 256]
// CPP-NEXT: const float* logits = static_cast<const float*>(args[2]); // logits [B, T, V] = [4, 16, 256]
// CPP-NEXT: const int32_t* targets = static_cast<const int32_t*>(args[3]); // targets [B, T] = [4, 16]
// CPP-NEXT: const float* dloss = static_cast<const float*>(args[4]); // dloss scalar

// One scratch for the function: reset once, before the first two-level sum; each leaves its
// counter at 0 for the next.
// CUDA-LABEL: // func @loss: 4 steps
// CUDA-NEXT: //   kernel [[$RESET:k[0-9]+_reset_scratch]](%[[S:[0-9]+]]) grid [1,1,1] block [32,1,1]
// CUDA-NEXT: //   kernel [[$CE:k[0-9]+_cross_entropy]](%{{[0-9]+}}, loss.arg0, loss.arg1, %[[S]]) grid [8,1,1] block [256,1,1]
// CUDA-NEXT: //   kernel [[$CEG:k[0-9]+_cross_entropy_grad]](%{{[0-9]+}}, loss.arg0, loss.arg1, loss.arg2) grid [64,1,1]
// CUDA-NEXT: //   kernel [[$FC:k[0-9]+_fused_classifier]](%{{[0-9]+}}, %{{[0-9]+}}, loss.arg0, loss.arg1, loss.arg2, %[[S]]) grid [64,1,1]
// CUDA-LABEL: // tessel.cross_entropy at
// CUDA: extern "C" __global__ void __launch_bounds__(256, 4) [[$CE]](
// CUDA-NEXT: float* loss, // loss scalar
// CUDA-NEXT: const float* logits, // logits [B, T, V] = [4, 16, 256]
// CUDA-NEXT: const int32_t* targets, // targets [B, T] = [4, 16]
// CUDA-NEXT: unsigned char* scratch) { // scratch 80 bytes: counter, then chunk sums
// CUDA: constexpr idx_t CHUNKS = 8; // chunks of NWARPS tokens
// CUDA: double* const chunkSums = reinterpret_cast<double*>(scratch + 16);
// CUDA: mx = tessel_warp_max(mx);
// CUDA: total = tessel_warp_sum_d(total);
// CUDA: if (threadIdx.x == 0) chunkSums[ch] = total;
// CUDA: if (isLast) {
// CUDA: for (idx_t ch = 0; ch < CHUNKS; ++ch) total += partial[ch];
// CUDA-NEXT: loss[0] = static_cast<float>(total / N);
// CUDA-LABEL: // tessel.cross_entropy_grad at
// CUDA-NOT: scratch
// CUDA: dx[i] = i == t ? factor * (tessel_exp(x[i] - mx) / sum - 1.0f)
// CUDA-LABEL: // tessel.fused_classifier at
// CUDA: extern "C" __global__ void __launch_bounds__(64, 16) [[$FC]](
// CUDA-NEXT: float* loss, // loss scalar
// CUDA-NEXT: float* dlogits, // dlogits [B, T, V] = [4, 16, 256]
// CUDA-NEXT: const float* logits,
// CUDA-NEXT: const int32_t* targets,
// CUDA-NEXT: const float* dloss,
// CUDA-NEXT: unsigned char* scratch) {
func.func @loss(%l: tensor<4x16x256xf32>, %t: tensor<4x16xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<4x16x256xf32>, tensor<f32>, tensor<4x16x256xf32>) {
  %ce = tessel.cross_entropy %l, %t : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  %g = tessel.cross_entropy_grad %l, %t, %dl : (tensor<4x16x256xf32>, tensor<4x16xi32>, tensor<f32>) -> tensor<4x16x256xf32>
  %loss, %d = tessel.fused_classifier %l, %t, %dl : (tensor<4x16x256xf32>, tensor<4x16xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x16x256xf32>)
  return %ce, %g, %loss, %d : tensor<f32>, tensor<4x16x256xf32>, tensor<f32>, tensor<4x16x256xf32>
}

// -----

// Two tokens: one chunk, so thread 0 stores the mean itself; no scratch.
// CUDA-LABEL: // func @few_tokens: 1 steps
// CUDA-NEXT: //   kernel [[$CE1:k[0-9]+_cross_entropy]](%{{[0-9]+}}, few_tokens.arg0, few_tokens.arg1) grid [1,1,1] block [64,1,1]
// CUDA-LABEL: // tessel.cross_entropy at
// CUDA: extern "C" __global__ void __launch_bounds__(64, 16) [[$CE1]](
// CUDA-NEXT: float* loss,
// CUDA-NEXT: const float* logits,
// CUDA-NEXT: const int32_t* targets) {
// CUDA-NOT: scratch
// CUDA: if (threadIdx.x == 0) loss[0] = static_cast<float>(total / N);
func.func @few_tokens(%l: tensor<1x2x16xf32>, %t: tensor<1x2xi32>) -> tensor<f32> {
  %ce = tessel.cross_entropy %l, %t : (tensor<1x2x16xf32>, tensor<1x2xi32>) -> tensor<f32>
  return %ce : tensor<f32>
}
