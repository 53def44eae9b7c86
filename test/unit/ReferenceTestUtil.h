// Helpers shared by the reference-kernel tests (test/unit/Reference*Test.cpp).
#pragma once

#include "runtime/reference/Reference.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tessel::ref::testutil {

/// Runs fn, expects a ShapeError, and expects every needle in its message.
inline void expectShapeError(const std::function<void()>& fn,
                             const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const ShapeError& e) {
    std::string message = e.what();
    for (const std::string& needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos)
          << "message \"" << message << "\" lacks \"" << needle << "\"";
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a different exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw ShapeError";
}

/// Random inputs that differ from run to run, seeded from std::random_device, or from the
/// environment variable TESSEL_TEST_SEED to replay a failure. Every test using one starts
/// with SCOPED_TRACE(rng.trace()), so any failure prints the seed.
class Rng {
 public:
  Rng() : seed_(initialSeed()), gen_(seed_) {}

  std::string trace() const {
    return "random seed " + std::to_string(seed_) + " (replay with TESSEL_TEST_SEED=" +
           std::to_string(seed_) + ")";
  }
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(gen_);
  }
  /// An integer in [0, bound), stored as a double like every index tensor.
  double index(int64_t bound) {
    return static_cast<double>(std::uniform_int_distribution<int64_t>(0, bound - 1)(gen_));
  }
  /// Uniform values in [lo, hi).
  Tensor tensor(std::vector<int64_t> shape, double lo = -1.0, double hi = 1.0) {
    Tensor t(std::move(shape));
    for (double& v : t.data) v = uniform(lo, hi);
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

}  // namespace tessel::ref::testutil
