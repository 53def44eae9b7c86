// A plan's errors: errorOf, and the compile-time errors on the example GPT, for the tests of
// plan calls that are checked against the model (checkpoint(), fully_shard's units).
#pragma once

#include "dsl/tessel.h"
#include "examples/gpt/model.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace tessel::testing {

/// Runs `body`, expects a ModelError, and returns it (its what() and diagnostic()); a
/// test failure and nullopt when nothing is thrown.
template <typename F>
std::optional<ModelError> errorOf(F&& body) {
  try {
    body();
  } catch (const ModelError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a tessel::ModelError";
  return std::nullopt;
}

/// Compiles a one-block GPT (C = 16, NH = 2, T = 8, V = 256, batch 2) under `plan`,
/// expecting a ModelError at `file`:`line` whose text contains `text`.
inline void expectGptPlanError(const Plan& plan, const char* file, int line, const std::string& text) {
  gpt::GPT model(gpt::Config{1, 16, 2, 8, 256});
  gpt::build(model, 2);
  try {
    model.compile({.plan = plan});
    ADD_FAILURE() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_EQ(e.diagnostic().file, file) << e.what();
    EXPECT_EQ(e.diagnostic().line, line) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace tessel::testing
