#include "services/worker/datasets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

namespace dhpt::worker {
namespace {

using ::testing::HasSubstr;

v1::Friedman1 Friedman(int samples, int features, double noise, uint64_t seed) {
  v1::Friedman1 spec;
  spec.set_samples(samples);
  spec.set_features(features);
  spec.set_noise(noise);
  spec.set_seed(seed);
  return spec;
}

TEST(Friedman1Test, FollowsTheFormulaWithoutNoise) {
  absl::StatusOr<Dataset> data = GenerateFriedman1(Friedman(200, 7, 0.0, 3));
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->rows, 200);
  EXPECT_EQ(data->cols, 7);
  for (int64_t i = 0; i < data->rows; ++i) {
    const float* x = &data->features[i * 7];
    for (int j = 0; j < 7; ++j) {
      EXPECT_GE(x[j], 0.f);
      EXPECT_LT(x[j], 1.f);
    }
    const double y = 10 * std::sin(std::numbers::pi * x[0] * x[1]) + 20 * std::pow(x[2] - 0.5, 2) +
                     10 * x[3] + 5 * x[4];
    EXPECT_NEAR(data->target[i], y, 1e-4);
  }
}

TEST(Friedman1Test, SeededAndNoisy) {
  Dataset a = *GenerateFriedman1(Friedman(100, 5, 1.0, 1));
  Dataset b = *GenerateFriedman1(Friedman(100, 5, 1.0, 1));
  Dataset c = *GenerateFriedman1(Friedman(100, 5, 1.0, 2));
  EXPECT_EQ(a.target, b.target);
  EXPECT_NE(a.target, c.target);
  Dataset clean = *GenerateFriedman1(Friedman(2000, 5, 0.0, 9));
  Dataset noisy = *GenerateFriedman1(Friedman(2000, 5, 1.0, 9));
  double var = 0;
  for (size_t i = 0; i < clean.target.size(); ++i) var += std::pow(noisy.target[i] - clean.target[i], 2);
  EXPECT_NEAR(var / 2000, 1.0, 0.15);  // The noise is N(0, 1).
}

TEST(CsvTest, LoadsFeaturesAndTargetByName) {
  absl::StatusOr<Dataset> data = LoadCsv(DHPT_TEST_DATA_DIR "/small.csv", "price");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->rows, 5);
  EXPECT_EQ(data->feature_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(data->target[4], 22.f);
  EXPECT_EQ(data->features[3], 2.f);
}

TEST(CsvTest, ErrorsNameTheProblem) {
  EXPECT_THAT(std::string(LoadCsv(DHPT_TEST_DATA_DIR "/small.csv", "cost").status().message()),
              HasSubstr("target column \"cost\" is not in the header"));
  EXPECT_THAT(std::string(LoadCsv(DHPT_TEST_DATA_DIR "/bad_cell.csv", "price").status().message()),
              HasSubstr("bad_cell.csv:3: column \"b\": \"oops\" is not a number"));
  EXPECT_THAT(std::string(LoadCsv(DHPT_TEST_DATA_DIR "/nan_cell.csv", "price").status().message()),
              HasSubstr("nan is not a finite number"));
  EXPECT_EQ(LoadCsv("/nonexistent.csv", "y").status().code(), absl::StatusCode::kNotFound);
}

TEST(SplitTest, HoldsOutTheFractionDeterministically) {
  Dataset data = *GenerateFriedman1(Friedman(100, 5, 0, 0));
  SplitDataset a = *SplitTrainValidation(data, 0.2, 5);
  SplitDataset b = *SplitTrainValidation(data, 0.2, 5);
  SplitDataset c = *SplitTrainValidation(data, 0.2, 6);
  EXPECT_EQ(a.validation.rows, 20);
  EXPECT_EQ(a.train.rows, 80);
  EXPECT_EQ(a.validation.target, b.validation.target);
  EXPECT_NE(a.validation.target, c.validation.target);
  std::multiset<float> all(data.target.begin(), data.target.end());
  std::multiset<float> joined(a.train.target.begin(), a.train.target.end());
  joined.insert(a.validation.target.begin(), a.validation.target.end());
  EXPECT_EQ(all, joined);
}

v1::SensorChannels Sensors(int samples, uint64_t seed) {
  v1::SensorChannels spec;
  spec.set_samples(samples);
  spec.set_seed(seed);
  return spec;
}

TEST(SensorChannelsTest, SeededShapeAndDefaults) {
  Dataset a = *GenerateSensorChannels(Sensors(500, 3));
  EXPECT_EQ(a.rows, 500);
  EXPECT_EQ(a.cols, kDefaultSensorChannels);
  EXPECT_EQ(a.feature_names.front(), "s1");
  EXPECT_EQ(a.target.size(), 500u);
  EXPECT_EQ(a.features, GenerateSensorChannels(Sensors(500, 3))->features);
  EXPECT_NE(a.features, GenerateSensorChannels(Sensors(500, 4))->features);
  // The mixing does not depend on the number of rows: a longer recording starts the same.
  Dataset longer = *GenerateSensorChannels(Sensors(800, 3));
  EXPECT_TRUE(std::equal(a.features.begin(), a.features.begin() + 10 * a.cols, longer.features.begin()));
  for (float target : a.target) EXPECT_LE(std::abs(target), 1.0f);  // z_1 is a sine.
}

// The channels are few latent signals mixed: strongly correlated, unlike independent
// features. The mean absolute correlation between channel pairs shows it.
TEST(SensorChannelsTest, ChannelsShareLatentStructure) {
  v1::SensorChannels spec = Sensors(3000, 1);
  spec.set_channels(16);
  spec.set_latent(2);
  Dataset data = *GenerateSensorChannels(spec);
  auto column = [&](int j) {
    std::vector<double> values;
    for (int64_t i = 0; i < data.rows; ++i) values.push_back(data.features[i * data.cols + j]);
    return values;
  };
  auto correlation = [](const std::vector<double>& x, const std::vector<double>& y) {
    const double n = static_cast<double>(x.size());
    double mx = 0, my = 0;
    for (size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      sxy += (x[i] - mx) * (y[i] - my);
      sxx += (x[i] - mx) * (x[i] - mx);
      syy += (y[i] - my) * (y[i] - my);
    }
    return sxy / std::sqrt(sxx * syy);
  };
  double total = 0;
  int pairs = 0;
  for (int a = 0; a < 16; ++a) {
    for (int b = a + 1; b < 16; ++b, ++pairs) total += std::abs(correlation(column(a), column(b)));
  }
  // Two latent signals: any two channels are close to dependent (independent ones give ~0.02).
  EXPECT_GT(total / pairs, 0.4);
}

TEST(SensorChannelsTest, RejectsImpossibleSpecs) {
  v1::SensorChannels spec = Sensors(10, 0);
  spec.set_channels(4);
  spec.set_latent(4);
  EXPECT_FALSE(GenerateSensorChannels(spec).ok());
  EXPECT_FALSE(GenerateSensorChannels(Sensors(0, 0)).ok());
}

TEST(CsvTest, WithoutATargetEveryColumnIsAFeature) {
  absl::StatusOr<Dataset> data = LoadCsv(std::string(DHPT_TEST_DATA_DIR) + "/small.csv", "");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(data->target.empty());
  absl::StatusOr<Dataset> with_target = LoadCsv(std::string(DHPT_TEST_DATA_DIR) + "/small.csv", "price");
  ASSERT_TRUE(with_target.ok());
  EXPECT_EQ(data->cols, with_target->cols + 1);
  absl::StatusOr<SplitDataset> split = SplitTrainValidation(*data, 0.25, 1);
  ASSERT_TRUE(split.ok());
  EXPECT_TRUE(split->train.target.empty());
  EXPECT_EQ(split->train.rows + split->validation.rows, data->rows);
}

TEST(DatasetCacheTest, LoadsOnceAndDoesNotCacheFailures) {
  DatasetCache cache;
  v1::Dataset spec;
  *spec.mutable_friedman1() = Friedman(50, 5, 0, 0);
  spec.set_validation_fraction(0.2);
  auto first = cache.Get(spec);
  auto second = cache.Get(spec);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->get(), second->get());
  v1::Dataset missing;
  missing.mutable_csv()->set_path("/nonexistent.csv");
  missing.mutable_csv()->set_target("y");
  missing.set_validation_fraction(0.2);
  EXPECT_FALSE(cache.Get(missing).ok());
}

}  // namespace
}  // namespace dhpt::worker
