#include "services/worker/datasets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
