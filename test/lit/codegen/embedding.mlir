// Embedding and its gradient in both languages: the table and the i32 indices as arguments
// with their letters ([V, C], [B, T]), out-of-range indices as NaN rows (forward) or skipped
// (gradient), and a deterministic gradient without atomics: each thread owns vocabulary rows
// and scans the indices in order.
// RUN: tessel-translate --tessel-to-cpp %s | FileCheck %s --check-prefix=CPP
// RUN: tessel-translate --tessel-to-cuda %s | FileCheck %s --check-prefix=CUDA

// CPP-LABEL: // func @embed: 2 steps
// CPP-NEXT: //   kernel [[$E:k[0-9]+_embedding]](%[[OUT:[0-9]+]], embed.arg0, embed.arg1)
// CPP-NEXT: //   kernel [[$G:k[0-9]+_embedding_grad]](%{{[0-9]+}}, embed.arg1, embed.arg2)
// CPP-LABEL: // tessel.embedding at
// CPP-NEXT: // out[n, :] = table[indices[n], :]; an index outside [0, V) gives a NaN row
// CPP-NEXT: extern "C" void [[$E]](void** args) {
// CPP-NEXT: float* out = static_cast<float*>(args[0]); // out [B, T, C] = [4, 8, 32]
// CPP-NEXT: const float* table = static_cast<const float*>(args[1]); // table [V, C] = [256, 32]
// CPP-NEXT: const int32_t* indices = static_cast<const int32_t*>(args[2]); // indices [B, T] = [4, 8]
// CPP-LABEL: // tessel.embedding_grad at
// CPP: extern "C" void [[$G]](void** args) {
// CPP-NEXT: float* dtable = static_cast<float*>(args[0]); // dtable [V, C] = [256, 32]
// CPP: for (int64_t n = 0; n < N; ++n) {
// CPP: if (v < v0 || v >= v1) continue;

// CUDA-LABEL: // func @embed: 2 steps
// CUDA-NEXT: //   kernel [[$E:k[0-9]+_embedding]](%{{[0-9]+}}, embed.arg0, embed.arg1) grid [1,1,1] block [256,1,1]
// CUDA-NEXT: //   kernel [[$G:k[0-9]+_embedding_grad]](%{{[0-9]+}}, embed.arg1, embed.arg2) grid [[GRID:\[[0-9]+,1,1\]]] block [256,1,1]
// CUDA-LABEL: // tessel.embedding at
// CUDA: extern "C" __global__ void __launch_bounds__(256, 4) [[$E]](
// CUDA-NEXT: float* out, // out [B, T, C] = [4, 8, 32]
// CUDA-NEXT: const float* table, // table [V, C] = [256, 32]
// CUDA-NEXT: const int32_t* indices) { // indices [B, T] = [4, 8]
// CUDA: : make_float4(NAN, NAN, NAN, NAN);
// CUDA: out[j] = v >= 0 && v < V ? table[v * C + j % C] : NAN;
// CUDA-LABEL: // tessel.embedding_grad at
// CUDA: (no atomics)
// CUDA: extern "C" __global__ void __launch_bounds__(256, 4) [[$G]](
// CUDA-NEXT: float* dtable, // dtable [V, C] = [256, 32]
// CUDA-NEXT: const int32_t* indices, // indices [B, T] = [4, 8]
// CUDA-NEXT: const float* dout) { // dout [B, T, C] = [4, 8, 32]
// CUDA-NOT: atomic
// CUDA: for (idx_t n = 0; n < N; ++n) {
// CUDA-NEXT: const idx_t v = indices[n];
// CUDA-NEXT: if (v >= v0 && v < v1) dtable[v * C + i] += dout[n * C + i];
func.func @embed(%wte: tensor<256x32xf32>, %tok: tensor<4x8xi32>, %d: tensor<4x8x32xf32>) -> (tensor<4x8x32xf32>, tensor<256x32xf32>) {
  %e = tessel.embedding %wte, %tok : (tensor<256x32xf32>, tensor<4x8xi32>) -> tensor<4x8x32xf32>
  %g = tessel.embedding_grad %tok, %d : (tensor<4x8xi32>, tensor<4x8x32xf32>) -> tensor<256x32xf32>
  return %e, %g : tensor<4x8x32xf32>, tensor<256x32xf32>
}
