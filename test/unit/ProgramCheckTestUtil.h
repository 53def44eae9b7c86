// A gtest helper for tests of validateProgram (runtime/exec/Program.h).
#pragma once

#include "runtime/exec/Program.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tessel::test {

/// Expects validateProgram(p) to throw std::runtime_error whose message contains `message`.
inline void expectInvalid(const rt::Program& p, const std::string& message) {
  try {
    rt::validateProgram(p, "test");
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

}  // namespace tessel::test
