// tessel.fused_classifier against the two kernels it replaces, cross_entropy and then
// cross_entropy_grad, on the same inputs (f32 and bf16 logits, a target out of range, rows
// of 5 to 50257 classes, enough tokens for several rows per chunk of the CUDA loss sum):
// - C++ kernels: bit for bit, loss and dlogits (the fused kernel performs the same
//   operations in the same order; only the second pass over the logits is gone).
// - CUDA kernels in the SIMT harness: dlogits bit for bit (the same block shape, block
//   reductions and formula as the cross_entropy_grad kernel); the loss within a bound
//   derived below (the cross_entropy kernel reduces a row with one warp, the fused kernel
//   with one block: the same terms in another order).
// - The fused CUDA kernel on a grid of one block gives the same bits as on its own grid
//   (its chunks are fixed by the shapes, not by the grid).
#include "test/unit/CudaKernelsTestUtil.h"

namespace tessel::cudatest {
namespace {

struct Shape {
  std::vector<int64_t> logits;
  const char* element;  // "f32" or "bf16"
  int64_t badTarget = -1;  // a token whose target is set to V (out of range), or -1
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s{
      {{1, 7}, "f32"},     {{2, 7, 33}, "f32", 3},  {{40, 300}, "f32"},   {{2, 50257}, "f32"},
      {{4500, 5}, "f32", 17},  // several tokens per chunk (SeveralTokensPerChunk...), one bad
      {{2, 7, 33}, "bf16", 5}, {{40, 300}, "bf16"},   {{3, 50257}, "bf16"},
  };
  return s;
}

std::string name(const Shape& s) {
  return fmt::format("{}_{}", fmt::join(s.logits, "x"), s.element);
}

/// Per shape, @separate_<name> (cross_entropy, cross_entropy_grad) and @fused_<name>.
std::string module() {
  std::string ir;
  for (const Shape& s : shapes()) {
    std::string l = fmt::format("tensor<{}x{}>", fmt::join(s.logits, "x"), s.element);
    std::vector<int64_t> t(s.logits.begin(), s.logits.end() - 1);
    std::string tt = fmt::format("tensor<{}xi32>", fmt::join(t, "x"));
    ir += fmt::format(
        "func.func @separate_{0}(%l: {1}, %t: {2}, %d: tensor<f32>) -> (tensor<f32>, {1}) {{\n"
        "  %loss = tessel.cross_entropy %l, %t : ({1}, {2}) -> tensor<f32>\n"
        "  %g = tessel.cross_entropy_grad %l, %t, %d : ({1}, {2}, tensor<f32>) -> {1}\n"
        "  return %loss, %g : tensor<f32>, {1}\n}}\n"
        "func.func @fused_{0}(%l: {1}, %t: {2}, %d: tensor<f32>) -> (tensor<f32>, {1}) {{\n"
        "  %loss, %g = tessel.fused_classifier %l, %t, %d : ({1}, {2}, tensor<f32>) -> "
        "(tensor<f32>, {1})\n"
        "  return %loss, %g : tensor<f32>, {1}\n}}\n",
        name(s), l, tt);
  }
  return ir;
}

struct Suite {
  Modules modules;
  std::vector<Kernel> kernels;
  KernelLibrary cpp, simt;
  /// The kernel of the op named `op` in function `func`.
  const Kernel& find(const std::string& func, const std::string& op) const {
    for (const Kernel& k : kernels)
      if (k.op->getParentOfType<mlir::func::FuncOp>().getSymName() == func &&
          k.op->getName().getStringRef() == op)
        return k;
    throw std::runtime_error("no kernel " + op + " in " + func);
  }
};

Suite& suite() {
  static Suite* s = [] {
    auto* s = new Suite;
    s->kernels = collectKernels(s->modules.parse(module()), "fc_");
    s->cpp = buildCppLibrary(s->kernels);
    s->simt = buildSimtLibrary(simtSource(cudaSource(s->kernels), s->kernels));
    return s;
  }();
  return *s;
}

/// The outputs of one way of computing (loss, dlogits).
struct Outputs {
  Buffer loss, dlogits;
};

/// Runs cross_entropy then cross_entropy_grad (`fused` false) or fused_classifier on
/// `operands` (logits, targets, dloss), through the library `lib` with symbol suffix `suffix`.
Outputs runOn(const Shape& s, bool fused, KernelLibrary& lib, const std::string& suffix,
              std::vector<Buffer>& operands) {
  Suite& su = suite();
  Outputs out;
  if (fused) {
    const Kernel& k = su.find("fused_" + name(s), "tessel.fused_classifier");
    std::vector<Buffer> r = resultBuffers(k.op);
    Scratch scratch(k);  // the CUDA kernel's last argument (the C++ one ignores it)
    run(lib.symbol(k.symbol + suffix), r, operands, scratch.data());
    return {r[0], r[1]};
  }
  const Kernel& ce = su.find("separate_" + name(s), "tessel.cross_entropy");
  const Kernel& grad = su.find("separate_" + name(s), "tessel.cross_entropy_grad");
  std::vector<Buffer> loss = resultBuffers(ce.op), dlogits = resultBuffers(grad.op);
  std::vector<Buffer> ceOperands{operands[0], operands[1]};
  Scratch ceScratch(ce), gradScratch(grad);
  run(lib.symbol(ce.symbol + suffix), loss, ceOperands, ceScratch.data());
  run(lib.symbol(grad.symbol + suffix), dlogits, operands, gradScratch.data());
  return {loss[0], dlogits[0]};
}

/// Random logits in [-1, 1) (bf16-rounded for bf16), targets in range except s.badTarget,
/// dloss 0.75 (not 1, so the scaling is exercised).
std::vector<Buffer> operandsFor(const Shape& s, std::mt19937& rng) {
  const Kernel& k = suite().find("fused_" + name(s), "tessel.fused_classifier");
  std::vector<Buffer> in = randomOperands(k.op, rng);
  if (s.badTarget >= 0) in[1].i[s.badTarget] = static_cast<int32_t>(s.logits.back());
  in[2].f[0] = 0.75f;
  return in;
}

/// Elements where exactly one side is NaN, or both are numbers and differ.
int64_t differences(const Buffer& a, const Buffer& b) {
  return compare(a, b, /*relTol=*/0).mismatches;
}

TEST(FusedClassifier, CppKernelEqualsCrossEntropyThenItsGradBitForBit) {
  std::mt19937 rng(1234);
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(name(s));
    std::vector<Buffer> in = operandsFor(s, rng);
    Outputs separate = runOn(s, false, suite().cpp, "", in);
    Outputs fused = runOn(s, true, suite().cpp, "", in);
    EXPECT_EQ(std::isnan(fused.loss.f[0]), s.badTarget >= 0);
    EXPECT_EQ(differences(fused.loss, separate.loss), 0)
        << fused.loss.f[0] << " vs " << separate.loss.f[0];
    EXPECT_EQ(differences(fused.dlogits, separate.dlogits), 0);
    if (s.badTarget >= 0) {  // the bad token's row is NaN, the next one is not
      std::vector<float> d = fused.dlogits.floats();
      int64_t v = s.logits.back();
      EXPECT_TRUE(std::isnan(d[s.badTarget * v]));
      EXPECT_FALSE(std::isnan(d[(s.badTarget + 1) * v]));
    }
  }
}

TEST(FusedClassifier, CudaKernelMatchesCrossEntropyThenItsGradInSimt) {
  std::mt19937 rng(5678);
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(name(s));
    std::vector<Buffer> in = operandsFor(s, rng);
    Outputs separate = runOn(s, false, suite().simt, "_simt", in);
    Outputs fused = runOn(s, true, suite().simt, "_simt", in);
    EXPECT_EQ(differences(fused.dlogits, separate.dlogits), 0);
    // The loss: each token's log(sum) comes from the same V terms summed in another order,
    // so the sums differ by at most V u relative and the logs by V u absolute; the last
    // roundings of log, the two additions and the f32 result add at most 4 u |loss|. The
    // mean of the token losses has the same bound.
    const double v = static_cast<double>(s.logits.back());
    const double want = separate.loss.f[0], got = fused.loss.f[0];
    if (s.badTarget >= 0) {
      EXPECT_TRUE(std::isnan(got) && std::isnan(want));
      continue;
    }
    EXPECT_NEAR(got, want, v * kU + 4 * kU * std::abs(want));
    std::printf("[ fused    ] %-18s loss %.9g (separate kernels %.9g, |diff| %.3g = %.2f u)\n",
                name(s).c_str(), got, want, std::abs(got - want), std::abs(got - want) / kU);
  }
}

TEST(FusedClassifier, CudaKernelOnOneBlockGivesTheSameBits) {
  std::mt19937 rng(91011);
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(name(s));
    std::vector<Buffer> in = operandsFor(s, rng);
    Outputs grid = runOn(s, true, suite().simt, "_simt", in);
    Outputs one = runOn(s, true, suite().simt, "_simt_one_block", in);
    EXPECT_EQ(differences(grid.loss, one.loss), 0);
    EXPECT_EQ(differences(grid.dlogits, one.dlogits), 0);
  }
}

TEST(FusedClassifier, SeveralTokensPerChunkWhenThereAreManyTokens) {
  // 4500 tokens of 5 classes exceed one block per token at 64 threads (132 x 2048 / 64 =
  // 4224 blocks), so chunks hold two tokens: the path where thread 0 adds several losses.
  const Kernel& k = suite().find("fused_4500x5_f32", "tessel.fused_classifier");
  EXPECT_NE(k.cuda.source.find("constexpr idx_t CHUNK = 2;"), std::string::npos) << k.cuda.source;
  EXPECT_EQ(k.cuda.launch.grid[0], 2250u);
}

}  // namespace
}  // namespace tessel::cudatest
