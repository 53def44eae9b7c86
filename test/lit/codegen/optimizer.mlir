// The optimizer step in both languages: global_norm (a two-level sum in double on the GPU,
// its chunk sums in the scratch argument), clip_coefficient, AdamW and SGD as elementwise
// kernels in torch's order of operations, with the new parameter and state first, and the
// assignments as copies into the persistent parameter and state buffers after their last
// reader.
// RUN: tessel-translate --tessel-to-cpp -split-input-file %s | FileCheck %s --check-prefix=CPP
// RUN: tessel-translate --tessel-to-cuda -split-input-file %s | FileCheck %s --check-prefix=CUDA

// CPP-LABEL: // func @train_step: 10 steps
// CPP-NEXT: //   kernel [[$NORM:k[0-9]+_global_norm]](%[[N:[0-9]+]], train_step.arg0, train_step.arg1)
// CPP-NEXT: //   kernel {{k[0-9]+}}_clip_coefficient(%{{[0-9]+}}, %[[N]], train_step.arg4)
// CPP-COUNT-4: //   kernel {{k[0-9]+}}_constant(
// CPP-NEXT: //   kernel [[$ADAMW:k[0-9]+_adamw]](%[[P:[0-9]+]], %[[M:[0-9]+]], %[[V:[0-9]+]], w, train_step.arg0, w:exp_avg, w:exp_avg_sq, train_step.lr, %{{.*}}, train_step.arg3)
// CPP-NEXT: //   copy w = %[[P]]
// CPP-NEXT: //   copy w:exp_avg = %[[M]]
// CPP-NEXT: //   copy w:exp_avg_sq = %[[V]]
// CPP-LABEL: // tessel.global_norm at
// CPP: extern "C" void [[$NORM]](void** args) {
// CPP-NEXT: float* norm = static_cast<float*>(args[0]); // norm scalar
// CPP-LABEL: // tessel.adamw at
// CPP-NEXT: // torch.optim.AdamW, elementwise, t = step:
// CPP-NEXT: // p = p * (1 - lr * weight_decay); m = beta1 m + (1 - beta1) g;
// CPP: extern "C" void [[$ADAMW]](void** args) {
// CPP-NEXT: float* new_param = static_cast<float*>(args[0]); // new_param [N, C] = [64, 32]
// CPP-NEXT: float* new_exp_avg = static_cast<float*>(args[1]); // new_exp_avg [N, C] = [64, 32]
// CPP-NEXT: float* new_exp_avg_sq = static_cast<float*>(args[2]); // new_exp_avg_sq [N, C] = [64, 32]
// CPP-NEXT: const float* param = static_cast<const float*>(args[3]); // param [N, C] = [64, 32]
// CPP: const float* step = static_cast<const float*>(args[12]); // step scalar

