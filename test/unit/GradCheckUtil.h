// The harness of GradCheckTest.cpp: builds a small model, compiles it with
// `optimizer = "none"` (so @train_step returns the loss and every gradient), draws N(0, 1)
// parameters, and compares each autodiff gradient with central finite differences of the
// forward function, both evaluated by the f64 reference interpreter.
//
// The random cotangent. A case hands setLoss() the op outputs y_k it wants checked; the
// loss becomes L = sum_k reduce_sum(y_k * R_k) with every R_k a fresh N(0, 1) input, so
// dL/dy_k = R_k is a random cotangent and the check covers the full vector-Jacobian
// product, not one fixed direction. The y_k are also extra outputs of @forward, so the
// finite difference can be formed output by output (see kTol in GradCheckTest.cpp).
#pragma once

#include "dsl/tessel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace gradcheck {

namespace ref = tessel::ref;
using tessel::Shape;
using tessel::Tensor;
using Params = std::map<std::string, ref::Tensor>;

/// Relative finite-difference step: h = kStep * max(1, |x|).
constexpr double kStep = 1e-6;
/// Parameters with at most this many elements are checked at every element; larger ones at
/// kSample random elements (always including the first and the last).
constexpr int64_t kFullCheck = 128;
constexpr int64_t kSample = 24;

/// Random values that differ from run to run, seeded from std::random_device, or from the
/// environment variable TESSEL_TEST_SEED to replay a failure. Every test starts with
/// SCOPED_TRACE(rng.trace()), so any failure prints the seed.
class Rng {
 public:
  Rng() : seed_(initialSeed()), gen_(seed_) {}
  std::string trace() const {
    return "random seed " + std::to_string(seed_) + " (replay with TESSEL_TEST_SEED=" +
           std::to_string(seed_) + ")";
  }
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(gen_); }
  int64_t below(int64_t bound) {
    return std::uniform_int_distribution<int64_t>(0, bound - 1)(gen_);
  }
  /// N(0, 1) values of the given shape.
  ref::Tensor tensor(const Shape& shape) {
    ref::Tensor t(shape);
    for (double& v : t.data) v = normal();
    return t;
  }

 private:
  static unsigned long initialSeed() {
    if (const char* fixed = std::getenv("TESSEL_TEST_SEED")) return std::stoul(fixed);
    return std::random_device{}();
  }
  unsigned long seed_;
  std::mt19937_64 gen_;
};

/// A model whose parameters a test declares inline (declare_parameter is protected).
class GradModel : public tessel::Model {
 public:
  explicit GradModel(std::string name = "forward", tessel::Loc loc = tessel::Loc::current())
      : tessel::Model(std::move(name), loc) {}
  Tensor param(const std::string& name, Shape shape, tessel::Loc loc = tessel::Loc::current()) {
    declare_parameter(name, std::move(shape), tessel::Init::Normal, 1.0, loc);
    return parameter(name, loc);
  }
};

/// The largest |autodiff - finite difference| / max(1, |finite difference|) seen, and where.
struct Worst {
  double error = 0.0;
  std::string where;
  int64_t compared = 0;
  void merge(const Worst& o) {
    if (o.error >= error) {
      error = o.error;
      where = o.where;
    }
    compared += o.compared;
  }
};

/// Evaluates what the finite difference is taken of: a vector v(params) whose change is
/// dotted with fixed weights w, i.e. fd = sum_j w_j (v_j(x + h) - v_j(x - h)) / 2h.
struct Probe {
  std::function<std::vector<double>(const Params&)> values;
  std::vector<double> weights;
};

