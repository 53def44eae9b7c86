// The C++ kernel emitter (codegen/CppEmitter.h) against the f64 reference kernels: every op
// it supports, at sizes 1, 7 and 33, with broadcasting variants and one shape per op large
// enough to take the OpenMP path (the cases and their tolerances: CppEmitterCases.h). All
// kernels are compiled into one library, once. Each case prints its largest error and the
// share of its tolerance it used ("[ max err  ]" lines).
#include "test/unit/CppEmitterCases.h"
#include "test/unit/CppEmitterNormCases.h"
#include "test/unit/CppEmitterVocabCases.h"
#include "test/unit/CppEmitterAttentionCases.h"

#include <dlfcn.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

namespace tessel::cpptest {
namespace {

// ---- the cases ------------------------------------------------------------------------------

std::vector<Case> allCases() {
  std::vector<Case> c;
  // Elementwise, with suffix broadcasting (b shorter, a shorter, a scalar, M = 1) and two
  // shapes over the parallel threshold (flat and broadcast).
  for (const char* op : {"add", "sub", "mul"}) {
    c.push_back(binary(op, {1}, {1}));
    c.push_back(binary(op, {2, 7, 33}, {2, 7, 33}));
    c.push_back(binary(op, {2, 7, 33}, {33}));
    c.push_back(binary(op, {33}, {7, 33}));
    c.push_back(binary(op, {7, 33}, {}));
    c.push_back(binary(op, {7, 1}, {1}));
    c.push_back(binary(op, {64, 33, 33}, {33, 33}));
  }
  c.push_back(binary("add", {300, 129}, {300, 129}));
  c.push_back(binary("add", {0, 7}, {7}));  // an empty result: a kernel that does nothing
  for (Shape s : {Shape{1}, Shape{7}, Shape{7, 33}, Shape{300, 129}}) {
    // x * (float)factor: the factor's rounding and the product's, 2 u; 1.7 is inexact.
    c.push_back(unary("scale", s, 2, {2 * kU, 0}, ", 1.7"));
    c.push_back(unary("gelu", s, s.size() > 1 ? 10 : 4, kGeluTol));
    c.push_back(unary("relu", s, 2, {0, 0}));  // exact
    c.push_back(unaryGrad("gelu_grad", s, s.size() > 1 ? 10 : 4, kGeluTol));
    c.push_back(unaryGrad("relu_grad", s, 2, {0, 0}));
  }
  c.push_back(constant({}, 1.0));
  c.push_back(constant({7, 33}, 0.1));
  c.push_back(constant({300, 129}, -2.5));
  // Row-wise ops: C = 1, 7, 33, 64, 256 and rows 1..4096.
  for (Shape s : {Shape{1, 1}, Shape{33, 1}, Shape{1, 7}, Shape{7, 33}, Shape{2, 7, 33},
                  Shape{64, 33, 64}})
    c.push_back(layerNorm(s));
  c.push_back(layerNorm({7, 33}, 100, 101));  // a large common offset: mean 100.5, std 0.29
  for (Shape s : {Shape{1}, Shape{7}, Shape{7, 33}, Shape{2, 3, 33}, Shape{64, 7, 256}})
    c.push_back(softmax(s, false));
  for (Shape s : {Shape{1, 1}, Shape{7, 7}, Shape{2, 3, 33, 33}, Shape{4, 4, 64, 64}})
    c.push_back(softmax(s, true));
  for (Shape s : {Shape{1, 1}, Shape{1, 7}, Shape{7, 33}, Shape{2, 7, 33}, Shape{64, 7, 256}}) {
    c.push_back(crossEntropy(s));
    c.push_back(crossEntropyGrad(s));
    c.push_back(fusedClassifier(s));
  }
  c.push_back(embedding({7, 33}, {1}));
  c.push_back(embedding({33, 7}, {2, 7}));
  c.push_back(embedding({1, 1}, {}));
  c.push_back(embedding({256, 64}, {8, 64}));
  for (Shape s : {Shape{1}, Shape{7}, Shape{7, 33}, Shape{2, 3, 33}, Shape{64, 33, 33}})
    c.push_back(softmaxGrad(s));
  for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 7, 33}, Shape{33, 7}, Shape{2048, 33},
                  Shape{64, 64, 33}})
    c.push_back(layerNormGrad(s));
  c.push_back(embeddingGrad({1}, 1, 7));
  c.push_back(embeddingGrad({2, 7}, 5, 33));  // many rows share an index
  c.push_back(embeddingGrad({7}, 33, 1));
  c.push_back(embeddingGrad({8, 64}, 256, 64));
  // Layout.
  c.push_back(transpose({7, 33}, {1, 0}));
  c.push_back(transpose({2, 7, 33}, {0, 2, 1}));
  c.push_back(transpose({2, 3, 7, 33}, {0, 2, 1, 3}));  // rows stay contiguous
  c.push_back(transpose({33, 7, 2}, {2, 0, 1}));
  c.push_back(transpose({1, 7, 1}, {2, 1, 0}));
  c.push_back(transpose({5, 1, 7}, {1, 0, 2}));
  c.push_back(transpose({7, 33}, {1, 0}, true));
  c.push_back(transpose({64, 33, 65}, {2, 1, 0}));
  c.push_back(split({7, 66}, 1, 2));
  c.push_back(split({33, 7}, 0, 3));
  c.push_back(split({2, 7, 99}, 2, 3));
  c.push_back(split({1}, 0, 1));
  c.push_back(split({8, 32}, 0, 2, true));
  c.push_back(split({64, 33, 96}, 2, 3));
  c.push_back(concat({{7, 1}, {7, 33}}, 1));
  c.push_back(concat({{2, 3, 7}, {2, 1, 7}, {2, 5, 7}}, 1));
  c.push_back(concat({{1}, {7}}, 0));
  c.push_back(concat({{4}, {3}}, 0, true));
  c.push_back(concat({{64, 33, 32}, {64, 33, 32}}, 2));
  c.push_back(dynamicSlice({16, 8}, 4));
  c.push_back(dynamicSlice({7, 33}, 7));  // the whole input: only offset 0 fits
  c.push_back(dynamicSlice({64}, 16));
  for (const char* op : {"reduce_sum", "reduce_mean"}) {
    c.push_back(reduce(op, {2, 7, 33}, {0, 1}));  // bias gradient: inner dimension kept
    c.push_back(reduce(op, {2, 7, 33}, {2}));     // row sums: inner dimension reduced
    c.push_back(reduce(op, {2, 7, 33}, {2, 0}));
    c.push_back(reduce(op, {2, 7, 33}, {1}));
    c.push_back(reduce(op, {7, 33}, {0, 1}));
    c.push_back(reduce(op, {1, 7, 1}, {0}));
    c.push_back(reduce(op, {64, 64, 33}, {0, 1}));
    c.push_back(reduce(op, {300, 129}, {1}));
    c.push_back(reduce(op, {4, 512, 33}, {1}));  // few outputs: the reduced range is chunked
  }
  c.push_back(reduce("reduce_sum", {7, 33}, {}));
  c.push_back(reduce("reduce_sum", {33, 1, 7}, {1}));
  c.push_back(broadcast({33}, {2, 7, 33}, {0, 1}));
  c.push_back(broadcast({7}, {7, 33}, {1}));
  c.push_back(broadcast({2, 33}, {2, 7, 33}, {1}));
  c.push_back(broadcast({}, {7, 1}, {0, 1}));
  c.push_back(broadcast({1}, {1, 1}, {0}));
  c.push_back(broadcast({7, 33}, {7, 33}, {}));
  c.push_back(broadcast({64, 33}, {64, 7, 33, 5}, {1, 3}));
  // Optimizers.
  for (Shape s : {Shape{1}, Shape{7, 33}, Shape{300, 129}}) {
    c.push_back(adamw(s, true, 3));
    c.push_back(adamw(s, false, 1));
    c.push_back(sgd(s, true, 0.9, 1));
    c.push_back(sgd(s, false, 0.9, 5));
    c.push_back(sgd(s, true, 0.0, 2));  // no momentum: the buffer passes through
  }
  c.push_back(globalNorm({{1}}));
  c.push_back(globalNorm({{7, 33}, {33}}));
  c.push_back(globalNorm({{300, 129}, {64, 33}, {7}}));
  c.push_back(clip(5.0, 1.0, "clipped"));
  c.push_back(clip(0.5, 1.0, "unclipped"));
  c.push_back(clip(3.0, INFINITY, "disabled"));
  for (Case& k : vocabCases()) c.push_back(std::move(k));
  for (Case& k : normCases()) c.push_back(std::move(k));
  for (Case& k : ropeCases()) c.push_back(std::move(k));
  for (Case& k : attentionCases()) c.push_back(std::move(k));
  return c;
}

