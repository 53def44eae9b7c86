// CHECK for the multi-rank test programs: a failed condition is counted on this rank and the
// first 19 are printed with the rank's number, so that every rank runs all its checks and the
// program's exit status can come from the failures summed over the ranks.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::test {
inline int failures = 0;  // failed checks on this rank
inline int W = 0;         // this rank's world rank, for the messages (main sets it)
}  // namespace tessel::test

/// CHECK(cond, printf-format, args...): counts and reports a failed `cond`.
#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      ++::tessel::test::failures;                                               \
      if (::tessel::test::failures < 20) {                                      \
        std::fprintf(stderr, "rank %d: FAILED %s: ", ::tessel::test::W, #cond); \
        std::fprintf(stderr, __VA_ARGS__);                                      \
        std::fprintf(stderr, "\n");                                             \
      }                                                                         \
    }                                                                           \
  } while (0)

namespace tessel::test {
/// Runs `f`, which must throw std::runtime_error whose message holds every one of `parts`;
/// each missing part (or no error) is a failed CHECK naming `what`.
template <typename F>
void expectThrows(F f, const std::vector<std::string>& parts, const char* what) {
  try {
    f();
    CHECK(false, "%s: no error", what);
  } catch (const std::runtime_error& e) {
    for (const std::string& part : parts)
      CHECK(std::string(e.what()).find(part) != std::string::npos, "%s: '%s' not in: %s", what, part.c_str(),
            e.what());
  }
}
}  // namespace tessel::test
