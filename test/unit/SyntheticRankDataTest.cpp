// The synthetic data as a rank's data (runtime/train/RankData.h): its bundle config round trip,
// the config's errors, the --batch check and what the header line says.
#include "runtime/train/RankData.h"

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

TEST(SyntheticRankData, ConfigErrorsNameTheEntry) {
  auto message = [](const nlohmann::json& config) {
    try {
      tessel::trainer::syntheticOptions(config);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json c = tessel::trainer::syntheticConfig(SyntheticOptions{});
  nlohmann::json missing = c;
  missing.erase("spread");
  EXPECT_EQ(message(missing), "the synthetic data's config has no number \"spread\"");
  nlohmann::json text = c;
  text["classes"] = "five";
  EXPECT_EQ(message(text), "the synthetic data's config has no number \"classes\"");
  nlohmann::json fraction = c;
  fraction["samples"] = 10.5;
  EXPECT_EQ(message(fraction), "the synthetic data's config entry \"samples\" is not an integer");
  EXPECT_EQ(message(nlohmann::json::array()), "the synthetic data's config has no number \"samples\"");
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
