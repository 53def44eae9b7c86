// Layout kernels (transpose, split, concat, broadcast) and a reduction across rows, in both
// languages. A reduction with few outputs (a bias gradient) is a two-level sum on the GPU:
// its chunk sums and block counter live in a scratch temp passed as the last argument, after
// a step that resets the counter, and never in __device__ globals.
// RUN: tessel-translate --tessel-to-cpp -split-input-file %s | FileCheck %s --check-prefix=CPP
// RUN: tessel-translate --tessel-to-cuda -split-input-file %s | FileCheck %s --check-prefix=CUDA

// CPP-LABEL: // func @layout: 4 steps
// CPP-NEXT: //   kernel [[$T:k[0-9]+_transpose]](%{{[0-9]+}}, layout.arg0)
// CPP-NEXT: //   kernel [[$S:k[0-9]+_split]](%{{[0-9]+}}, %{{[0-9]+}}, layout.arg0)
// CPP-NEXT: //   kernel [[$C:k[0-9]+_concat]](%{{[0-9]+}}, layout.arg1, layout.arg2)
// CPP-NEXT: //   kernel [[$B:k[0-9]+_broadcast]](%{{[0-9]+}}, layout.arg3)
// CPP-LABEL: // tessel.transpose at
// CPP: extern "C" void [[$T]](void** args) {
// CPP-NEXT: float* out = static_cast<float*>(args[0]); // out [C, B, T] = [16, 2, 4]
// CPP-NEXT: const float* inp = static_cast<const float*>(args[1]); // inp [B, T, C] = [2, 4, 16]
// CPP-LABEL: // tessel.split at
// CPP: extern "C" void [[$S]](void** args) {
// CPP: args[0]
// CPP: args[1]
// CPP: args[2]
// CPP-LABEL: // tessel.concat at
// CPP: extern "C" void [[$C]](void** args) {
// CPP-LABEL: // tessel.broadcast at
// CPP: extern "C" void [[$B]](void** args) {

// CUDA-LABEL: // func @layout: 4 steps
// CUDA-NEXT: //   kernel [[$T:k[0-9]+_transpose]](%{{[0-9]+}}, layout.arg0) grid [1,1,1] block [32,8,1]
// CUDA-LABEL: // tessel.transpose at
// CUDA: extern "C" __global__ void __launch_bounds__(256, 4) [[$T]](
// CUDA-NEXT: float* out,
// CUDA-NEXT: const float* inp) {
// CUDA-NOT: scratch
// CUDA-LABEL: // tessel.broadcast at
// CUDA-NOT: scratch
// CUDA: }

func.func @layout(%x: tensor<2x4x16xf32>, %a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<8xf32>) -> (tensor<16x2x4xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x8xf32>, tensor<3x8xf32>) {
  %t = tessel.transpose %x [2, 0, 1] : tensor<2x4x16xf32> -> tensor<16x2x4xf32>
  %p, %q = tessel.split %x along 2 : tensor<2x4x16xf32> -> tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %j = tessel.concat %a, %b along 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %r = tessel.broadcast %c [0] : tensor<8xf32> -> tensor<3x8xf32>
  return %t, %p, %q, %j, %r : tensor<16x2x4xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x8xf32>, tensor<3x8xf32>
}

// -----

// CPP-LABEL: // func @bias_grad: 1 steps
// CPP-NEXT: //   kernel [[$R:k[0-9]+_reduce_sum]](%{{[0-9]+}}, bias_grad.arg0)
// CPP-LABEL: // tessel.reduce_sum at
// CPP-NEXT: // out = the sum of inp over dimensions [0], accumulated in double
// CPP-NEXT: extern "C" void [[$R]](void** args) {
// CPP-NEXT: float* out = static_cast<float*>(args[0]); // out [C] = [16]
// CPP-NEXT: const float* inp = static_cast<const float*>(args[1]); // inp [N, C] = [4096, 16]

// CUDA-LABEL: // func @bias_grad: 2 steps
// CUDA-NEXT: //   kernel [[$RESET:k[0-9]+_reset_scratch]](%[[$SCRATCH:[0-9]+]]) grid [1,1,1] block [32,1,1]
// CUDA-NEXT: //   kernel [[$R:k[0-9]+_reduce_sum]](%{{[0-9]+}}, bias_grad.arg0, %[[$SCRATCH]]) grid [8,1,1] block [256,1,1]
// CUDA-NOT: __device__ {{(float|double|unsigned)}}
// CUDA-LABEL: // tessel.reduce_sum at
// CUDA: // Reentrant: the chunk sums and the block counter live in `scratch`, not in globals.
// CUDA-NEXT: extern "C" __global__ void __launch_bounds__(256, 4) [[$R]](
// CUDA-NEXT: float* out, // out [C] = [16]
// CUDA-NEXT: const float* inp, // inp [N, C] = [4096, 16]
// CUDA-NEXT: unsigned char* scratch) { // scratch [[BYTES:[0-9]+]] bytes: counter, then chunk sums
// CUDA: constexpr idx_t QC = [[QC:[0-9]+]]; // chunks of the reduced positions
// CUDA: unsigned int* const done = reinterpret_cast<unsigned int*>(scratch);
// CUDA-NEXT: double* const chunkSums = reinterpret_cast<double*>(scratch + 16);
// CUDA: chunkSums[c * NOUT + o] = acc;
// CUDA: if (threadIdx.x == 0) isLast = atomicAdd(done, 1u) == gridDim.x - 1;
// CUDA: if (isLast) {
// CUDA: for (idx_t c = 0; c < QC; ++c) sum += partial[c * NOUT + o];
// CUDA: if (threadIdx.x == 0) *done = 0;
// CUDA: extern "C" __global__ void __launch_bounds__(32, 32) [[$RESET]](
// CUDA-NEXT: unsigned char* scratch) {
// CUDA: *reinterpret_cast<unsigned int*>(scratch) = 0u;
func.func @bias_grad(%d: tensor<4096x16xf32>) -> tensor<16xf32> {
  %s = tessel.reduce_sum %d [0] : tensor<4096x16xf32> -> tensor<16xf32>
  return %s : tensor<16xf32>
}
