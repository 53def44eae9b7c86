// Every op the CUDA emitter supports, at the awkward sizes the models do not reach (1, 7, 33,
// rows of 1000 to 50257, shapes no 16-byte vector divides, empty results, i32 layouts, reductions
// over inner dimensions, transposes that move the contiguous dimension, several chunks of
// layer_norm_grad rows, fused regions with chained row reductions, fused attention at T = 17,
// D = 10 and GQA), through NVRTC and
// through the SIMT harness against the C++ kernels; the elementwise and layout kernels also
// with pointers that are not 16-byte aligned, so their scalar fallbacks run too.
//
// The one-op functions come from the C++ emitter's test cases (CppEmitterCases.h); only
// their IR is used here: inputs and tolerances are this test's (CudaKernelsTestUtil.h).
#include "test/unit/CppEmitterCases.h"
#include "test/unit/CppEmitterVocabCases.h"
#include "test/unit/CppEmitterAttentionCases.h"
#include "test/unit/CudaKernelsTestUtil.h"

#include <set>

namespace tessel::cudatest {
namespace {

using cpptest::Shape;

/// Fused regions, written out: a causal softmax after a scale (the attention pattern), a
/// residual add and layer norm on odd rows, softmax_grad then scale, a layer norm feeding a
/// softmax (a reduction of a reduction's output), and an elementwise region whose rows no
/// 16-byte vector divides, with a suffix-broadcast operand and a scalar.
const char* kFused = R"mlir(
func.func @fused_scale_softmax_causal(%a0: tensor<2x3x33x33xf32>) -> tensor<2x3x33x33xf32> {
  %r = tessel.fused (%a0) : (tensor<2x3x33x33xf32>) -> tensor<2x3x33x33xf32> {
  ^bb0(%x: tensor<2x3x33x33xf32>):
    %s = tessel.scale %x, 2.500000e-01 : tensor<2x3x33x33xf32>
    %p = tessel.softmax %s causal : tensor<2x3x33x33xf32>
    tessel.yield %p : tensor<2x3x33x33xf32>
  }
  return %r : tensor<2x3x33x33xf32>
}
func.func @fused_add_layer_norm(%a0: tensor<7x33xf32>, %a1: tensor<33xf32>, %a2: tensor<33xf32>, %a3: tensor<33xf32>) -> (tensor<7x33xf32>, tensor<7x33xf32>) {
  %r:2 = tessel.fused (%a0, %a1, %a2, %a3) : (tensor<7x33xf32>, tensor<33xf32>, tensor<33xf32>, tensor<33xf32>) -> (tensor<7x33xf32>, tensor<7x33xf32>) {
  ^bb0(%x: tensor<7x33xf32>, %b: tensor<33xf32>, %g: tensor<33xf32>, %be: tensor<33xf32>):
    %s = tessel.add %x, %b : (tensor<7x33xf32>, tensor<33xf32>) -> tensor<7x33xf32>
    %n = tessel.layer_norm %s, %g, %be : (tensor<7x33xf32>, tensor<33xf32>, tensor<33xf32>) -> tensor<7x33xf32>
    tessel.yield %s, %n : tensor<7x33xf32>, tensor<7x33xf32>
  }
  return %r#0, %r#1 : tensor<7x33xf32>, tensor<7x33xf32>
}
func.func @fused_add_layer_norm_wide(%a0: tensor<2x8192xf32>, %a1: tensor<8192xf32>, %a2: tensor<8192xf32>, %a3: tensor<8192xf32>) -> tensor<2x8192xf32> {
  %r = tessel.fused (%a0, %a1, %a2, %a3) : (tensor<2x8192xf32>, tensor<8192xf32>, tensor<8192xf32>, tensor<8192xf32>) -> tensor<2x8192xf32> {
  ^bb0(%x: tensor<2x8192xf32>, %b: tensor<8192xf32>, %g: tensor<8192xf32>, %be: tensor<8192xf32>):
    %s = tessel.add %x, %b : (tensor<2x8192xf32>, tensor<8192xf32>) -> tensor<2x8192xf32>
    %n = tessel.layer_norm %s, %g, %be : (tensor<2x8192xf32>, tensor<8192xf32>, tensor<8192xf32>) -> tensor<2x8192xf32>
    %p = tessel.softmax %n : tensor<2x8192xf32>
    tessel.yield %p : tensor<2x8192xf32>
  }
  return %r : tensor<2x8192xf32>
}
func.func @fused_softmax_grad_scale(%a0: tensor<5x700xf32>, %a1: tensor<5x700xf32>) -> tensor<5x700xf32> {
  %r = tessel.fused (%a0, %a1) : (tensor<5x700xf32>, tensor<5x700xf32>) -> tensor<5x700xf32> {
  ^bb0(%y: tensor<5x700xf32>, %dy: tensor<5x700xf32>):
    %d = tessel.softmax_grad %y, %dy : tensor<5x700xf32>
    %s = tessel.scale %d, 2.500000e-01 : tensor<5x700xf32>
    tessel.yield %s : tensor<5x700xf32>
  }
  return %r : tensor<5x700xf32>
}
func.func @fused_layer_norm_softmax(%a0: tensor<6x50xf32>, %a1: tensor<50xf32>, %a2: tensor<50xf32>) -> tensor<6x50xf32> {
  %r = tessel.fused (%a0, %a1, %a2) : (tensor<6x50xf32>, tensor<50xf32>, tensor<50xf32>) -> tensor<6x50xf32> {
  ^bb0(%x: tensor<6x50xf32>, %g: tensor<50xf32>, %b: tensor<50xf32>):
    %n = tessel.layer_norm %x, %g, %b : (tensor<6x50xf32>, tensor<50xf32>, tensor<50xf32>) -> tensor<6x50xf32>
    %p = tessel.softmax %n : tensor<6x50xf32>
    tessel.yield %p : tensor<6x50xf32>
  }
  return %r : tensor<6x50xf32>
}
func.func @fused_flat_odd(%a0: tensor<7x33xf32>, %a1: tensor<33xf32>, %a2: tensor<f32>) -> (tensor<7x33xf32>, tensor<7x33xf32>) {
  %r:2 = tessel.fused (%a0, %a1, %a2) : (tensor<7x33xf32>, tensor<33xf32>, tensor<f32>) -> (tensor<7x33xf32>, tensor<7x33xf32>) {
  ^bb0(%x: tensor<7x33xf32>, %b: tensor<33xf32>, %s: tensor<f32>):
    %y = tessel.sub %x, %b : (tensor<7x33xf32>, tensor<33xf32>) -> tensor<7x33xf32>
    %g = tessel.gelu %y : tensor<7x33xf32>
    %m = tessel.mul %g, %s : (tensor<7x33xf32>, tensor<f32>) -> tensor<7x33xf32>
    %z = tessel.relu_grad %y, %m : tensor<7x33xf32>
    tessel.yield %g, %z : tensor<7x33xf32>, tensor<7x33xf32>
  }
  return %r#0, %r#1 : tensor<7x33xf32>, tensor<7x33xf32>
}
)mlir";

/// The vocab-parallel ops on bf16 logits and tables (mixed precision keeps the statistics in
/// f32): reads of bf16 rows, and bf16 results of the gathers and the logits' gradients.
const char* kVocabBf16 = R"mlir(
func.func @vocab_bf16(%z: tensor<7x33xbf16>, %m: tensor<7xf32>, %t: tensor<7xi32>, %o: tensor<i32>,
                      %w: tensor<20x8xbf16>, %ids: tensor<2x7xi32>, %g: tensor<2x7x8xbf16>)
    -> (tensor<7xf32>, tensor<7xf32>, tensor<7x33xbf16>, tensor<7xf32>, tensor<7x33xbf16>,
        tensor<2x7x8xbf16>, tensor<20x8xbf16>) {
  %0 = tessel.row_max %z : tensor<7x33xbf16> -> tensor<7xf32>
  %1 = tessel.sum_exp %z, %m : (tensor<7x33xbf16>, tensor<7xf32>) -> tensor<7xf32>
  %2 = tessel.sum_exp_grad %z, %m, %m : (tensor<7x33xbf16>, tensor<7xf32>, tensor<7xf32>) -> tensor<7x33xbf16>
  %3 = tessel.target_logit %z, %t, %o vocab 99 : (tensor<7x33xbf16>, tensor<7xi32>, tensor<i32>) -> tensor<7xf32>
  %4 = tessel.target_logit_grad %t, %o, %m : (tensor<7xi32>, tensor<i32>, tensor<7xf32>) -> tensor<7x33xbf16>
  %5 = tessel.embedding_shard %w, %ids, %o vocab 60 : (tensor<20x8xbf16>, tensor<2x7xi32>, tensor<i32>) -> tensor<2x7x8xbf16>
  %6 = tessel.embedding_shard_grad %ids, %o, %g : (tensor<2x7xi32>, tensor<i32>, tensor<2x7x8xbf16>) -> tensor<20x8xbf16>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<7xf32>, tensor<7xf32>, tensor<7x33xbf16>, tensor<7xf32>, tensor<7x33xbf16>, tensor<2x7x8xbf16>, tensor<20x8xbf16>
}
)mlir";

