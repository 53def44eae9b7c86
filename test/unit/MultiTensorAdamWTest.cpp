// Multi-tensor AdamW (codegen/MultiTensorAdamW.h): the small GPT (L=2, C=64, NH=4, T=32, B=4)
// lowered with it updates every parameter and both moments in place by one kernel, with no
// copies afterwards, and trains bit for bit as the per-parameter fused kernels followed by
// copies (LoweringOptions::multiTensorAdamW = false, today's form); its CUDA twin gives the
// C++ kernel's bits on the SIMT harness.
#include "test/unit/CudaKernelsTestUtil.h"

#include "codegen/MultiTensorAdamW.h"
#include "examples/gpt/model.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Loop.h"
#include "test/support/SmallGpt.h"

#include <cstring>
#include <random>

namespace tessel::cudatest {
namespace {

rt::Program lowerSmallGpt(bool cuda, bool multiTensor) {
  gpt::GPT model(test::smallGpt());
  gpt::build(model, test::kSmallGptBatch);
  return model.compile().lower(cuda, multiTensor);
}

const rt::Function& trainStep(const rt::Program& p) {
  for (const rt::Function& f : p.functions)
    if (f.name == "train_step") return f;
  throw std::runtime_error("no train_step");
}

bool persistent(const rt::Program& p, int id) {
  rt::BufferKind k = p.buffers[static_cast<size_t>(id)].kind;
  return k == rt::BufferKind::Parameter || k == rt::BufferKind::State;
}

struct Counts {
  int multiTensor = 0, perParameter = 0, copiesIntoPersistent = 0;
};

Counts count(const rt::Program& p) {
  Counts c;
  for (const rt::Step& s : trainStep(p).steps) {
    if (auto* k = std::get_if<rt::KernelStep>(&s)) {
      c.multiTensor += k->symbol.ends_with("_multi_tensor_adamw");
      c.perParameter += k->symbol.find("adamw") != std::string::npos && !k->symbol.ends_with("_multi_tensor_adamw");
    } else if (auto* copy = std::get_if<rt::CopyStep>(&s)) {
      c.copiesIntoPersistent += persistent(p, copy->dst);
    }
  }
  return c;
}

TEST(MultiTensorAdamW, GptUpdatesEveryParameterInPlaceWithOneKernelAndNoCopies) {
  rt::Program before = lowerSmallGpt(false, false), after = lowerSmallGpt(false, true);
  int parameters = 0;
  for (const rt::Buffer& b : after.buffers) parameters += b.kind == rt::BufferKind::Parameter;
  Counts was = count(before), is = count(after);
  // Today's form: one fused clip-and-update kernel per parameter, three copies each.
  EXPECT_EQ(was.perParameter, parameters);
  EXPECT_EQ(was.copiesIntoPersistent, 3 * parameters);
  EXPECT_EQ(was.multiTensor, 0);
  EXPECT_EQ(is.multiTensor, 1);
  EXPECT_EQ(is.perParameter, 0);
  EXPECT_EQ(is.copiesIntoPersistent, 0);
  EXPECT_EQ(trainStep(after).steps.size() + 4 * parameters - 1, trainStep(before).steps.size());
  // Its arguments: each parameter with its two moments (written), then the gradients, then
  // the 7 scalars.
  for (const rt::Step& s : trainStep(after).steps) {
    auto* k = std::get_if<rt::KernelStep>(&s);
    if (!k || !k->symbol.ends_with("_multi_tensor_adamw")) continue;
    ASSERT_EQ(k->args.size(), 4u * parameters + 7);
    for (int i = 0; i < parameters; ++i) {
      const std::string& name = after.buffers[k->args[3 * i]].name;
      EXPECT_EQ(after.buffers[k->args[3 * i]].kind, rt::BufferKind::Parameter) << name;
      EXPECT_EQ(after.buffers[k->args[3 * i + 1]].name, name + ":exp_avg");
      EXPECT_EQ(after.buffers[k->args[3 * i + 2]].name, name + ":exp_avg_sq");
      EXPECT_EQ(after.buffers[k->args[3 * parameters + i]].kind, rt::BufferKind::Temp) << "the gradient of " << name;
    }
  }
}

/// Trains `program` on the C++ kernels compiled as Tessel compiles them (-O3 -march=native,
/// the compiler's default FMA contraction): the step statistics and every parameter and
/// state buffer's bits by name.
std::pair<std::vector<trainer::StepStats>, std::map<std::string, std::vector<uint32_t>>> train(
    const rt::Program& program, int64_t steps) {
  HostCompileOptions o;
  o.cacheDir = ::testing::TempDir() + "tessel_multi_tensor_adamw";
  KernelLibrary lib = buildKernelLibrary(program.kernelSource, o);
  rt::Executor ex(program, [&](const std::string& s) { return lib.symbol(s); });
  std::vector<trainer::StepStats> stats = test::trainSmallGpt(ex, steps);
  std::map<std::string, std::vector<uint32_t>> bits;
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    if (!persistent(program, static_cast<int>(id))) continue;
    std::vector<uint32_t>& b = bits[program.buffers[id].name];
    b.resize(static_cast<size_t>(program.buffers[id].numel()));
    ex.readBuffer(static_cast<int>(id), b.data());
  }
  return {stats, bits};
}

TEST(MultiTensorAdamW, GptTrainingIsBitwiseThatOfThePerParameterKernels) {
  const int64_t steps = 4;
  auto [want, wantBits] = train(lowerSmallGpt(false, false), steps);
  auto [got, gotBits] = train(lowerSmallGpt(false, true), steps);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s) {
    EXPECT_EQ(got[s].loss, want[s].loss) << "step " << s + 1;  // exact: the same operations
    EXPECT_EQ(got[s].gradNorm, want[s].gradNorm) << "step " << s + 1;
  }
  EXPECT_EQ(got.back().valLoss, want.back().valLoss);
  ASSERT_EQ(gotBits.size(), wantBits.size());
  for (const auto& [name, bits] : wantBits) EXPECT_EQ(gotBits[name], bits) << name;
}

