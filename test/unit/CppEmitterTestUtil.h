// The harness of CppEmitterTest.cpp: test cases are one-op MLIR functions; every case's kernel
// goes into one source that is host-compiled once per test binary (and cached on disk, so the
// other test processes of a ctest run reuse it); each case runs on random inputs and is
// compared with the f64 reference kernels through the reference interpreter.
#pragma once

#include "codegen/CppEmitter.h"
#include "codegen/HostCompiler.h"
#include "compiler/Interpreter.h"
#include "compiler/TesselDialect.h"
#include "test/unit/ReferenceTestUtil.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace tessel::cpptest {

using Shape = std::vector<int64_t>;
/// 2^-24: the unit roundoff of f32 (half an ulp of 1).
constexpr double kU = 1.0 / (1 << 24);

/// Accepted error of one result: |got - want| <= rel * |want| + abs * S, where S is 1
/// (kAbsolute), max|want| over the result (kMax), or the element's magnitude from the case's
/// `magnitude` function (kMagnitude: typically sum |terms| of the sum that gives it).
enum Scale { kAbsolute, kMax, kMagnitude };
struct Tol {
  double rel = 0.0, abs = 0.0;
  Scale scale = kAbsolute;
};

/// Per result, a tensor of the shape of the result: each element's magnitude (see Tol).
using MagnitudeFn = std::function<std::vector<ref::Tensor>(const std::vector<ref::Tensor>&)>;

inline ref::Tensor absOf(ref::Tensor t) {
  for (double& v : t.data) v = std::abs(v);
  return t;
}

/// One function argument: f32 values uniform in [lo, hi) (exactly lo if lo == hi), or i32
/// indices uniform in [0, hi).
struct Arg {
  Shape shape;
  double lo = -1.0, hi = 1.0;
  bool i32 = false;
};

struct Case {
  std::string name;  // the function's name; the kernel is "k_" + name
  std::string mlir;  // func.func @name: one tessel op %r on %a0, %a1, ..., returning its results
  std::vector<Arg> args;
  std::vector<Tol> tols;  // one per result, or one for all
  MagnitudeFn magnitude = {};
};

/// "tensor<4x32xf32>", "tensor<f32>".
inline std::string ty(const Shape& s, const char* element = "f32") {
  std::string dims;
  for (int64_t d : s) dims += fmt::format("{}x", d);
  return fmt::format("tensor<{}{}>", dims, element);
}

/// "4x32", "s" for a scalar: for case names.
inline std::string nameOf(const Shape& s) {
  if (s.empty()) return "s";
  return fmt::format("{}", fmt::join(s, "x"));
}

/// A case whose op line defines %r from %a0, %a1, ...; `results` are the result types.
inline Case makeCase(std::string name, std::vector<Arg> args, const std::string& opLine,
                     const std::vector<std::string>& results, std::vector<Tol> tols) {
  std::vector<std::string> params;
  for (size_t i = 0; i < args.size(); ++i)
    params.push_back(fmt::format("%a{}: {}", i, ty(args[i].shape, args[i].i32 ? "i32" : "f32")));
  std::vector<std::string> values;
  for (size_t i = 0; i < results.size(); ++i)
    values.push_back(results.size() == 1 ? "%r" : fmt::format("%r#{}", i));
  std::string text = fmt::format(
      "func.func @{}({}) -> ({}) {{\n  {}\n  return {} : {}\n}}\n", name,
      fmt::join(params, ", "), fmt::join(results, ", "), opLine, fmt::join(values, ", "),
      fmt::join(results, ", "));
  return Case{std::move(name), std::move(text), std::move(args), std::move(tols)};
}

/// A buffer of one argument, f32 or i32.
struct Buffer {
  std::vector<float> f;
  std::vector<int32_t> i;
  void* data() { return f.empty() ? static_cast<void*>(i.data()) : f.data(); }
};

inline Buffer bufferFor(mlir::Value v) {
  auto type = mlir::cast<mlir::RankedTensorType>(v.getType());
  size_t n = static_cast<size_t>(type.getNumElements());
  Buffer b;
  // Outputs start as NaN (or a sentinel), so an element the kernel never writes is caught.
  if (type.getElementType().isInteger(32))
    b.i.assign(n + 1, -77);
  else
    b.f.assign(n + 1, NAN);
  return b;
}

inline Shape shapeOf(mlir::Value v) {
  auto s = mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
  return {s.begin(), s.end()};
}

/// Every case compiled once: the parsed module, the library, and the case list.
class Suite {
 public:
  explicit Suite(std::vector<Case> cases) : cases_(std::move(cases)) {
    tessel::registerTesselDialects(registry_);
    context_ = std::make_unique<mlir::MLIRContext>(registry_);
    std::string text;
    for (const Case& c : cases_) text += c.mlir;
    module_ = mlir::parseSourceString<mlir::ModuleOp>(text, context_.get());
    if (!module_) throw std::runtime_error("the test cases do not parse");
    std::string source = cppKernelPreamble();
    for (const Case& c : cases_) source += "\n" + emitCppKernel(opOf(c.name), "k_" + c.name);
    source_ = source;
    HostCompileOptions options;
    options.cacheDir = ::testing::TempDir() + "tessel_codegen_test_kernels";
    library_ = buildKernelLibrary(source, options);
  }