/// Compares grads[i], the autodiff gradient of parameter names[i], with central differences
/// of `probe` at every element (or a random sample of the big ones); fails a gtest
/// expectation where the error exceeds `tol`.
inline Worst compareWithFiniteDifferences(const Params& at, const std::vector<std::string>& names,
                                          const std::vector<ref::Tensor>& grads,
                                          const Probe& probe, double tol, Rng& rng) {
  Worst worst;
  Params work = at;
  for (size_t i = 0; i < names.size(); ++i) {
    ref::Tensor& x = work.at(names[i]);
    const ref::Tensor& g = grads.at(i);
    EXPECT_EQ(g.shape, x.shape) << "gradient of '" << names[i] << "' has the wrong shape";
    if (g.shape != x.shape) continue;
    std::vector<int64_t> elements;
    if (x.numel() <= kFullCheck) {
      for (int64_t e = 0; e < x.numel(); ++e) elements.push_back(e);
    } else {
      elements = {0, x.numel() - 1};
      while (static_cast<int64_t>(elements.size()) < kSample) {
        int64_t e = rng.below(x.numel());
        if (std::find(elements.begin(), elements.end(), e) == elements.end())
          elements.push_back(e);
      }
    }
    for (int64_t e : elements) {
      double original = x.data[e];
      double h = kStep * std::max(1.0, std::abs(original));
      x.data[e] = original + h;
      std::vector<double> plus = probe.values(work);
      double hi = x.data[e];
      x.data[e] = original - h;
      std::vector<double> minus = probe.values(work);
      double width = hi - x.data[e];  // the step actually taken, after rounding
      x.data[e] = original;
      double acc = 0.0;
      for (size_t j = 0; j < probe.weights.size(); ++j)
        acc += probe.weights[j] * (plus[j] - minus[j]);
      double fd = acc / width;
      double error = std::abs(g.data[e] - fd) / std::max(1.0, std::abs(fd));
      EXPECT_LE(error, tol) << "d loss / d " << names[i] << "[" << e << "]: autodiff "
                            << g.data[e] << ", finite difference " << fd;
      ++worst.compared;
      if (error >= worst.error) {
        worst.error = error;
        worst.where = names[i] + "[" + std::to_string(e) + "]";
      }
    }
  }
  return worst;
}

/// Draws N(0, 1) values for every parameter the program trains.
inline Params randomParameters(const tessel::Program& program, Rng& rng) {
  Params params;
  for (const tessel::ParameterSpec& spec : program.state()) params[spec.name] = rng.tensor(spec.shape);
  return params;
}

/// Runs @train_step once and returns its gradients in program.state() order, after checking
/// that it returns the loss @forward computes.
inline std::vector<ref::Tensor> autodiffGradients(const tessel::Program& program,
                                                  const Params& params,
                                                  const std::vector<ref::Tensor>& inputs) {
  Params state = params;
  std::vector<ref::Tensor> out = program.train_step_reference(state, inputs);
  EXPECT_EQ(out.size(), program.state().size() + 1) << "expected the loss and one gradient "
                                                       "per parameter";
  double forwardLoss = program.run_reference(params, inputs).at(0).data.at(0);
  // The same ops on the same values in the same order: equal up to nothing but identity.
  EXPECT_DOUBLE_EQ(out.at(0).data.at(0), forwardLoss);
  out.erase(out.begin());
  return out;
}

/// One gradient check of a model built by the test (a GradModel, or any tessel::Model such
/// as gpt::GPT). Typical use:
///
///   GradCase c(rng);
///   Tensor w = c.param("w", {7, 33});
///   c.setLoss({tessel::gelu(w)});
///   c.check("gelu 7x33");
template <typename M = GradModel>
class GradCase {
 public:
  template <typename... Args>
  explicit GradCase(Rng& rng, Args&&... modelArgs)
      : rng_(rng), model_(std::forward<Args>(modelArgs)...) {}

  M& model() { return model_; }
  Tensor param(const std::string& name, Shape shape, tessel::Loc loc = tessel::Loc::current()) {
    return model_.param(name, std::move(shape), loc);
  }
  /// An f32 input with N(0, 1) values.
  Tensor input(const Shape& shape) {
    inputs_.push_back(rng_.tensor(shape));
    return model_.input("x" + std::to_string(inputs_.size()), shape);
  }
  /// An i32 input holding `values` (indices or targets).
  Tensor indices(const Shape& shape, std::vector<double> values) {
    inputs_.emplace_back(shape, std::move(values));
    return model_.input("i" + std::to_string(inputs_.size()), shape, tessel::DType::I32);
  }
  /// Random indices in [0, bound) with at least one repeat when there are two or more.
  Tensor randomIndices(const Shape& shape, int64_t bound) {
    ref::Tensor t(shape);
    for (double& v : t.data) v = static_cast<double>(rng_.below(bound));
    if (t.numel() >= 2) t.data[1] = t.data[0];
    return indices(shape, t.data);
  }
  /// Changes a parameter's random values before the check (e.g. relu inputs away from 0).
  void adjust(const std::string& name, std::function<void(ref::Tensor&)> fn) {
    adjust_[name] = std::move(fn);
  }
  /// loss = sum_k reduce_sum(ys[k] * R_k) + sum of `plain`, each R_k a fresh N(0, 1) input
  /// and each `plain` term an f32 scalar; every y_k and plain term is also an output, so the
  /// finite differences can be taken output by output.
  void setLoss(const std::vector<Tensor>& ys, const std::vector<Tensor>& plain = {}) {
    Tensor loss;
    for (size_t k = 0; k < ys.size(); ++k) {
      Tensor r = input(ys[k].shape());
      weights_.insert(weights_.end(), inputs_.back().data.begin(), inputs_.back().data.end());
      std::vector<int64_t> all(static_cast<size_t>(ys[k].rank()));
      for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
      Tensor term = tessel::reduce_sum(ys[k] * r, all);
      loss = loss.valid() ? loss + term : term;
      probeOutputs_.push_back("y" + std::to_string(k));
      model_.add_output(probeOutputs_.back(), ys[k]);
    }
    for (size_t k = 0; k < plain.size(); ++k) {
      loss = loss.valid() ? loss + plain[k] : plain[k];
      weights_.push_back(1.0);
      probeOutputs_.push_back("plain" + std::to_string(k));
      model_.add_output(probeOutputs_.back(), plain[k]);
    }
    model_.set_loss(loss);
  }