std::vector<cpptest::Case> cases() {
  using namespace cpptest;
  std::vector<Case> c;
  for (const char* op : {"add", "sub", "mul"}) {
    c.push_back(binary(op, {1}, {1}));
    c.push_back(binary(op, {2, 7, 33}, {33}));
    c.push_back(binary(op, {33}, {7, 33}));
    c.push_back(binary(op, {7, 33}, {}));
    c.push_back(binary(op, {8, 16}, {16}));
  }
  c.push_back(binary("add", {0, 7}, {7}));  // an empty result
  for (Shape s : {Shape{7}, Shape{7, 33}, Shape{64, 16}}) {
    c.push_back(unary("scale", s, 2, {}, ", 1.7"));
    c.push_back(unary("gelu", s, 10, {}));
    c.push_back(unary("relu", s, 2, {}));
    c.push_back(unaryGrad("gelu_grad", s, 10, {}));
    c.push_back(unaryGrad("relu_grad", s, 2, {}));
  }
  c.push_back(constant({}, 1.0));
  c.push_back(constant({7, 33}, 0.1));
  c.push_back(constant({64, 16}, -2.5));
  for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 7, 33}, Shape{3, 1000}, Shape{2, 8192}})
    c.push_back(layerNorm(s));
  c.push_back(layerNorm({7, 33}, 100, 101));
  for (Shape s : {Shape{7}, Shape{7, 33}, Shape{4, 700}, Shape{2, 8192}})
    c.push_back(softmax(s, false));
  for (Shape s : {Shape{1, 1}, Shape{2, 3, 33, 33}}) c.push_back(softmax(s, true));
  for (Shape s : {Shape{1, 7}, Shape{2, 7, 33}, Shape{40, 300}, Shape{2, 50257}}) {
    c.push_back(crossEntropy(s));
    c.push_back(crossEntropyGrad(s));
    c.push_back(fusedClassifier(s));
  }
  c.push_back(embedding({50, 33}, {2, 7}));
  c.push_back(embedding({50, 64}, {9}));
  c.push_back(embeddingGrad({2, 7}, 50, 33));
  c.push_back(embeddingGrad({9}, 5, 64));
  c.push_back(softmaxGrad({7, 33}));
  c.push_back(softmaxGrad({2, 3, 64}));
  for (Shape s : {Shape{7, 33}, Shape{70, 33}, Shape{2, 40, 96}, Shape{1, 1}, Shape{40, 8192}})
    c.push_back(layerNormGrad(s));
  c.push_back(transpose({7, 33}, {1, 0}));
  c.push_back(transpose({70, 40}, {1, 0}));
  c.push_back(transpose({4, 6, 8}, {2, 1, 0}));
  c.push_back(transpose({2, 3, 33, 5}, {0, 2, 1, 3}));
  c.push_back(transpose({2, 3, 8, 4}, {0, 2, 1, 3}));
  c.push_back(transpose({33, 7, 2}, {2, 0, 1}, true));
  c.push_back(split({7, 66}, 1, 2));
  c.push_back(split({6, 4, 8}, 0, 3, true));
  c.push_back(split({2, 12, 5}, 1, 3));
  c.push_back(concat({{7, 3}, {7, 5}}, 1));
  c.push_back(concat({{2, 8}, {2, 4}}, 1, true));
  c.push_back(concat({{3, 4}, {5, 4}}, 0));
  c.push_back(dynamicSlice({16, 8}, 4));
  c.push_back(dynamicSlice({64}, 16));
  c.push_back(reduce("reduce_sum", {7, 33}, {1}));
  c.push_back(reduce("reduce_mean", {2, 7, 33}, {0, 2}));
  c.push_back(reduce("reduce_sum", {300, 129}, {0}));
  c.push_back(reduce("reduce_sum", {5, 6}, {0, 1}));
  c.push_back(reduce("reduce_mean", {4, 5, 6}, {1}));
  c.push_back(broadcast({33}, {7, 33}, {0}));
  c.push_back(broadcast({7}, {7, 33}, {1}));
  c.push_back(broadcast({}, {4, 8}, {0, 1}));
  c.push_back(broadcast({8}, {3, 8, 4}, {0, 2}));
  c.push_back(broadcast({16}, {3, 16}, {0}));
  c.push_back(adamw({7, 33}, true, 1));
  c.push_back(adamw({64}, false, 10));
  c.push_back(sgd({7, 33}, true, 0.9, 1));
  c.push_back(sgd({7, 33}, false, 0.9, 3));
  c.push_back(sgd({33}, true, 0, 2));
  c.push_back(globalNorm({{7, 33}, {5}, {300, 129}}));
  c.push_back(clip(0.5, 1.0, "below"));
  c.push_back(clip(3.0, 1.0, "above"));
  for (Case& k : vocabCases()) c.push_back(std::move(k));
  for (Case& k : cpptest::ropeCases()) c.push_back(std::move(k));
  for (Case& k : cpptest::attentionCases()) c.push_back(std::move(k));
  // Rows of a GPT-2 vocabulary split over 2 ranks: longer than one block's threads.
  c.push_back(rowMax({2, 25129}));
  c.push_back(sumExp({2, 25129}));
  return c;
}

