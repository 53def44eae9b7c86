// The CUDA kernels of silu, silu_grad, rms_norm and rms_norm_grad, and fused regions with
// them (the SwiGLU gate silu(gate) * up, a residual add feeding rms_norm, silu_grad in a
// backward region, bf16 rows), through NVRTC (sm_90, no spills) and through the SIMT harness
// against the C++ kernels, at awkward sizes: 1, 7 and 33 channels, rows of 8192 (longer than
// a block), several chunks of rms_norm_grad rows, pointers off 16-byte alignment, one block.
// Tolerances are CudaKernelsTestUtil.h's per kernel kind (elementwise: bitwise equal; rows:
// C u relative, the summation order being the only difference).
#include "test/unit/CppEmitterNormCases.h"
#include "test/unit/CudaKernelsTestUtil.h"

#include <set>

namespace tessel::cudatest {
namespace {

using cpptest::Shape;

const char* kFusedNorm = R"mlir(
func.func @fused_swiglu(%a0: tensor<7x33xf32>, %a1: tensor<7x33xf32>) -> tensor<7x33xf32> {
  %r = tessel.fused (%a0, %a1) : (tensor<7x33xf32>, tensor<7x33xf32>) -> tensor<7x33xf32> {
  ^bb0(%g: tensor<7x33xf32>, %u: tensor<7x33xf32>):
    %s = tessel.silu %g : tensor<7x33xf32>
    %p = tessel.mul %s, %u : (tensor<7x33xf32>, tensor<7x33xf32>) -> tensor<7x33xf32>
    tessel.yield %p : tensor<7x33xf32>
  }
  return %r : tensor<7x33xf32>
}
func.func @fused_swiglu_grad(%a0: tensor<4x96xf32>, %a1: tensor<4x96xf32>, %a2: tensor<4x96xf32>) -> (tensor<4x96xf32>, tensor<4x96xf32>) {
  %r:2 = tessel.fused (%a0, %a1, %a2) : (tensor<4x96xf32>, tensor<4x96xf32>, tensor<4x96xf32>) -> (tensor<4x96xf32>, tensor<4x96xf32>) {
  ^bb0(%g: tensor<4x96xf32>, %u: tensor<4x96xf32>, %dy: tensor<4x96xf32>):
    %s = tessel.silu %g : tensor<4x96xf32>
    %du = tessel.mul %dy, %s : (tensor<4x96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
    %ds = tessel.mul %dy, %u : (tensor<4x96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
    %dg = tessel.silu_grad %g, %ds : tensor<4x96xf32>
    tessel.yield %dg, %du : tensor<4x96xf32>, tensor<4x96xf32>
  }
  return %r#0, %r#1 : tensor<4x96xf32>, tensor<4x96xf32>
}
func.func @fused_add_rms_norm(%a0: tensor<7x33xf32>, %a1: tensor<7x33xf32>, %a2: tensor<33xf32>) -> (tensor<7x33xf32>, tensor<7x33xf32>) {
  %r:2 = tessel.fused (%a0, %a1, %a2) : (tensor<7x33xf32>, tensor<7x33xf32>, tensor<33xf32>) -> (tensor<7x33xf32>, tensor<7x33xf32>) {
  ^bb0(%x: tensor<7x33xf32>, %d: tensor<7x33xf32>, %w: tensor<33xf32>):
    %h = tessel.add %x, %d : (tensor<7x33xf32>, tensor<7x33xf32>) -> tensor<7x33xf32>
    %n = tessel.rms_norm %h, %w : (tensor<7x33xf32>, tensor<33xf32>) -> tensor<7x33xf32>
    tessel.yield %h, %n : tensor<7x33xf32>, tensor<7x33xf32>
  }
  return %r#0, %r#1 : tensor<7x33xf32>, tensor<7x33xf32>
}
func.func @fused_add_rms_norm_wide(%a0: tensor<2x8192xf32>, %a1: tensor<2x8192xf32>, %a2: tensor<8192xf32>) -> tensor<2x8192xf32> {
  %r = tessel.fused (%a0, %a1, %a2) : (tensor<2x8192xf32>, tensor<2x8192xf32>, tensor<8192xf32>) -> tensor<2x8192xf32> {
  ^bb0(%x: tensor<2x8192xf32>, %d: tensor<2x8192xf32>, %w: tensor<8192xf32>):
    %h = tessel.add %x, %d : (tensor<2x8192xf32>, tensor<2x8192xf32>) -> tensor<2x8192xf32>
    %n = tessel.rms_norm %h, %w {epsilon = 1.000000e-06 : f64} : (tensor<2x8192xf32>, tensor<8192xf32>) -> tensor<2x8192xf32>
    tessel.yield %n : tensor<2x8192xf32>
  }
  return %r : tensor<2x8192xf32>
}
func.func @fused_add_rms_norm_bf16(%a0: tensor<5x40xbf16>, %a1: tensor<5x40xbf16>, %a2: tensor<40xbf16>) -> (tensor<5x40xbf16>, tensor<5x40xbf16>) {
  %r:2 = tessel.fused (%a0, %a1, %a2) : (tensor<5x40xbf16>, tensor<5x40xbf16>, tensor<40xbf16>) -> (tensor<5x40xbf16>, tensor<5x40xbf16>) {
  ^bb0(%x: tensor<5x40xbf16>, %d: tensor<5x40xbf16>, %w: tensor<40xbf16>):
    %h = tessel.add %x, %d : (tensor<5x40xbf16>, tensor<5x40xbf16>) -> tensor<5x40xbf16>
    %n = tessel.rms_norm %h, %w : (tensor<5x40xbf16>, tensor<40xbf16>) -> tensor<5x40xbf16>
    tessel.yield %h, %n : tensor<5x40xbf16>, tensor<5x40xbf16>
  }
  return %r#0, %r#1 : tensor<5x40xbf16>, tensor<5x40xbf16>
}
func.func @norm_bf16(%x: tensor<6x24xbf16>, %w: tensor<24xbf16>, %dy: tensor<6x24xbf16>) -> (tensor<6x24xbf16>, tensor<6x24xbf16>, tensor<24xbf16>, tensor<6x24xbf16>, tensor<6x24xbf16>) {
  %0 = tessel.rms_norm %x, %w : (tensor<6x24xbf16>, tensor<24xbf16>) -> tensor<6x24xbf16>
  %1:2 = tessel.rms_norm_grad %x, %w, %dy : (tensor<6x24xbf16>, tensor<24xbf16>, tensor<6x24xbf16>) -> (tensor<6x24xbf16>, tensor<24xbf16>)
  %2 = tessel.silu %x : tensor<6x24xbf16>
  %3 = tessel.silu_grad %x, %dy : tensor<6x24xbf16>
  return %0, %1#0, %1#1, %2, %3 : tensor<6x24xbf16>, tensor<6x24xbf16>, tensor<24xbf16>, tensor<6x24xbf16>, tensor<6x24xbf16>
}
)mlir";

std::vector<cpptest::Case> cases() {
  using namespace cpptest;
  std::vector<Case> c;
  for (Shape s : {Shape{7}, Shape{7, 33}, Shape{64, 16}}) {
    c.push_back(unary("silu", s, 10, {}));
    c.push_back(unaryGrad("silu_grad", s, 10, {}));
  }
  for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 7, 33}, Shape{3, 1000}, Shape{2, 8192}})
    c.push_back(rmsNorm(s));
  for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{70, 33}, Shape{2, 40, 96}, Shape{40, 8192}})
    c.push_back(rmsNormGrad(s));
  return c;
}