  mlir::func::FuncOp func(const std::string& name) {
    return module_->lookupSymbol<mlir::func::FuncOp>(name);
  }
  /// The one tessel op of case `name`.
  mlir::Operation* opOf(const std::string& name) { return &func(name).getBody().front().front(); }
  const std::vector<Case>& cases() const { return cases_; }
  const KernelLibrary& library() const { return library_; }
  const std::string& source() const { return source_; }

 private:
  std::vector<Case> cases_;
  mlir::DialectRegistry registry_;
  std::unique_ptr<mlir::MLIRContext> context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  KernelLibrary library_;
  std::string source_;
};

/// Random inputs of a case, as reference tensors (f32 values rounded to float first).
inline std::vector<ref::Tensor> randomInputs(const Case& c, ref::testutil::Rng& rng) {
  std::vector<ref::Tensor> inputs;
  for (const Arg& a : c.args) {
    ref::Tensor t(a.shape);
    for (double& v : t.data)
      v = a.i32 ? rng.index(static_cast<int64_t>(a.hi))
                : static_cast<float>(a.lo == a.hi ? a.lo : rng.uniform(a.lo, a.hi));
    inputs.push_back(std::move(t));
  }
  return inputs;
}

/// Runs the kernel of case `c` on `inputs`; returns its results.
inline std::vector<Buffer> runKernel(Suite& suite, const Case& c,
                                     const std::vector<ref::Tensor>& inputs) {
  mlir::Operation* op = suite.opOf(c.name);
  std::vector<Buffer> results, operands;
  std::vector<void*> args;
  for (mlir::Value v : op->getResults()) results.push_back(bufferFor(v));
  for (mlir::Value v : op->getOperands()) {
    const ref::Tensor& t = inputs.at(mlir::cast<mlir::BlockArgument>(v).getArgNumber());
    Buffer b = bufferFor(v);
    for (size_t k = 0; k < t.data.size(); ++k) {
      if (b.f.empty())
        b.i[k] = static_cast<int32_t>(t.data[k]);
      else
        b.f[k] = static_cast<float>(t.data[k]);
    }
    operands.push_back(std::move(b));
  }
  for (Buffer& b : results) args.push_back(b.data());
  for (Buffer& b : operands) args.push_back(b.data());
  auto kernel = reinterpret_cast<void (*)(void**)>(suite.library().symbol("k_" + c.name));
  kernel(args.data());
  return results;
}

/// Runs case `c` on `inputs` and checks every result against the reference. Prints the
/// largest error and the fraction of the tolerance it used.
inline void checkCaseOn(Suite& suite, const Case& c, const std::vector<ref::Tensor>& inputs) {
  SCOPED_TRACE(c.name);
  std::vector<ref::Tensor> want = interpret(suite.func(c.name), {}, inputs);
  std::vector<Buffer> got = runKernel(suite, c, inputs);
  ASSERT_EQ(want.size(), got.size());
  std::vector<ref::Tensor> magnitude = c.magnitude ? c.magnitude(inputs) : want;
  for (size_t r = 0; r < want.size(); ++r) {
    const Tol& tol = c.tols.at(c.tols.size() == 1 ? 0 : r);
    double maxWant = 0.0, maxErr = 0.0, used = 0.0;
    for (double v : want[r].data) maxWant = std::max(maxWant, std::abs(v));
    int failures = 0;
    for (size_t k = 0; k < want[r].data.size(); ++k) {
      double g = got[r].f.empty() ? got[r].i[k] : got[r].f[k], w = want[r].data[k];
      double scale = tol.scale == kAbsolute ? 1.0
                     : tol.scale == kMax    ? maxWant
                                            : magnitude.at(r).data.at(k);
      double bound = tol.rel * std::abs(w) + tol.abs * scale;
      double err = std::abs(g - w);
      bool ok = g == w || err <= bound || (std::isnan(g) && std::isnan(w));
      if (std::isfinite(err)) {
        maxErr = std::max(maxErr, err);
        if (bound > 0) used = std::max(used, err / bound);
      }
      if (!ok && ++failures <= 5)
        ADD_FAILURE() << "result " << r << " element " << k << ": got " << g << ", want " << w
                      << " (error " << err << " > tolerance " << bound << ")";
    }
    EXPECT_EQ(failures, 0) << "result " << r << ": " << failures << " elements out of tolerance";
    std::printf("[ max err  ] %-40s result %zu: abs %.3g (max |want| %.3g), %.0f%% of tolerance\n",
                c.name.c_str(), r, maxErr, maxWant, 100.0 * used);
  }
}

inline void checkCase(Suite& suite, const Case& c, ref::testutil::Rng& rng) {
  checkCaseOn(suite, c, randomInputs(c, rng));
}

}  // namespace tessel::cpptest
