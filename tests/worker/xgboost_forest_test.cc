#include "services/worker/xgboost_forest.h"

#include <gtest/gtest.h>
#include <xgboost/c_api.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dhpt::worker {
namespace {

constexpr int kRows = 300;
constexpr int kCols = 5;

struct Matrix {
  std::vector<float> features;
  std::vector<float> labels;
  DMatrixHandle handle = nullptr;
  ~Matrix() { XGDMatrixFree(handle); }
};

void Fill(Matrix& m) {
  std::mt19937 random(3);
  std::uniform_real_distribution<float> uniform(0, 1);
  for (int i = 0; i < kRows * kCols; ++i) m.features.push_back(uniform(random));
  for (int r = 0; r < kRows; ++r) {
    const float* x = &m.features[static_cast<size_t>(r * kCols)];
    m.labels.push_back(10 * std::sin(3.14159f * x[0] * x[1]) + 20 * (x[2] - 0.5f) * (x[2] - 0.5f) +
                       10 * x[3] + 5 * x[4]);
  }
  ASSERT_EQ(XGDMatrixCreateFromMat(m.features.data(), kRows, kCols, NAN, &m.handle), 0);
  ASSERT_EQ(XGDMatrixSetFloatInfo(m.handle, "label", m.labels.data(), kRows), 0);
}

// One chunk as TrainForest grows it: `trees` parallel trees in one round.
std::string Chunk(DMatrixHandle train, int trees, int seed) {
  BoosterHandle booster = nullptr;
  EXPECT_EQ(XGBoosterCreate(&train, 1, &booster), 0);
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"learning_rate", "1"}, {"subsample", "0.8"}, {"colsample_bynode", "0.8"},
           {"lambda", "1e-5"}, {"max_depth", "4"}, {"verbosity", "0"},
           {"num_parallel_tree", absl::StrCat(trees)}, {"seed", absl::StrCat(seed)}}) {
    EXPECT_EQ(XGBoosterSetParam(booster, name.c_str(), value.c_str()), 0);
  }
  EXPECT_EQ(XGBoosterUpdateOneIter(booster, 0, train), 0);
  bst_ulong length = 0;
  const char* json = nullptr;
  EXPECT_EQ(XGBoosterSaveModelToBuffer(booster, R"({"format":"json"})", &length, &json), 0);
  std::string text(json, length);
  XGBoosterFree(booster);
  return text;
}

std::vector<float> Predict(const std::string& model, DMatrixHandle data) {
  BoosterHandle booster = nullptr;
  EXPECT_EQ(XGBoosterCreate(nullptr, 0, &booster), 0);
  EXPECT_EQ(XGBoosterLoadModelFromBuffer(booster, model.data(), model.size()), 0)
      << XGBGetLastError();
  bst_ulong length = 0;
  const float* out = nullptr;
  EXPECT_EQ(XGBoosterPredict(booster, data, 0, 0, 0, &length, &out), 0);
  std::vector<float> predictions(out, out + length);
  XGBoosterFree(booster);
  return predictions;
}

// The merged model predicts what TrainForest computes from its chunks: their tree-count-
// weighted mean (chunks of unequal size, so the weights matter).
TEST(MergeForestChunksTest, PredictsTheChunksWeightedMean) {
  Matrix data;
  Fill(data);
  const std::vector<int> sizes = {4, 4, 2};
  std::vector<ForestChunk> chunks;
  std::vector<double> expected(kRows, 0.0);
  for (size_t k = 0; k < sizes.size(); ++k) {
    chunks.push_back({Chunk(data.handle, sizes[k], static_cast<int>(k)), sizes[k]});
    const std::vector<float> part = Predict(chunks.back().json, data.handle);
    ASSERT_EQ(part.size(), static_cast<size_t>(kRows));
    for (int r = 0; r < kRows; ++r) expected[r] += sizes[k] * part[r] / 10.0;
  }
  absl::StatusOr<std::string> merged = MergeForestChunks(chunks);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_NE(merged->find(R"("num_parallel_tree":"10")"), std::string::npos);
  const std::vector<float> predictions = Predict(*merged, data.handle);
  ASSERT_EQ(predictions.size(), static_cast<size_t>(kRows));
  for (int r = 0; r < kRows; ++r) EXPECT_NEAR(predictions[r], expected[r], 1e-4) << r;
}

TEST(MergeForestChunksTest, OneChunkIsItselfAndGarbageIsAnError) {
  EXPECT_EQ(*MergeForestChunks({{"{\"any\":1}", 3}}), "{\"any\":1}");
  EXPECT_FALSE(MergeForestChunks({}).ok());
  EXPECT_EQ(MergeForestChunks({{"{}", 1}, {"{}", 1}}).status().code(),
            absl::StatusCode::kInternal);
  // A chunk that holds fewer trees than it claims is refused, not merged into a wrong model.
  Matrix data;
  Fill(data);
  const std::string two = Chunk(data.handle, 2, 0);
  EXPECT_EQ(MergeForestChunks({{two, 2}, {two, 3}}).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace dhpt::worker