Suite& suite() {
  static Suite s(allCases());
  return s;
}

/// Checks every case whose op is one of `ops` (names without "tessel."); each must have one.
void checkOps(std::initializer_list<const char*> ops) {
  ref::testutil::Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const char* op : ops) {
    int count = 0;
    for (const Case& c : suite().cases())
      if (suite().opOf(c.name)->getName().getStringRef() == fmt::format("tessel.{}", op)) {
        checkCase(suite(), c, rng);
        ++count;
      }
    EXPECT_GT(count, 0) << "no case of tessel." << op;
  }
}

// ---- numerics against the reference ---------------------------------------------------------

TEST(CppEmitter, Binary) { checkOps({"add", "sub", "mul"}); }
TEST(CppEmitter, ScaleAndConstant) { checkOps({"scale", "constant"}); }
TEST(CppEmitter, Activations) { checkOps({"gelu", "relu", "gelu_grad", "relu_grad"}); }
TEST(CppEmitter, LayerNorm) { checkOps({"layer_norm"}); }
TEST(CppEmitter, SiluAndRmsNorm) { checkOps({"silu", "silu_grad", "rms_norm", "rms_norm_grad"}); }
TEST(CppEmitter, Softmax) { checkOps({"softmax"}); }
TEST(CppEmitter, CrossEntropy) { checkOps({"cross_entropy"}); }
TEST(CppEmitter, Embedding) { checkOps({"embedding"}); }
TEST(CppEmitter, SoftmaxGrad) { checkOps({"softmax_grad"}); }
TEST(CppEmitter, LayerNormGrad) { checkOps({"layer_norm_grad"}); }
TEST(CppEmitter, EmbeddingGrad) { checkOps({"embedding_grad"}); }
TEST(CppEmitter, CrossEntropyGrad) { checkOps({"cross_entropy_grad"}); }
TEST(CppEmitter, FusedClassifier) { checkOps({"fused_classifier"}); }
TEST(CppEmitter, Transpose) { checkOps({"transpose"}); }
TEST(CppEmitter, SplitAndConcat) { checkOps({"split", "concat"}); }
TEST(CppEmitter, DynamicSlice) { checkOps({"dynamic_slice"}); }
TEST(CppEmitter, Reductions) { checkOps({"reduce_sum", "reduce_mean"}); }
TEST(CppEmitter, Broadcast) { checkOps({"broadcast"}); }
TEST(CppEmitter, Optimizers) { checkOps({"adamw", "sgd"}); }
TEST(CppEmitter, GlobalNormAndClip) { checkOps({"global_norm", "clip_coefficient"}); }
TEST(CppEmitter, Rope) { checkOps({"rope"}); }
TEST(CppEmitter, FusedAttention) {
  checkOps({"causal_attention", "causal_attention_grad", "grouped_attention", "grouped_attention_grad"});
}
TEST(CppEmitter, VocabParallel) {
  checkOps({"embedding_shard", "embedding_shard_grad", "row_max", "sum_exp", "sum_exp_grad",
            "target_logit", "target_logit_grad", "cross_entropy_from_stats",
            "cross_entropy_from_stats_grad"});
}

