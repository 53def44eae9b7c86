// The synthetic data as a rank's data (runtime/train/RankData.h): its bundle config round trip,
// the config's errors, the --batch check and what the header line says.
#include "runtime/train/RankData.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace {

using tessel::SyntheticOptions;

TEST(SyntheticRankData, ConfigRoundTrip) {
  SyntheticOptions o;
  o.samples = 123;
  o.heldOut = 45;
  o.features = 6;
  o.classes = 7;
  o.noise = 0.25;
  o.spread = 3.5;
  const SyntheticOptions back = tessel::trainer::syntheticOptions(tessel::trainer::syntheticConfig(o));
  EXPECT_EQ(back.samples, 123);
  EXPECT_EQ(back.heldOut, 45);
  EXPECT_EQ(back.features, 6);
  EXPECT_EQ(back.classes, 7);
  EXPECT_EQ(back.noise, 0.25);
  EXPECT_EQ(back.spread, 3.5);
}

std::string configError(const nlohmann::json& config) {
  try {
    tessel::trainer::syntheticOptions(config);
  } catch (const std::runtime_error& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

TEST(SyntheticRankData, ConfigErrorsNameTheEntry) {
  nlohmann::json c = tessel::trainer::syntheticConfig(SyntheticOptions{});
  nlohmann::json missing = c;
  missing.erase("spread");
  EXPECT_EQ(configError(missing), "config.spread is missing; the synthetic data needs a number > 0 and <= 1e+06");
  nlohmann::json text = c;
  text["classes"] = "five";
  EXPECT_EQ(configError(text), "config.classes is \"five\"; the synthetic data needs an integer from 2 to 65536");
  nlohmann::json fraction = c;
  fraction["samples"] = 10.5;
  EXPECT_EQ(configError(fraction), "config.samples is 10.5; the synthetic data needs an integer from 1 to 16777216");
  for (const nlohmann::json& notObject : {nlohmann::json::array(), nlohmann::json(), nlohmann::json("lab"),
                                          nlohmann::json(3)})
    EXPECT_EQ(configError(notObject), "config is " + notObject.dump() + "; the synthetic data needs an object of its "
                                      "options");
}

// Each entry's range is the lab flags' (examples/labs/Lab.h), and each wrong type, value past
// it, negative or huge number (past INT64_MAX, or a float beyond every integer) is refused
// naming the entry, before any data is drawn.
TEST(SyntheticRankData, EveryEntryIsRangeAndTypeChecked) {
  const nlohmann::json good = tessel::trainer::syntheticConfig(SyntheticOptions{});
  struct Entry {
    const char* key;
    std::string rule;
    std::vector<nlohmann::json> bad;
  };
  const nlohmann::json huge = nlohmann::json::parse("18446744073709551615"), past = nlohmann::json::parse("1e30");
  const std::vector<nlohmann::json> wrongTypes = {"x", true, nullptr, nlohmann::json::array(),
                                                  nlohmann::json::object()};
  const std::vector<Entry> entries = {
      {"samples", "an integer from 1 to 16777216", {0, -1, 16777217, 9223372036854775807, huge, past, 2.0}},
      {"held_out", "an integer from 1 to 16777216", {0, -5, 16777217, 4611686018427387904, huge, past, 1.5}},
      {"features", "an integer from 1 to 65536", {0, -1, 65537, 4611686018427387904, huge, past, 4.0}},
      {"classes", "an integer from 2 to 65536", {1, 0, -1, 65537, 4611686018427387904, huge, past}},
      {"noise", "a number >= 0 and <= 1e+06", {-1, -1e-300, 1000001, huge, past}},
      {"spread", "a number > 0 and <= 1e+06", {0, -1, 1e7, huge, past}}};
  for (const Entry& e : entries) {
    std::vector<nlohmann::json> values = e.bad;
    values.insert(values.end(), wrongTypes.begin(), wrongTypes.end());
    for (const nlohmann::json& v : values) {
      nlohmann::json c = good;
      c[e.key] = v;
      EXPECT_EQ(configError(c), fmt::format("config.{} is {}; the synthetic data needs {}", e.key, v.dump(), e.rule))
          << e.key << " = " << v.dump();
    }
  }
  // Entries each in range, together past 2^31 values (SyntheticDataset.h): refused as a whole.
  nlohmann::json c = good;
  c["classes"] = 65536;
  c["features"] = 65536;
  EXPECT_EQ(configError(c), "config: synthetic data: 65536 class centres x 65536 features exceed 2147483648 values");
  // The ranges' ends are accepted.
  c = good;
  c["samples"] = 16777216;
  c["classes"] = 2;
  c["noise"] = 0;
  c["spread"] = 1e6;
  EXPECT_EQ(configError(c), "no error");
}

TEST(SyntheticRankData, BatchLargerThanASplitIsRefused) {
  SyntheticOptions o;
  o.samples = 100;
  o.heldOut = 20;
  tessel::SyntheticSplits splits;
  try {
    tessel::trainer::syntheticRankData(o, splits, {.batch = 32});
    FAIL() << "no error";
  } catch (const tessel::DataError& e) {
    EXPECT_STREQ(e.what(), "--batch 32 is larger than the data: 100 training samples (--samples) and 20 held-out "
                           "samples (--held-out)");
  }
}

TEST(SyntheticRankData, DrawsTheSplitsAndDescribesThem) {
  SyntheticOptions o;
  o.samples = 100;
  o.heldOut = 40;
  tessel::SyntheticSplits splits;
  const tessel::trainer::RankData r =
      tessel::trainer::syntheticRankData(o, splits, {.batch = 20, .rank = 1, .world = 2, .seed = 9});
  const tessel::SyntheticSplits want = tessel::makeSyntheticClassification(o, 9);
  EXPECT_EQ(splits.train.images, want.train.images);
  EXPECT_EQ(splits.heldOut.labels, want.heldOut.labels);
  EXPECT_EQ(r.describe, "synthetic data: 100 training and 40 held-out samples, 64 features, 5 classes, 5 batches "
                        "per epoch");
  EXPECT_EQ(r.unit, "samples/s");
  EXPECT_EQ(r.itemsPerStep, 20);
  EXPECT_EQ(r.val.batches, 2);
  EXPECT_NE(r.val.what.find("held-out samples"), std::string::npos) << r.val.what;
}

}  // namespace
