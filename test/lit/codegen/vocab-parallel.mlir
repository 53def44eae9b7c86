// One shard's vocab-parallel cross-entropy and embedding, forward and backward, in both
// languages: each op is a kernel step of its own (none is row-local, so none is fused), the
// shard's first entry is read from the i32 `offset` argument at run time, the whole
// vocabulary is a constant (ids outside it give NaN, other shards' ids a zero addend), the
// row statistics are block reductions on the GPU, and the scatter has no atomics.
// RUN: tessel-translate --tessel-to-cpp %s | FileCheck %s --check-prefix=CPP
// RUN: tessel-translate --tessel-to-cuda %s | FileCheck %s --check-prefix=CUDA

// CPP-LABEL: // func @loss: 8 steps
// CPP-NEXT: //   kernel [[$M:k[0-9]+_row_max]](%[[M:[0-9]+]], loss.arg0)
// CPP-NEXT: //   kernel [[$S:k[0-9]+_sum_exp]](%[[S:[0-9]+]], loss.arg0, %[[M]])
// CPP-NEXT: //   kernel [[$T:k[0-9]+_target_logit]](%[[T:[0-9]+]], loss.arg0, loss.arg1, loss.arg2)
// CPP-NEXT: //   kernel {{k[0-9]+}}_cross_entropy_from_stats(%{{[0-9]+}}, %[[M]], %[[S]], %[[T]])
// CPP-NEXT: //   kernel {{k[0-9]+}}_cross_entropy_from_stats_grad(%[[DS:[0-9]+]], %[[DT:[0-9]+]], %[[S]], loss.arg3)
// CPP-NEXT: //   kernel {{k[0-9]+}}_sum_exp_grad(%{{[0-9]+}}, loss.arg0, %[[M]], %[[DS]])
// CPP-NEXT: //   kernel {{k[0-9]+}}_target_logit_grad(%{{[0-9]+}}, loss.arg1, loss.arg2, %[[DT]])
// CPP-NEXT: //   kernel {{k[0-9]+}}_add
// CPP-NEXT: // func @embed: 2 steps
// CPP-NEXT: //   kernel {{k[0-9]+}}_embedding_shard(%{{[0-9]+}}, embed.arg0, embed.arg1, embed.arg2)
// CPP-NEXT: //   kernel {{k[0-9]+}}_embedding_shard_grad(%{{[0-9]+}}, embed.arg1, embed.arg2, embed.arg3)
// CPP-LABEL: // tessel.target_logit at
// CPP: const int32_t* offset = static_cast<const int32_t*>(args[3]); // offset scalar
// CPP-NEXT: constexpr int64_t VOCAB = 256; // the whole vocabulary
// CPP: constexpr int64_t V = 128; // the shard's vocabulary entries
// CPP-NEXT: const int64_t first = offset[0];
// CPP: out[n] = t < 0 || t >= VOCAB ? NAN
// CPP-NEXT: : j >= 0 && j < V ? static_cast<float>(logits[n * V + j])
// CPP-NEXT: : 0.0f; // another shard holds the target
// CPP-LABEL: // tessel.cross_entropy_from_stats at
// CPP: rowLoss[n] = (row_max[n] - target_logit[n]) + std::log(sum_exp[n]);
// CPP: double total = 0.0;

// CUDA-LABEL: // func @loss: 8 steps
// CUDA-NEXT: //   kernel {{k[0-9]+}}_row_max(%{{[0-9]+}}, loss.arg0) grid [32,1,1] block [64,1,1]
// CUDA: // func @embed: 2 steps
// CUDA-LABEL: // tessel.row_max at
// CUDA: mx = tessel_warp_max(mx); // block max
// CUDA: __syncthreads();
// CUDA: if (threadIdx.x == 0) out[r] = mx;
// CUDA-LABEL: // tessel.target_logit at
// CUDA: const int32_t t = targets[j], k = t - offset[0];
// CUDA-LABEL: // tessel.cross_entropy_from_stats at
// CUDA: total += static_cast<double>((row_max[n] - target_logit[n]) + logf(sum_exp[n]));
// CUDA-LABEL: // tessel.target_logit_grad at
// CUDA: dlogits[j] = j % V == targets[r] - offset[0] ? dout[r] : 0.0f;
func.func @loss(%z: tensor<4x8x128xf32>, %t: tensor<4x8xi32>, %off: tensor<i32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<4x8x128xf32>) {
  %m = tessel.row_max %z : tensor<4x8x128xf32> -> tensor<4x8xf32>
  %s = tessel.sum_exp %z, %m : (tensor<4x8x128xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %zt = tessel.target_logit %z, %t, %off vocab 256 : (tensor<4x8x128xf32>, tensor<4x8xi32>, tensor<i32>) -> tensor<4x8xf32>
  %l = tessel.cross_entropy_from_stats %m, %s, %zt : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  %g:2 = tessel.cross_entropy_from_stats_grad %s, %dl : (tensor<4x8xf32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %d1 = tessel.sum_exp_grad %z, %m, %g#0 : (tensor<4x8x128xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8x128xf32>
  %d2 = tessel.target_logit_grad %t, %off, %g#1 : (tensor<4x8xi32>, tensor<i32>, tensor<4x8xf32>) -> tensor<4x8x128xf32>
  %d = tessel.add %d1, %d2 : (tensor<4x8x128xf32>, tensor<4x8x128xf32>) -> tensor<4x8x128xf32>
  return %l, %d : tensor<f32>, tensor<4x8x128xf32>
}

// CPP-LABEL: // tessel.embedding_shard at
// CPP: const int64_t id = indices[n], row = id - first;
// CPP: if (id < 0 || id >= VOCAB) {
// CPP: } else if (row >= 0 && row < V) {
// CPP-LABEL: // tessel.embedding_shard_grad at
// CPP: const int64_t v = indices[n] - static_cast<int64_t>(offset[0]);
// CPP-NEXT: if (v < v0 || v >= v1) continue;

// CUDA-LABEL: // tessel.embedding_shard_grad at
// CUDA: extern "C" __global__ void {{.*}}_embedding_shard_grad(
// CUDA-NOT: atomic
// CUDA: const idx_t v = (indices[n] - offset[0]);
// CUDA-NEXT: if (v >= v0 && v < v1) dtable[v * C + i] += dout[n * C + i];
func.func @embed(%w: tensor<128x32xf32>, %ids: tensor<4x8xi32>, %off: tensor<i32>, %d: tensor<4x8x32xf32>) -> (tensor<4x8x32xf32>, tensor<128x32xf32>) {
  %e = tessel.embedding_shard %w, %ids, %off vocab 256 : (tensor<128x32xf32>, tensor<4x8xi32>, tensor<i32>) -> tensor<4x8x32xf32>
  %g = tessel.embedding_shard_grad %ids, %off, %d : (tensor<4x8xi32>, tensor<i32>, tensor<4x8x32xf32>) -> tensor<128x32xf32>
  return %e, %g : tensor<4x8x32xf32>, tensor<128x32xf32>
}