/// Runs the [7]-shaped unary cases `names` (and their grads, with dout 0.5) on each row of
/// seven inputs in `rows`.
void checkUnaryAt(std::initializer_list<const char*> names,
                  std::initializer_list<std::vector<double>> rows) {
  for (const char* name : names) {
    const Case& c = *std::find_if(suite().cases().begin(), suite().cases().end(),
                                  [&](const Case& k) { return k.name == name; });
    for (const std::vector<double>& x : rows) {
      std::vector<ref::Tensor> inputs{ref::Tensor({7}, x)};
      if (c.args.size() == 2) inputs.push_back(ref::Tensor::filled({7}, 0.5));
      checkCaseOn(suite(), c, inputs);
    }
  }
}

// Extreme inputs: the gelu tails, where tanh(u) -> -1 and x^3 overflows f32.
TEST(CppEmitter, GeluAtExtremeInputs) {
  checkUnaryAt({"gelu_7", "gelu_grad_7"}, {{-INFINITY, -100, -10, 0, 10, 1e30, NAN},
                                          {INFINITY, -1e30, -1, 1, 100, -3, 3}});
}

// Extreme inputs: the silu tails, where exp(-|x|) underflows and silu(x) is subnormal
// (x < -87), and silu'(x) crosses 0 (x ~ -1.28).
TEST(CppEmitter, SiluAtExtremeInputs) {
  checkUnaryAt({"silu_7", "silu_grad_7"}, {{-INFINITY, -100, -87.5, 0, 20, 1e30, NAN},
                                          {INFINITY, -1e30, -1.28, 1, 100, -30, 88}});
}