struct Suite {
  Modules modules;
  std::vector<Kernel> kernels;
};

Suite& suite() {
  static Suite* s = [] {
    auto* s = new Suite;
    std::string ir = kFusedNorm;
    for (const cpptest::Case& c : cases()) ir += c.mlir;
    s->kernels = collectKernels(s->modules.parse(ir), "norm_");
    return s;
  }();
  return *s;
}

TEST(CudaKernelNorm, EveryCaseCompilesWithNvrtcWithoutSpills) {
  REQUIRE_NVRTC();
  compileAndReport(suite().kernels, "tessel_cuda_kernel_norm_nvrtc");
}

TEST(CudaKernelNorm, EveryCaseInSimtMatchesTheCppKernel) { checkInSimt(suite().kernels); }

TEST(CudaKernelNorm, MisalignedPointersTakeTheScalarPaths) {
  checkInSimt(suite().kernels, 1, [](const Kernel& k) {
    return k.cuda.kind == CudaKernelKind::Elementwise ||
           k.cuda.kind == CudaKernelKind::FusedElementwise;
  });
}

TEST(CudaKernelNorm, EveryCaseOnOneBlockMatchesTheCppKernel) {
  checkInSimt(suite().kernels, 0, {}, /*oneBlock=*/true);
}

// The fused regions really are fused kernels of the expected kinds: the SwiGLU gate is one
// elementwise kernel, the residual add and rms_norm one row kernel.
TEST(CudaKernelNorm, FusedRegionsHaveTheirKernelKinds) {
  std::set<std::string> ops;
  int fusedRow = 0, fusedElementwise = 0;
  for (const Kernel& k : suite().kernels) {
    ops.insert(k.op->getName().getStringRef().str());
    fusedRow += k.cuda.kind == CudaKernelKind::FusedRow;
    fusedElementwise += k.cuda.kind == CudaKernelKind::FusedElementwise;
  }
  for (const char* op : {"tessel.silu", "tessel.silu_grad", "tessel.rms_norm",
                         "tessel.rms_norm_grad", "tessel.fused"})
    EXPECT_TRUE(ops.count(op)) << op;
  EXPECT_EQ(fusedRow, 3);          // the three add + rms_norm regions
  EXPECT_EQ(fusedElementwise, 2);  // swiglu and its backward
}

}  // namespace
}  // namespace tessel::cudatest