/// rope on bf16 activations (mixed precision), both directions: read as float, turned in f32,
/// stored rounded to bf16.
const char* kRopeBf16 = R"mlir(
func.func @rope_bf16(%x: tensor<2x7x24xbf16>) -> (tensor<2x7x24xbf16>, tensor<2x7x24xbf16>) {
  %0 = tessel.rope %x heads 3 theta 1.000000e+04 : tensor<2x7x24xbf16>
  %1 = tessel.rope %x heads 3 theta 1.000000e+04 inverse : tensor<2x7x24xbf16>
  return %0, %1 : tensor<2x7x24xbf16>, tensor<2x7x24xbf16>
}
)mlir";

/// The fused attention kernels on bf16 operands and results (mixed precision): read as float,
/// computed in f32, stored rounded to bf16; packed causal attention with D = 48 and grouped
/// attention with G = 2 and D = 24, both at T = 33 (the C++ kernels' last block of 16 rows
/// has one row). Tolerance: the f32 attention bound plus one bf16 ulp (relativeTolerance).
const char* kAttentionBf16 = R"mlir(
func.func @attention_bf16(%qkv: tensor<2x33x288xbf16>, %dy: tensor<2x33x96xbf16>,
                          %q: tensor<2x33x96xbf16>, %k: tensor<2x33x48xbf16>, %v: tensor<2x33x48xbf16>)
    -> (tensor<2x33x96xbf16>, tensor<2x33x288xbf16>, tensor<2x33x96xbf16>, tensor<2x33x96xbf16>,
        tensor<2x33x48xbf16>, tensor<2x33x48xbf16>) {
  %0 = tessel.causal_attention %qkv heads 2 : tensor<2x33x288xbf16> -> tensor<2x33x96xbf16>
  %1 = tessel.causal_attention_grad %qkv, %dy heads 2 : (tensor<2x33x288xbf16>, tensor<2x33x96xbf16>) -> tensor<2x33x288xbf16>
  %2 = tessel.grouped_attention %q, %k, %v heads 4 kv_heads 2 : (tensor<2x33x96xbf16>, tensor<2x33x48xbf16>, tensor<2x33x48xbf16>) -> tensor<2x33x96xbf16>
  %3:3 = tessel.grouped_attention_grad %q, %k, %v, %dy heads 4 kv_heads 2 : (tensor<2x33x96xbf16>, tensor<2x33x48xbf16>, tensor<2x33x48xbf16>, tensor<2x33x96xbf16>) -> (tensor<2x33x96xbf16>, tensor<2x33x48xbf16>, tensor<2x33x48xbf16>)
  return %0, %1, %2, %3#0, %3#1, %3#2 : tensor<2x33x96xbf16>, tensor<2x33x288xbf16>, tensor<2x33x96xbf16>, tensor<2x33x96xbf16>, tensor<2x33x48xbf16>, tensor<2x33x48xbf16>
}
)mlir";

