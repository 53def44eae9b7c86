// Shared by the native-versus-reference tests (NativeTest, NativeNormTest, NativeAttentionTest):
// a batch of random byte tokens fed to an executor and to the f64 reference interpreter, an
// executor's state as reference tensors, and the error measure of f32 kernels against f64.
#pragma once

#include "dsl/tessel.h"
#include "runtime/exec/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace tessel::test {

/// Tokens and targets [batch, seq] (i32), uniform in [0, vocab), from a fresh seed per run: the
/// comparisons hold for any tokens, so every run tries other ones.
struct RandomTokens {
  int64_t batch, seq;
  std::vector<int32_t> tokens, targets;

  RandomTokens(int64_t batch, int64_t seq, int64_t vocab = 256) : batch(batch), seq(seq) {
    std::mt19937_64 rng(std::random_device{}());
    for (int64_t i = 0; i < batch * seq; ++i) {
      tokens.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
      targets.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
    }
  }
  /// The two inputs as the reference interpreter takes them (f64 values of the indices).
  std::vector<ref::Tensor> refInputs() const {
    return {ref::Tensor({batch, seq}, std::vector<double>(tokens.begin(), tokens.end())),
            ref::Tensor({batch, seq}, std::vector<double>(targets.begin(), targets.end()))};
  }
  /// Sets inputs 0 and 1 (tokens, targets) of function `fn`.
  void feed(rt::ProgramExecutor& ex, const std::string& fn) const {
    ex.setInput(fn, 0, tokens.data(), tokens.size() * sizeof(int32_t));
    ex.setInput(fn, 1, targets.data(), targets.size() * sizeof(int32_t));
  }
};

/// The executor's parameters and optimizer state (program.state()) as f64 reference tensors,
/// by name.
inline std::map<std::string, ref::Tensor> stateOf(const Program& program, rt::Executor& ex) {
  std::map<std::string, ref::Tensor> state;
  for (const ParameterSpec& p : program.state()) {
    const float* d = ex.data(ex.bufferId(p.name));
    int64_t n = 1;
    for (int64_t s : p.shape) n *= s;
    state.emplace(p.name, ref::Tensor(p.shape, std::vector<double>(d, d + n)));
  }
  return state;
}

/// Max |a - b| / (max |b| over the tensor): a scale-aware error of f32 kernels against f64.
inline double relError(const float* a, const ref::Tensor& b) {
  double err = 0, scale = 1e-30;
  for (int64_t i = 0; i < b.numel(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b.data[i]));
    scale = std::max(scale, std::abs(b.data[i]));
  }
  return err / scale;
}

}  // namespace tessel::test
