// Fused regions (tessel-fuse) in both languages. A fused kernel is named by what it fuses,
// k<n>_fused_<op>_<op>..., each op once in body order; past four op names the count of the
// others ends the name, so symbols stay short valid C identifiers. Identical regions (the
// same residual add + layer norm in two blocks) share one kernel. Arguments carry shape
// comments in the dimension letters, as unfused kernels do.
// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tessel-fuse))' \
// RUN:   | tessel-translate --tessel-to-cpp | FileCheck %s --check-prefixes=STEPS,CPP
// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tessel-fuse))' \
// RUN:   | tessel-translate --tessel-to-cuda | FileCheck %s --check-prefixes=STEPS,CUDA

// STEPS-LABEL: // func @blocks: 5 steps
// STEPS-NEXT: //   kernel [[$LN:k[0-9]+_fused_add_layer_norm]](%{{[0-9]+}}, blocks.arg0, blocks.arg1, blocks.arg3, blocks.arg4)
// STEPS-NEXT: //   gemm
// STEPS-NEXT: //   kernel [[$LN]](%{{[0-9]+}}, %{{[0-9]+}}, blocks.arg2, blocks.arg3, blocks.arg4)
// STEPS-NEXT: //   gemm
// STEPS-NEXT: //   kernel [[$EW:k[0-9]+_fused_add_gelu_mul_scale_and_2_more]](%{{[0-9]+}}, %{{[0-9]+}}, blocks.arg4, blocks.arg0, blocks.arg1)

// CPP-LABEL: // tessel.fused at {{.*}}: 8 rows of C = 8: add, layer_norm
// CPP-NEXT: extern "C" void [[$LN]](void** args) {
// CPP-NEXT: const int64_t R = 8, C = 8;
// CPP-NEXT: float* out0 = (float*)args[0]; // out0 [B, T, C] = [2, 4, 8]
// CPP-NEXT: const float* in0 = (const float*)args[1]; // in0 [B, T, C] = [2, 4, 8]
// CPP-NEXT: const float* in1 = (const float*)args[2]; // in1 [B, T, C] = [2, 4, 8]
// CPP-NEXT: const float* in2 = (const float*)args[3]; // in2 [C] = [8]
// CPP-NEXT: const float* in3 = (const float*)args[4]; // in3 [C] = [8]
// CPP: for (int64_t r = 0; r < R; ++r) {
// CPP: // tessel.add at
// CPP: // tessel.layer_norm at
// CPP-NOT: extern "C" void [[$LN]]
// CPP-LABEL: // tessel.fused at {{.*}}: 8 rows of C = 8: add, gelu, mul, scale, sub, relu
// CPP-NEXT: extern "C" void [[$EW]](void** args) {
// CPP: const float* in1 = (const float*)args[2]; // in1 [C] = [8]

// CUDA-LABEL: // tessel.fused at
// CUDA-NEXT: // 8 rows of C = 8: add, layer_norm
// CUDA-NEXT: // one block per row: a pass over the row per reduction, then the results
// CUDA-NEXT: extern "C" __global__ void __launch_bounds__(64, 16) [[$LN]](
// CUDA-NEXT: float* out0, // out0 [B, T, C] = [2, 4, 8]
// CUDA-NEXT: const float* in0, // in0 [B, T, C] = [2, 4, 8]
// CUDA-NEXT: const float* in1, // in1 [B, T, C] = [2, 4, 8]
// CUDA-NEXT: const float* in2, // in2 [C] = [8]
// CUDA-NEXT: const float* in3) { // in3 [C] = [8]
// CUDA: mean{{[0-9]+}} = tessel_warp_sum(mean{{[0-9]+}}); // block sum
// CUDA: var{{[0-9]+}} = tessel_warp_sum(var{{[0-9]+}}); // block sum
// CUDA-LABEL: // tessel.fused at
// CUDA-NEXT: // 8 rows of C = 8: add, gelu, mul, scale, sub, relu
// CUDA-NEXT: // elementwise over rows x C, the members in body order per element
// CUDA-NEXT: extern "C" __global__ void __launch_bounds__(32, 32) [[$EW]](
func.func @blocks(%x: tensor<2x4x8xf32>, %y: tensor<2x4x8xf32>, %z: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<2x4x8xf32> {
  %s = tessel.add %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = tessel.layer_norm %s, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h = tessel.matmul %n, %w transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %s2 = tessel.add %h, %z : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n2 = tessel.layer_norm %s2, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h2 = tessel.matmul %n2, %w transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %a1 = tessel.add %h2, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %a2 = tessel.gelu %a1 : tensor<2x4x8xf32>
  %a3 = tessel.mul %a2, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %a4 = tessel.scale %a3, 0.5 : tensor<2x4x8xf32>
  %a5 = tessel.sub %a4, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %a6 = tessel.relu %a5 : tensor<2x4x8xf32>
  return %a6 : tensor<2x4x8xf32>
}