struct Suite {
  Modules modules;
  std::vector<Kernel> kernels;
};

Suite& suite() {
  static Suite* s = [] {
    auto* s = new Suite;
    std::string ir = std::string(kFused) + kVocabBf16 + kRopeBf16 + kAttentionBf16;
    for (const cpptest::Case& c : cases()) ir += c.mlir;
    s->kernels = collectKernels(s->modules.parse(ir), "op_");
    return s;
  }();
  return *s;
}

TEST(CudaKernelOps, EveryCaseCompilesWithNvrtcWithoutSpills) {
  REQUIRE_NVRTC();
  compileAndReport(suite().kernels, "tessel_cuda_kernel_ops_nvrtc");
}

TEST(CudaKernelOps, EveryCaseInSimtMatchesTheCppKernel) { checkInSimt(suite().kernels); }

TEST(CudaKernelOps, MisalignedPointersTakeTheScalarPaths) {
  // Buffers one element past a 16-byte boundary: every 128-bit path must fall back.
  checkInSimt(suite().kernels, 1, [](const Kernel& k) {
    return k.cuda.kind == CudaKernelKind::Elementwise || k.cuda.kind == CudaKernelKind::Layout ||
           k.cuda.kind == CudaKernelKind::FusedElementwise;
  });
}

TEST(CudaKernelOps, EveryCaseOnOneBlockMatchesTheCppKernel) {
  // Grid-stride loops everywhere: a grid of one block computes the same results (and the
  // two-level sums, whose only block is then the last).
  checkInSimt(suite().kernels, 0, {}, /*oneBlock=*/true);
}