// ---- properties beyond the numerics ---------------------------------------------------------

TEST(CppEmitter, EveryOpHasCases) {
  std::set<std::string> seen;
  for (const Case& c : suite().cases())
    seen.insert(suite().opOf(c.name)->getName().getStringRef().str());
  for (const char* op :
       {"add", "sub", "mul", "scale", "gelu", "relu", "layer_norm", "softmax", "embedding",
        "cross_entropy", "transpose", "split", "concat", "reduce_sum", "reduce_mean", "constant",
        "broadcast", "gelu_grad", "relu_grad", "softmax_grad", "layer_norm_grad",
        "embedding_grad", "cross_entropy_grad", "fused_classifier", "adamw", "sgd", "global_norm",
        "clip_coefficient", "embedding_shard", "embedding_shard_grad", "row_max", "sum_exp",
        "sum_exp_grad", "target_logit", "target_logit_grad", "cross_entropy_from_stats",
        "cross_entropy_from_stats_grad", "dynamic_slice", "silu", "silu_grad", "rms_norm",
        "rms_norm_grad", "rope", "causal_attention", "causal_attention_grad",
        "grouped_attention", "grouped_attention_grad"})
    EXPECT_TRUE(seen.count(fmt::format("tessel.{}", op))) << op;
}

/// omp_set_num_threads of the OpenMP runtime the kernels loaded (it is not linked here).
void (*setThreads())(int) {
  suite();
  void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  return gomp ? reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_set_num_threads")) : nullptr;
}

// The promise that replicated tensors stay bitwise identical: no kernel's result depends on
// how many threads run it. These are the kernels with cross-row sums, at parallel sizes.
TEST(CppEmitter, ResultsDoNotDependOnTheThreadCount) {
  auto set = setThreads();
  if (!set) GTEST_SKIP() << "the kernels' OpenMP runtime is not libgomp";
  ref::testutil::Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const char* name : {"layer_norm_grad_64x64x33", "layer_norm_grad_2048x33",
                           "reduce_sum_64x64x33_01", "reduce_mean_300x129_1",
                           "reduce_mean_4x512x33_1",
                           "global_norm_300x129_64x33_7", "embedding_grad_8x64_256x64",
                           "cross_entropy_64x7x256", "fused_classifier_64x7x256",
                           "softmax_causal_4x4x64x64", "embedding_shard_grad_8x64_128x64_256",
                           "sum_exp_64x7x128", "cross_entropy_from_stats_64x64",
                           "rms_norm_grad_2048x33", "rms_norm_grad_64x64x33",
                           "causal_attention_grad_8x64x1152_h6",
                           "grouped_attention_grad_4x64x256_64_h8"}) {
    SCOPED_TRACE(name);
    const Case& c = *std::find_if(suite().cases().begin(), suite().cases().end(),
                                  [&](const Case& k) { return k.name == name; });
    if (std::string(name).rfind("global_norm", 0) != 0) {  // it is parallel in the preamble
      EXPECT_NE(emitCppKernel(suite().opOf(name), "k").find("#pragma omp parallel"),
                std::string::npos);
    }
    std::vector<ref::Tensor> inputs = randomInputs(c, rng);
    set(1);
    std::vector<Buffer> one = runKernel(suite(), c, inputs);
    set(3);
    std::vector<Buffer> three = runKernel(suite(), c, inputs);
    set(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    for (size_t r = 0; r < one.size(); ++r)
      EXPECT_EQ(0, std::memcmp(one[r].f.data(), three[r].f.data(), one[r].f.size() * 4 - 4))
          << "result " << r;
  }
}

