// The learning-rate schedule against its closed form.
#include "dsl/trainer/Trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace {

using tessel::trainer::learningRate;
using tessel::trainer::TrainOptions;

TEST(Schedule, CosineStartsAtThePeakAndEndsAtTheFloor) {
  TrainOptions o;
  o.steps = 11;
  o.lr = 1e-3;
  o.minLrRatio = 0.1;
  EXPECT_DOUBLE_EQ(learningRate(o, 1), 1e-3);
  EXPECT_DOUBLE_EQ(learningRate(o, 11), 1e-4);
  // Halfway (step 6 of 11, progress 0.5): lr * (0.1 + 0.9 * 0.5 * (1 + cos(pi/2))).
  EXPECT_NEAR(learningRate(o, 6), 1e-3 * (0.1 + 0.9 * 0.5), 1e-15);
  o.steps = 1;
  EXPECT_DOUBLE_EQ(learningRate(o, 1), 1e-3);  // a one-step run trains at the peak
}

TEST(Schedule, WarmupIsLinearThenCosine) {
  TrainOptions o;
  o.steps = 14;
  o.warmup = 4;
  o.lr = 2.0;
  o.minLrRatio = 0.0;
  for (int s = 1; s <= 4; ++s) EXPECT_DOUBLE_EQ(learningRate(o, s), 2.0 * s / 4);
  EXPECT_DOUBLE_EQ(learningRate(o, 5), 2.0);
  EXPECT_NEAR(learningRate(o, 14), 0.0, 1e-15);
  double quarter = 2.0 * 0.5 * (1 + std::cos(std::numbers::pi * 3.0 / 9.0));
  EXPECT_NEAR(learningRate(o, 8), quarter, 1e-15);
}

TEST(Schedule, ConstantIsConstant) {
  TrainOptions o;
  o.schedule = "constant";
  o.steps = 100;
  for (int s : {1, 50, 100}) EXPECT_DOUBLE_EQ(learningRate(o, s), o.lr);
}

}  // namespace
