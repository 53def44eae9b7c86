// CHECK for the multi-rank test programs: a failed condition is counted on this rank and the
// first 19 are printed with the rank's number, so that every rank runs all its checks and the
// program's exit status can come from the failures summed over the ranks.
#pragma once

#include <cstdio>

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