// Out-of-range indices never read out of bounds: NaN rows forward, skipped in the scatter.
TEST(CppEmitter, OutOfRangeIndicesAreVisibleNotFatal) {
  auto find = [](const std::string& name) -> const Case& {
    return *std::find_if(suite().cases().begin(), suite().cases().end(),
                         [&](const Case& k) { return k.name == name; });
  };
  ref::Tensor table = ref::Tensor::filled({33, 7}, 2.0);
  ref::Tensor idx({2, 7});
  idx.data[3] = 33;
  idx.data[5] = -1;
  std::vector<Buffer> e = runKernel(suite(), find("embedding_33x7_2x7"), {table, idx});
  for (int64_t n = 0; n < 14; ++n)
    EXPECT_EQ(std::isnan(e[0].f[n * 7]), n == 3 || n == 5) << n;
  EXPECT_EQ(e[0].f[0], 2.0f);

  ref::Tensor grad = ref::Tensor::filled({2, 7, 33}, 1.0);
  ref::Tensor small({2, 7});  // every index 0, except two out of [0, 5)
  small.data[0] = 5;
  small.data[1] = -3;
  std::vector<Buffer> g = runKernel(suite(), find("embedding_grad_2x7_5x33"), {small, grad});
  EXPECT_EQ(g[0].f[0], 12.0f);  // 14 rows, 2 skipped
  EXPECT_EQ(g[0].f[33], 0.0f);

  ref::Tensor logits = ref::Tensor::filled({7, 33}, 0.0), targets({7});
  targets.data[2] = 40;
  std::vector<Buffer> l = runKernel(suite(), find("cross_entropy_7x33"), {logits, targets});
  EXPECT_TRUE(std::isnan(l[0].f[0]));
  // The fused classifier: a NaN loss, a NaN row 2 of dlogits, every other row finite
  // (uniform logits: 1/33 off the target, minus 1 on it, times 1/7).
  std::vector<Buffer> fc = runKernel(suite(), find("fused_classifier_7x33"),
                                     {logits, targets, ref::Tensor::filled({}, 1.0)});
  EXPECT_TRUE(std::isnan(fc[0].f[0]));
  for (int64_t n = 0; n < 7; ++n) {
    EXPECT_EQ(std::isnan(fc[1].f[n * 33 + 5]), n == 2) << n;
    if (n != 2) {
      EXPECT_FLOAT_EQ(fc[1].f[n * 33 + 5], 1.0f / 33 / 7) << n;
    }
  }
}

// A shard's kernels tell three kinds of ids apart: held here (a row or a logit), held by
// another shard (a zero addend; skipped by the scatters), and outside the whole vocabulary
// (NaN, as the unsharded ops give).
TEST(CppEmitter, VocabShardsZeroOtherShardsAndPoisonInvalidIds) {
  auto find = [](const std::string& name) -> const Case& {
    return *std::find_if(suite().cases().begin(), suite().cases().end(),
                         [&](const Case& k) { return k.name == name; });
  };
  ref::Tensor table = ref::Tensor::filled({7, 33}, 2.0), offset = ref::Tensor::filled({}, 10);
  ref::Tensor idx({2, 7});  // rows 10..16 are this shard's of vocab 20
  for (auto [n, id] : {std::pair{0, 10}, {1, 16}, {2, 9}, {3, 17}, {4, 20}, {5, -1}})
    idx.data[n] = id;
  std::vector<Buffer> e =
      runKernel(suite(), find("embedding_shard_7x33_2x7_20"), {table, idx, offset});
  for (int64_t n = 0; n < 6; ++n) {
    float want = n < 2 ? 2.0f : n < 4 ? 0.0f : NAN;
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(e[0].f[n * 33])) << n;
    } else {
      EXPECT_EQ(e[0].f[n * 33], want) << n;
    }
  }
  ref::Tensor logits = ref::Tensor::filled({7, 33}, 3.0), targets({7});
  ref::Tensor off = ref::Tensor::filled({}, 33);  // columns 33..65 of vocab 99
  for (auto [n, t] : {std::pair{0, 33}, {1, 65}, {2, 32}, {3, 66}, {4, 99}, {5, -2}})
    targets.data[n] = t;
  std::vector<Buffer> z = runKernel(suite(), find("target_logit_7x33_99"), {logits, targets, off});
  EXPECT_EQ(z[0].f[0], 3.0f);
  EXPECT_EQ(z[0].f[1], 3.0f);
  EXPECT_EQ(z[0].f[2], 0.0f);
  EXPECT_EQ(z[0].f[3], 0.0f);
  EXPECT_TRUE(std::isnan(z[0].f[4]));
  EXPECT_TRUE(std::isnan(z[0].f[5]));
  ref::Tensor grad = ref::Tensor::filled({2, 7, 33}, 1.0), small({2, 7});  // shard rows 3..7
  for (double& v : small.data) v = 4;
  small.data[0] = 2;
  small.data[1] = 8;
  std::vector<Buffer> g = runKernel(suite(), find("embedding_shard_grad_2x7_5x33_12"),
                                    {small, ref::Tensor::filled({}, 3), grad});
  EXPECT_EQ(g[0].f[33], 12.0f);  // row 4: 14 ids, 2 of other shards skipped
  EXPECT_EQ(g[0].f[0], 0.0f);
}

