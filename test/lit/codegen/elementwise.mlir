// Elementwise kernels in both languages: outputs first, llm.c shape comments in the
// dimension letters, a repeated (suffix-broadcast) operand read modulo its size, and in CUDA a
// grid-stride loop with a float4 path when every pointer is 16-byte aligned.
// RUN: tessel-translate --tessel-to-cpp -split-input-file %s | FileCheck %s --check-prefix=CPP
// RUN: tessel-translate --tessel-to-cuda -split-input-file %s | FileCheck %s --check-prefix=CUDA

// CPP-LABEL: // func @bias_gelu: 2 steps
// CPP-NEXT: //   kernel [[$ADD:k[0-9]+_add]](%[[S:[0-9]+]], bias_gelu.x, bias_gelu.b)
// CPP-NEXT: //   kernel [[$GELU:k[0-9]+_gelu]](%{{[0-9]+}}, %[[S]])
// CPP-LABEL: // tessel.add at
// CPP-NEXT: // out = a + b, elementwise, b repeated over the leading dimensions
// CPP-NEXT: extern "C" void [[$ADD]](void** args) {
// CPP-NEXT: float* out = static_cast<float*>(args[0]); // out [N, C] = [4, 8]
// CPP-NEXT: const float* a = static_cast<const float*>(args[1]); // a [N, C] = [4, 8]
// CPP-NEXT: const float* b = static_cast<const float*>(args[2]); // b [C] = [8]
// CPP: o[i] = a[r * M + i] + b[i];
// CPP-LABEL: // tessel.gelu at
// CPP: extern "C" void [[$GELU]](void** args) {
// CPP: out[i] = tessel_gelu(x);

// CUDA-LABEL: // func @bias_gelu: 2 steps
// CUDA-NEXT: //   kernel [[$ADD:k[0-9]+_add]](%{{[0-9]+}}, bias_gelu.x, bias_gelu.b) grid [1,1,1] block [32,1,1]
// CUDA-LABEL: // tessel.add at
// CUDA: extern "C" __global__ void __launch_bounds__(32, 32) [[$ADD]](
// CUDA-NEXT: float* out, // out [N, C] = [4, 8]
// CUDA-NEXT: const float* a, // a [N, C] = [4, 8]
// CUDA-NEXT: const float* b) { // b [C] = [8]
// CUDA-NEXT: // launch: grid (1, 1, 1), block (32, 1, 1): one thread per 4 elements (grid-stride)
// CUDA: if (tessel_aligned16(out) && tessel_aligned16(a) && tessel_aligned16(b)) {
// CUDA: const float4 vb4 = reinterpret_cast<const float4*>(b)[i % 2];
// CUDA: } else {
// CUDA: for (idx_t i = start; i < N; i += stride) {
// CUDA: const float vb = b[i % 8];
// CUDA-LABEL: // tessel.gelu at
// CUDA: const float y = tessel_gelu(x);
func.func @bias_gelu(%x: tensor<4x8xf32> {tessel.input = "x"}, %b: tensor<8xf32> {tessel.input = "b"}) -> tensor<4x8xf32> {
  %a = tessel.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %g = tessel.gelu %a : tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// A scaled difference and a product with a scalar; an odd size takes the scalar loop only.
// CPP-LABEL: // func @scaled: 3 steps
// CPP-LABEL: // tessel.sub at
// CPP: extern "C" void k0_sub(void** args) {
// CPP-LABEL: // tessel.scale at
// CPP: extern "C" void k1_scale(void** args) {
// CPP: 1.25f
// CPP-LABEL: // tessel.mul at
// CPP: extern "C" void k2_mul(void** args) {
// CPP: const float* b = static_cast<const float*>(args[2]); // b scalar

// CUDA-LABEL: // func @scaled: 3 steps
// CUDA-LABEL: // tessel.sub at
// CUDA: k0_sub(
// CUDA-NOT: float4
// CUDA: for (idx_t i = start; i < N; i += stride) {
// CUDA-LABEL: // tessel.mul at
// CUDA: k2_mul(
// CUDA: const float* b) { // b scalar
func.func @scaled(%x: tensor<3x5xf32>, %y: tensor<3x5xf32>, %s: tensor<f32>) -> tensor<3x5xf32> {
  %d = tessel.sub %x, %y : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %e = tessel.scale %d, 1.25 : tensor<3x5xf32>
  %p = tessel.mul %e, %s : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  return %p : tensor<3x5xf32>
}
