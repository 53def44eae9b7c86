// `tessel memory`'s formula mode (runtime/tools/tessel/ZeroMemory.h): the ZeRO table against
// the model-state bytes summed here from their parts, the paper's own example (Figure 1), and
// the memory sizes --device-memory reads.
#include "runtime/tools/tessel/ZeroMemory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace tessel::cli {
namespace {

/// Per-GPU bytes summed from the three model states, each either whole (replicated) or split
/// N ways: bf16 parameters and gradients 2 bytes each, fp32 Adam master weights, momentum and
/// variance 4 bytes each. Stage s shards the optimizer state from 1, gradients from 2,
/// parameters from 3.
double bytesFromParts(int stage, double psi, double n) {
  const double params = 2 * psi, grads = 2 * psi, adam = (4 + 4 + 4) * psi;
  return (stage >= 3 ? params / n : params) + (stage >= 2 ? grads / n : grads) + (stage >= 1 ? adam / n : adam);
}

TEST(ZeroMemoryTest, TableMatchesTheStatesSummedFromTheirParts) {
  for (double psi : {1.0, 124e6, 7.5e9, 70e9, 1e12})
    for (int64_t n : {1, 2, 3, 8, 64, 1000}) {
      const std::vector<ZeroStageMemory> rows = zeroMemoryTable(psi, n);
      ASSERT_EQ(rows.size(), 4u);
      for (int s = 0; s < 4; ++s) {
        EXPECT_EQ(rows[static_cast<size_t>(s)].stage, s);
        // Relative 1e-15: the two sums round differently in the last bit of a double (5 adds
        // and divides, each within 2^-53 ~ 1.1e-16); any wrong coefficient moves it by > 1/16.
        const double want = bytesFromParts(s, psi, static_cast<double>(n));
        EXPECT_NEAR(rows[static_cast<size_t>(s)].bytes, want, 1e-15 * want) << "stage " << s << " Ψ " << psi << " N " << n;
        EXPECT_EQ(zeroBytesPerGpu(s, psi, n), rows[static_cast<size_t>(s)].bytes);
      }
      // With one GPU nothing is sharded: every stage is the baseline.
      if (n == 1) {
        for (const ZeroStageMemory& r : rows) EXPECT_DOUBLE_EQ(r.bytes, rows[0].bytes);
      }
    }
}

TEST(ZeroMemoryTest, ReproducesThePapersFigure1Example) {
  // Figure 1: Ψ = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB and 1.9 GB per device (the
  // paper rounds to 0.1 GB, GB = 10^9 bytes).
  const std::vector<ZeroStageMemory> rows = zeroMemoryTable(7.5e9, 64);
  const double paper[] = {120.0, 31.4, 16.6, 1.9};
  for (size_t s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(std::round(rows[s].bytes / 1e8) / 10, paper[s]) << "stage " << s;
  // Unrounded, exactly (Ψ / 64 is a whole number of bytes here): 16Ψ, 4Ψ + 12Ψ/64, ...
  EXPECT_EQ(rows[0].bytes, 120e9);
  EXPECT_EQ(rows[1].bytes, 31.40625e9);
  EXPECT_EQ(rows[2].bytes, 16.640625e9);
  EXPECT_EQ(rows[3].bytes, 1.875e9);
  EXPECT_EQ(rows[1].formula, "4Ψ + 12Ψ/N");
}

TEST(ZeroMemoryTest, BadInputIsRefusedNamingTheValue) {
  for (double psi : {0.0, -1.0, double(NAN), double(INFINITY)}) EXPECT_THROW(zeroBytesPerGpu(0, psi, 8), std::invalid_argument);
  for (int64_t n : {0, -1}) EXPECT_THROW(zeroBytesPerGpu(3, 1e9, n), std::invalid_argument);
  for (int s : {-1, 4}) {
    try {
      zeroBytesPerGpu(s, 1e9, 8);
      FAIL() << "stage " << s << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("stage " + std::to_string(s)), std::string::npos) << e.what();
    }
  }
}

TEST(ZeroMemoryTest, MemorySizesReadDecimalAndBinaryUnits) {
  EXPECT_EQ(parseMemorySize("80GiB"), int64_t{80} << 30);
  EXPECT_EQ(parseMemorySize("80 GB"), int64_t{80'000'000'000});
  EXPECT_EQ(parseMemorySize("141GB"), int64_t{141'000'000'000});
  EXPECT_EQ(parseMemorySize("1.5MiB"), int64_t{3} << 19);
  EXPECT_EQ(parseMemorySize("512MB"), int64_t{512'000'000});
  EXPECT_EQ(parseMemorySize("2TiB"), int64_t{2} << 40);
  EXPECT_EQ(parseMemorySize("4096B"), 4096);
  for (const char* bad : {"", "80", "GiB", "80XB", "80gib", "0GiB", "-1GiB", "nanGiB", "infGB", " 80GiB",
                          "2000000TiB"}) {
    try {
      parseMemorySize(bad);
      FAIL() << "'" << bad << "' accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("is not a memory size"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tessel::cli