TEST(CudaKernelOps, EveryOpKindHasACase) {
  std::set<std::string> ops;
  for (const Kernel& k : suite().kernels) ops.insert(k.op->getName().getStringRef().str());
  for (const char* op : {"tessel.add",
                         "tessel.sub",
                         "tessel.mul",
                         "tessel.scale",
                         "tessel.gelu",
                         "tessel.relu",
                         "tessel.gelu_grad",
                         "tessel.relu_grad",
                         "tessel.constant",
                         "tessel.layer_norm",
                         "tessel.softmax",
                         "tessel.cross_entropy",
                         "tessel.embedding",
                         "tessel.softmax_grad",
                         "tessel.layer_norm_grad",
                         "tessel.embedding_grad",
                         "tessel.cross_entropy_grad",
                         "tessel.fused_classifier",
                         "tessel.transpose",
                         "tessel.rope",
                         "tessel.causal_attention",
                         "tessel.causal_attention_grad",
                         "tessel.grouped_attention",
                         "tessel.grouped_attention_grad",
                         "tessel.split",
                         "tessel.concat",
                         "tessel.dynamic_slice",
                         "tessel.reduce_sum",
                         "tessel.reduce_mean",
                         "tessel.broadcast",
                         "tessel.adamw",
                         "tessel.sgd",
                         "tessel.global_norm",
                         "tessel.clip_coefficient",
                         "tessel.embedding_shard",
                         "tessel.embedding_shard_grad",
                         "tessel.row_max",
                         "tessel.sum_exp",
                         "tessel.sum_exp_grad",
                         "tessel.target_logit",
                         "tessel.target_logit_grad",
                         "tessel.cross_entropy_from_stats",
                         "tessel.cross_entropy_from_stats_grad",
                         "tessel.fused"})
    EXPECT_TRUE(ops.count(op)) << op;
}

}  // namespace
}  // namespace tessel::cudatest