TEST(CppEmitter, KernelTextNamesTheOpItsLocationAndShapes) {
  std::string src = emitCppKernel(suite().opOf("layer_norm_2x7x33"), "my_kernel");
  for (const char* needle :
       {"extern \"C\" void my_kernel(void** args)", "// tessel.layer_norm at loc(",
        "float* out = static_cast<float*>(args[0]);", "// out [B, T, C] = [2, 7, 33]",
        "const float* inp = static_cast<const float*>(args[1]);", "// gamma [C] = [33]",
        "constexpr int64_t C = 33;"})
    EXPECT_NE(src.find(needle), std::string::npos) << needle << " missing from\n" << src;
  std::string ce = emitCppKernel(suite().opOf("cross_entropy_grad_2x7x33"), "k");
  EXPECT_NE(ce.find("// targets [B, T] = [2, 7]"), std::string::npos) << ce;
  EXPECT_NE(ce.find("// dloss scalar"), std::string::npos) << ce;
}

// Library calls (matmul: GEMM steps) and aliases (reshape) get no kernel; attention gets its
// fused kernel; elementwise ops get one for f32 and bf16 alike.
TEST(CppEmitter, RejectsLibraryCallsAndAliasesAcceptsBf16) {
  mlir::DialectRegistry registry;
  registerTesselDialects(registry);
  mlir::MLIRContext context(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
func.func @f(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>, %qkv: tensor<2x4x24xf32>) {
  %w = tessel.param "w" {std = 2.000000e-02 : f64} : tensor<8x8xf32>
  %m = tessel.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = tessel.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %a = tessel.causal_attention %qkv heads 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %b = tessel.add %h, %h : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %g = tessel.gelu %h : tensor<4x8xbf16>
  tessel.assign "w", %w : tensor<8x8xf32>
  %ok = tessel.add %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}
)mlir",
                                                        &context);
  ASSERT_TRUE(module);
  std::vector<std::string> accepted;
  module->walk([&](mlir::Operation* op) {
    if (hasCppKernel(op)) accepted.push_back(op->getName().getStringRef().str());
  });
  EXPECT_EQ(accepted, (std::vector<std::string>{"tessel.causal_attention", "tessel.add",
                                                "tessel.gelu", "tessel.add"}));
  module->walk([&](MatmulOp op) {
    EXPECT_THROW(emitCppKernel(op, "k"), std::invalid_argument);
  });
}

// ---- the host-compiler driver ---------------------------------------------------------------

std::string uniqueCacheDir(const char* what) {
  return ::testing::TempDir() +
         fmt::format("tessel_{}_{}_{}", what, getpid(), std::random_device{}());
}

TEST(HostCompiler, SecondBuildOfTheSameSourceIsACacheHit) {
  HostCompileOptions options;
  options.cacheDir = uniqueCacheDir("cache_hit");
  std::string source = "extern \"C\" int tessel_answer() { return 42; }\n";
  KernelLibrary first = buildKernelLibrary(source, options);
  EXPECT_TRUE(first.compiled());
  KernelLibrary second = buildKernelLibrary(source, options);
  EXPECT_FALSE(second.compiled());
  EXPECT_EQ(first.path(), second.path());
  EXPECT_EQ(reinterpret_cast<int (*)()>(second.symbol("tessel_answer"))(), 42);
  EXPECT_THROW(second.symbol("no_such_kernel"), KernelLibraryError);
  std::filesystem::remove_all(options.cacheDir);
}

TEST(HostCompiler, BrokenSourceRaisesTheCompilersMessage) {
  HostCompileOptions options;
  options.cacheDir = uniqueCacheDir("broken");
  try {
    buildKernelLibrary("extern \"C\" void broken() { int x = tessel_undeclared_name; }\n",
                       options);
    ADD_FAILURE() << "a broken source compiled";
  } catch (const HostCompileError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("tessel_undeclared_name"), std::string::npos) << message;
    EXPECT_NE(message.find("error"), std::string::npos) << message;
  }
  std::filesystem::remove_all(options.cacheDir);
}

}  // namespace
}  // namespace tessel::cpptest