/// Random f32 values in [lo, hi).
std::vector<float> randoms(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(MultiTensorAdamW, CudaKernelGivesTheCppKernelsBitsOnTheSimtHarness) {
  // Sizes: one element, under one block's chunk (1024), exactly one, one over, several
  // chunks with a ragged end; decay on and off.
  std::vector<AdamWUpdate> updates(5);
  const int64_t sizes[5] = {1, 1000, 1024, 1025, 5000};
  for (size_t k = 0; k < updates.size(); ++k) {
    updates[k].numel = sizes[k];
    updates[k].decay = k % 2 == 0;
  }
  const std::string cpp = emitMultiTensorAdamWCpp(updates, "mt_adamw");
  const CudaKernel cuda = emitMultiTensorAdamWCuda(updates, "mt_adamw");
  const size_t nargs = 4 * updates.size() + 7;
  std::string simt = fmt::format(
      "#include \"test/simt/Simt.h\"\n#include <cstddef>\n#include <utility>\n"
      "template <typename... P, std::size_t... I>\n"
      "static void tessel_simt_call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {{\n"
      "  kernel(static_cast<P>(args[I])...);\n}}\n{0}{1}\n"
      "extern \"C\" void mt_adamw_simt(void** args) {{\n"
      "  simt::launch(dim3({2}, 1, 1), dim3({3}, 1, 1), [&] {{\n"
      "    tessel_simt_call(mt_adamw, args, std::make_index_sequence<{4}>{{}});\n  }});\n}}\n",
      cudaKernelPreamble(), cuda.source, cuda.launch.grid[0], cuda.launch.block[0], nargs);
  simt += "\n// ---- the harness (test/simt/Simt.cpp) ----\n" +
          readFile(std::string(TESSEL_SOURCE_DIR) + "/test/simt/Simt.cpp");
  KernelLibrary onSimt = buildSimtLibrary(simt);
  HostCompileOptions o;
  o.flags.push_back("-ffp-contract=off");  // as the SIMT build: both round every operation
  o.cacheDir = ::testing::TempDir() + "tessel_multi_tensor_adamw_cpp";
  KernelLibrary onCpu = buildKernelLibrary(cppKernelPreamble() + cpp, o);
  for (float step : {1.0f, 7.0f}) {
    std::mt19937 rng(static_cast<unsigned>(step));
    // Per update: param, exp_avg, exp_avg_sq (written), gradient; then the scalars.
    std::vector<std::vector<float>> data;
    for (const AdamWUpdate& u : updates) {
      const auto n = static_cast<size_t>(u.numel);
      data.push_back(randoms(n, -1, 1, rng));
      data.push_back(randoms(n, -0.1f, 0.1f, rng));
      data.push_back(randoms(n, 0, 0.01f, rng));  // second moments are non-negative
    }
    for (const AdamWUpdate& u : updates) data.push_back(randoms(static_cast<size_t>(u.numel), -2, 2, rng));
    for (float s : {0.7f, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step}) data.push_back({s});  // coef, lr, b1, b2, eps, wd, t
    std::vector<std::vector<float>> simtData = data;
    std::vector<void*> a, b;
    for (size_t i = 0; i < nargs; ++i) {
      a.push_back(data[i].data());
      b.push_back(simtData[i].data());
    }
    reinterpret_cast<void (*)(void**)>(onCpu.symbol("mt_adamw"))(a.data());
    reinterpret_cast<void (*)(void**)>(onSimt.symbol("mt_adamw_simt"))(b.data());
    for (size_t i = 0; i < 3 * updates.size(); ++i) {
      ASSERT_EQ(std::memcmp(data[i].data(), simtData[i].data(), data[i].size() * sizeof(float)), 0)
          << "update " << i / 3 << " slot " << i % 3 << " at step " << step;
    }
  }
}

}  // namespace
}  // namespace tessel::cudatest