// CUDA-LABEL: // func @train_step: 11 steps
// CUDA-NEXT: //   kernel [[$RESET:k[0-9]+_reset_scratch]](%[[S:[0-9]+]]) grid [1,1,1] block [32,1,1]
// CUDA-NEXT: //   kernel [[$NORM:k[0-9]+_global_norm]](%{{[0-9]+}}, train_step.arg0, train_step.arg1, %[[S]]) grid [2,1,1] block [256,1,1]
// CUDA-LABEL: // tessel.global_norm at
// CUDA: extern "C" __global__ void __launch_bounds__(256, 4) [[$NORM]](
// CUDA-NEXT: float* norm, // norm scalar
// CUDA-NEXT: const float* grads0, // grads0 [N, C] = [64, 32]
// CUDA-NEXT: const float* grads1, // grads1 [C] = [32]
// CUDA-NEXT: unsigned char* scratch) { // scratch 32 bytes: counter, then chunk sums
// CUDA: constexpr idx_t CHUNKS = 2; // chunks of all inputs
// CUDA: double* const chunkSums = reinterpret_cast<double*>(scratch + 16);
// CUDA: if (threadIdx.x == 0) chunkSums[0 + ch] = acc;
// CUDA: if (threadIdx.x == 0) chunkSums[1 + ch] = acc;
// CUDA: for (idx_t ch = 0; ch < CHUNKS; ++ch) total += partial[ch];
// CUDA-NEXT: norm[0] = static_cast<float>(sqrt(total));
// CUDA-LABEL: // tessel.adamw at
// CUDA: extern "C" __global__ void __launch_bounds__(256, 4) {{k[0-9]+_adamw}}(
// CUDA-NEXT: float* new_param, // new_param [N, C] = [64, 32]
// CUDA-NOT: scratch
// CUDA: const float* step) { // step scalar
func.func @train_step(%g: tensor<64x32xf32>, %gb: tensor<32xf32>, %lr: tensor<f32> {tessel.input = "lr"}, %t: tensor<f32>, %mx: tensor<f32>) -> tensor<f32> {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<64x32xf32>
  %m = tessel.param "w:exp_avg" state init zeros : tensor<64x32xf32>
  %v = tessel.param "w:exp_avg_sq" state init zeros : tensor<64x32xf32>
  %n = tessel.global_norm %g, %gb : tensor<64x32xf32>, tensor<32xf32>
  %c = tessel.clip_coefficient %n, %mx : tensor<f32>
  %b1 = tessel.constant 0.9 : tensor<f32>
  %b2 = tessel.constant 0.999 : tensor<f32>
  %eps = tessel.constant 1.0e-8 : tensor<f32>
  %wd = tessel.constant 0.1 : tensor<f32>
  %w1, %m1, %v1 = tessel.adamw %w, %g, %m, %v, %lr, %b1, %b2, %eps, %wd, %t decay : tensor<64x32xf32>
  tessel.assign "w", %w1 : tensor<64x32xf32>
  tessel.assign "w:exp_avg", %m1 : tensor<64x32xf32>
  tessel.assign "w:exp_avg_sq", %v1 : tensor<64x32xf32>
  return %n : tensor<f32>
}

// -----

// CPP-LABEL: // func @sgd: 3 steps
// CPP-NEXT: //   kernel [[$SGD:k[0-9]+_sgd]](%[[P:[0-9]+]], %[[B:[0-9]+]], b, sgd.arg0, b:momentum_buffer, sgd.arg1, sgd.arg2, sgd.arg3, sgd.arg4)
// CPP-NEXT: //   copy b = %[[P]]
// CPP-NEXT: //   copy b:momentum_buffer = %[[B]]
// CPP-LABEL: // tessel.sgd at
// CPP-NEXT: // torch.optim.SGD (dampening 0, not Nesterov), elementwise:
// CPP: extern "C" void [[$SGD]](void** args) {
// CPP-NEXT: float* new_param = static_cast<float*>(args[0]); // new_param [C] = [32]
// CPP-NEXT: float* new_momentum_buffer = static_cast<float*>(args[1]); // new_momentum_buffer [C] = [32]

// CUDA-LABEL: // func @sgd: 3 steps
// CUDA-NEXT: //   kernel {{k[0-9]+_sgd}}({{.*}}) grid [1,1,1] block [32,1,1]
// CUDA-LABEL: // tessel.sgd at
// CUDA-NOT: scratch
// CUDA: const float* step) { // step scalar
func.func @sgd(%g: tensor<32xf32>, %lr: tensor<f32>, %mom: tensor<f32>, %wd: tensor<f32>, %t: tensor<f32>) {
  %w = tessel.param "b" init zeros : tensor<32xf32>
  %buf = tessel.param "b:momentum_buffer" state init zeros : tensor<32xf32>
  %w1, %buf1 = tessel.sgd %w, %g, %buf, %lr, %mom, %wd, %t : tensor<32xf32>
  tessel.assign "b", %w1 : tensor<32xf32>
  tessel.assign "b:momentum_buffer", %buf1 : tensor<32xf32>
  return
}