  /// Compile with tessel-decompose-attention (attention as primitives) instead of the fused
  /// attention ops and their VJPs; set before compile() or check().
  bool decomposeAttention = false;

  /// Compiles the model (check() does it when the test has not).
  const tessel::Program& compile() {
    if (!program_)
      program_.emplace(model_.compile({.optimizer = "none", .decompose_attention = decomposeAttention}));
    return *program_;
  }

  /// Draws parameters, checks every gradient, prints and returns the worst error.
  Worst check(const std::string& label, double tol) {
    const tessel::Program& program = compile();
    Params params = randomParameters(program, rng_);
    for (auto& [name, fn] : adjust_) fn(params.at(name));
    grads_ = autodiffGradients(program, params, inputs_);
    std::vector<std::string> names;
    for (const tessel::ParameterSpec& spec : program.state()) names.push_back(spec.name);
    // The outputs y0, y1, ..., plain0, ... weighted by R_k and by 1 (other outputs the
    // test added itself are not part of the loss).
    std::vector<size_t> positions;
    for (const std::string& name : probeOutputs_) {
      auto it = std::find(program.outputs().begin(), program.outputs().end(), name);
      positions.push_back(static_cast<size_t>(it - program.outputs().begin()));
    }
    Probe probe;
    probe.weights = weights_;
    probe.values = [&](const Params& p) {
      std::vector<ref::Tensor> out = program.run_reference(p, inputs_);
      std::vector<double> v;
      for (size_t k : positions) v.insert(v.end(), out.at(k).data.begin(), out.at(k).data.end());
      return v;
    };
    Worst worst = compareWithFiniteDifferences(params, names, grads_, probe, tol, rng_);
    std::printf("[ gradcheck ] %-48s %5lld elements, worst relative error %.2e at %s\n",
                label.c_str(), static_cast<long long>(worst.compared), worst.error,
                worst.where.c_str());
    return worst;
  }

  /// The autodiff gradients of the last check(), in program.state() order.
  const std::vector<ref::Tensor>& gradients() const { return grads_; }

 private:
  Rng& rng_;
  M model_;
  std::vector<ref::Tensor> inputs_;
  std::vector<double> weights_;
  std::vector<std::string> probeOutputs_;  // names of the outputs the loss is built from
  std::optional<tessel::Program> program_;
  std::vector<ref::Tensor> grads_;
  std::map<std::string, std::function<void(ref::Tensor&)>> adjust_;
};

/// A shape as the cases' names print it: "3x33", or "scalar" for rank 0.
inline std::string str(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "scalar" : out;
}

/// The check of an elementwise activation `op` (gelu, silu, ...) on shapes from one element
/// to several rows, inputs spread to |x| ~ 4 so that both tails and the bend are probed.
template <typename Op>
void checkActivation(Rng& rng, const std::string& name, Op op, double tol) {
  for (Shape s : {Shape{1}, Shape{7}, Shape{33}, Shape{3, 33}}) {
    GradCase c(rng);
    Tensor x = c.param("x", s);
    c.adjust("x", [](ref::Tensor& t) { for (double& v : t.data) v *= 2.0; });  // reach |x| ~ 4
    c.setLoss({op(x)});
    c.check(name + " " + str(s), tol);
  }
}

}  // namespace gradcheck
