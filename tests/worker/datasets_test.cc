#include "services/worker/datasets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>

namespace dhpt::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Reads CSV files only under tests/data, as a worker started with --data_root=tests/data.
DatasetOptions TestData() {
  DatasetOptions options;
  options.data_roots = *ResolveDataRoots({DHPT_TEST_DATA_DIR});
  return options;
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

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
  absl::StatusOr<Dataset> data = LoadCsv(DHPT_TEST_DATA_DIR "/small.csv", "price", TestData());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->rows, 5);
  EXPECT_EQ(data->feature_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(data->target[4], 22.f);
  EXPECT_EQ(data->features[3], 2.f);
}

TEST(CsvTest, ErrorsNameTheProblemByNumbers) {
  EXPECT_THAT(Message(LoadCsv(DHPT_TEST_DATA_DIR "/small.csv", "cost", TestData()).status()),
              HasSubstr("target column \"cost\" is not in the header"));
  EXPECT_THAT(Message(LoadCsv(DHPT_TEST_DATA_DIR "/bad_cell.csv", "price", TestData()).status()),
              HasSubstr("bad_cell.csv: line 3, column 2: not a number"));
  EXPECT_THAT(Message(LoadCsv(DHPT_TEST_DATA_DIR "/nan_cell.csv", "price", TestData()).status()),
              HasSubstr("column 2: not a finite number"));
  EXPECT_EQ(LoadCsv(DHPT_TEST_DATA_DIR "/nonexistent.csv", "y", TestData()).status().code(),
            absl::StatusCode::kNotFound);
}

// Error messages reach every API client: they carry numbers, never the file's text.
TEST(CsvTest, ErrorsNeverQuoteTheText) {
  const std::string header = "secret_a,secret_b,price\n";
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {header + "1,2,3\n1,secret_cell,3\n", "line 3, column 2: not a number"},
           {header + "1,2,3\nsecret_nan,2,3\n", "line 3, column 1: not a number"},
           {header + "1,2,3\n1,2,inf\n", "line 3, column 3: not a finite number"},
           {header + "1,2,3\n1,2\n", "line 3: expected 3 cells, found 2"},
           {header + "1,2,3\n1,\"secret_open,3\n", "line 3: unterminated quote"},
           {header + "1,2,3\n", "needs at least 2 data rows, has 1"},
       }) {
    absl::StatusOr<Dataset> data = ParseCsv(text, "price");
    ASSERT_FALSE(data.ok()) << text;
    EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(data.status()), HasSubstr(expected));
    EXPECT_THAT(Message(data.status()), Not(HasSubstr("secret")));
  }
  absl::Status missing = ParseCsv(header + "1,2,3\n4,5,6\n", "cost").status();
  EXPECT_THAT(Message(missing), HasSubstr("target column \"cost\" is not in the header (line 1, 3 columns)"));
  EXPECT_THAT(Message(missing), Not(HasSubstr("secret")));
  absl::Status twice = ParseCsv("price,x,price\n1,2,3\n4,5,6\n", "price").status();
  EXPECT_THAT(Message(twice), HasSubstr("columns 1 and 3 of the header are both named \"price\""));
}

TEST(CsvTest, ParsesQuotesCarriageReturnsAndBlankLines) {
  absl::StatusOr<Dataset> data = ParseCsv("\"a\" , b,y\r\n1,\"2\",3\r\n\n 4,5 ,6", "y");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(data->rows, 2);
  EXPECT_EQ(data->features, (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(data->target, (std::vector<float>{3, 6}));
}

// Garbage input (one endless line, a binary file) fails cleanly on the limits.
TEST(CsvTest, LimitsColumnsAndLineLength) {
  CsvLimits limits;
  limits.max_columns = 3;
  EXPECT_THAT(Message(ParseCsv("a,b,c,y\n1,2,3,4\n5,6,7,8\n", "y", limits).status()),
              HasSubstr("line 1: more than 3 columns (the limit)"));
  EXPECT_THAT(Message(ParseCsv("a,y\n1,2,3,4\n5,6\n", "y", limits).status()),
              HasSubstr("line 2: more than 3 columns"));
  limits = CsvLimits{};
  limits.max_line_bytes = 16;
  EXPECT_THAT(Message(ParseCsv("a,y\n1,2\n" + std::string(100, '1') + ",2\n", "y", limits).status()),
              HasSubstr("line 3 is longer than 16 bytes (the limit)"));
  // The defaults: 10,000 columns.
  std::string wide;
  for (int j = 0; j <= kDefaultMaxCsvColumns; ++j) wide += "1,";
  wide += "1\n";
  EXPECT_THAT(Message(ParseCsv(wide + wide, "").status()), HasSubstr("more than 10000 columns"));
  EXPECT_FALSE(ParseCsv(std::string("\0\xff\xfe,\n\x01", 7), "y").ok());
  EXPECT_FALSE(ParseCsv("", "y").ok());
}

TEST(CsvTest, ParsingStopsWhenCancelled) {
  std::string text = "x,y\n";
  for (int i = 0; i < 3 * kCancelCheckRows; ++i) text += "1,2\n";
  std::atomic<bool> cancelled = true;
  EXPECT_TRUE(absl::IsCancelled(ParseCsv(text, "y", {}, &cancelled).status()));
  cancelled = false;
  EXPECT_TRUE(ParseCsv(text, "y", {}, &cancelled).ok());
}

// A scratch directory: root/ (the data root, with data.csv), root2/ (a sibling whose name
// starts like the root) and outside/.
class DataRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = std::filesystem::path(::testing::TempDir()) / "dhpt-roots-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    for (const char* sub : {"root", "root2", "outside"}) std::filesystem::create_directory(dir_ / sub);
    for (const char* file : {"root/data.csv", "root2/data.csv", "outside/data.csv"}) {
      std::ofstream(dir_ / file) << "x,y\n1,2\n3,4\n5,6\n";
    }
    roots_ = *ResolveDataRoots({(dir_ / "root").string()});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  absl::Status Open(const std::filesystem::path& path, int64_t max_bytes = 1 << 20) {
    return OpenDataFile(path.string(), roots_, max_bytes).status();
  }

  std::filesystem::path dir_;
  std::vector<std::string> roots_;
};

TEST_F(DataRootTest, ReadsRegularFilesInsideTheRoot) {
  EXPECT_TRUE(Open(dir_ / "root/data.csv").ok());
  EXPECT_TRUE(Open(dir_ / "root/../root/./data.csv").ok());
  DatasetOptions options;
  options.data_roots = roots_;
  absl::StatusOr<Dataset> data = LoadCsv((dir_ / "root/data.csv").string(), "y", options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->rows, 3);
}

TEST_F(DataRootTest, RefusesPathsOutsideTheRoots) {
  for (const std::filesystem::path& path :
       {dir_ / "outside/data.csv", dir_ / "root/../outside/data.csv", dir_ / "root2/data.csv",
        std::filesystem::path("/etc/passwd"), dir_ / "outside/missing.csv"}) {
    absl::Status status = Open(path);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << path;
    EXPECT_THAT(Message(status), HasSubstr(path.string() + " is outside this worker's data roots (" +
                                           roots_[0] + "): put the file under one of them, or ask "
                                           "the worker's operator to add its directory with --data_root"));
  }
  // A symlink inside the root that points out of it.
  std::filesystem::create_symlink(dir_ / "outside/data.csv", dir_ / "root/link.csv");
  EXPECT_EQ(Open(dir_ / "root/link.csv").code(), absl::StatusCode::kFailedPrecondition);
  // One inside the root that stays inside is fine.
  std::filesystem::create_symlink(dir_ / "root/data.csv", dir_ / "root/alias.csv");
  EXPECT_TRUE(Open(dir_ / "root/alias.csv").ok());
  // Missing files are reported as such only under a root.
  EXPECT_EQ(Open(dir_ / "root/missing.csv").code(), absl::StatusCode::kNotFound);
}

TEST_F(DataRootTest, ARelativePathIsRelativeToTheDataRootsNotTheWorkingDirectory) {
  // The worker runs elsewhere: from outside/, "data.csv" would be outside/data.csv.
  const std::filesystem::path here = std::filesystem::current_path();
  std::filesystem::current_path(dir_ / "outside");
  EXPECT_TRUE(Open("data.csv").ok());
  std::filesystem::create_directory(dir_ / "root/sub");
  std::ofstream(dir_ / "root/sub/more.csv") << "x,y\n1,2\n";
  EXPECT_TRUE(Open("sub/more.csv").ok());
  EXPECT_TRUE(Open("./sub/../data.csv").ok());
  // The second root is searched when the first lacks the file.
  std::ofstream(dir_ / "root2/only.csv") << "x,y\n1,2\n";
  roots_ = *ResolveDataRoots({(dir_ / "root").string(), (dir_ / "root2").string()});
  EXPECT_TRUE(Open("only.csv").ok());
  // Relative paths still cannot leave the roots, and a missing one names the path as given.
  EXPECT_EQ(Open("../outside/data.csv").code(), absl::StatusCode::kFailedPrecondition);
  const absl::Status missing = Open("missing.csv");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(missing), HasSubstr("cannot read missing.csv: "));
  std::filesystem::current_path(here);
}

TEST_F(DataRootTest, WithoutRootsNoFileIsRead) {
  absl::Status status = OpenDataFile((dir_ / "root/data.csv").string(), {}, 1 << 20).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(status),
              HasSubstr("this worker reads CSV files only under its --data_root directories; none "
                        "is set: start it with --data_root=DIR holding the file"));
  EXPECT_FALSE(LoadCsv(DHPT_TEST_DATA_DIR "/small.csv", "price", DatasetOptions{}).ok());
}

// A FIFO with no writer, a device and a directory: refused at once, never read or waited on.
TEST_F(DataRootTest, RefusesWhatIsNotARegularFile) {
  ASSERT_EQ(mkfifo((dir_ / "root/fifo.csv").c_str(), 0600), 0);
  std::filesystem::create_directory(dir_ / "root/folder.csv");
  for (const char* name : {"root/fifo.csv", "root/folder.csv"}) {
    absl::Status status = Open(dir_ / name);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_THAT(Message(status), HasSubstr("is not a regular file"));
  }
  absl::Status zero = OpenDataFile("/dev/zero", *ResolveDataRoots({"/dev"}), 1 << 20).status();
  EXPECT_THAT(Message(zero), HasSubstr("is not a regular file"));
}

TEST_F(DataRootTest, RefusesFilesOverTheSizeLimit) {
  absl::Status status = Open(dir_ / "root/data.csv", 8);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(status), HasSubstr("over this worker's limit of 8 (--max_dataset_file_bytes)"));
}

TEST_F(DataRootTest, RootsMustBeDirectories) {
  EXPECT_THAT(Message(ResolveDataRoots({(dir_ / "nowhere").string()}).status()),
              HasSubstr("nowhere is not a directory"));
  EXPECT_FALSE(ResolveDataRoots({(dir_ / "root/data.csv").string()}).ok());
  // Resolved: the cache compares real paths with real roots.
  std::filesystem::create_directory_symlink(dir_ / "root", dir_ / "root-link");
  EXPECT_EQ(*ResolveDataRoots({(dir_ / "root-link").string()}), roots_);
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
  absl::StatusOr<Dataset> data = LoadCsv(std::string(DHPT_TEST_DATA_DIR) + "/small.csv", "", TestData());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(data->target.empty());
  absl::StatusOr<Dataset> with_target =
      LoadCsv(std::string(DHPT_TEST_DATA_DIR) + "/small.csv", "price", TestData());
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

TEST(DatasetCacheTest, ReadsCsvFilesUnderItsRoots) {
  v1::Dataset spec;
  spec.mutable_csv()->set_path(DHPT_TEST_DATA_DIR "/small.csv");
  spec.mutable_csv()->set_target("price");
  spec.set_validation_fraction(0.2);
  EXPECT_TRUE(DatasetCache(TestData()).Get(spec).ok());
  // Roots given unresolved are resolved by the cache.
  DatasetOptions dotted;
  dotted.data_roots = {DHPT_TEST_DATA_DIR "/../data"};
  EXPECT_TRUE(DatasetCache(dotted).Get(spec).ok());
  EXPECT_THAT(Message(DatasetCache().Get(spec).status()), HasSubstr("none is set"));
}

TEST(DatasetSizeTest, EstimatesTheDataAndItsSplit) {
  EXPECT_EQ(EstimateDatasetBytes(1000, 10), 2 * (1000 * 10 * 4 + 1000 * 4));
  EXPECT_EQ(EstimateDatasetBytes(int64_t{1} << 40, int64_t{1} << 40),
            std::numeric_limits<int64_t>::max());
  EXPECT_GT(DefaultMaxDatasetBytes(), int64_t{64} << 20);
}

// friedman1 {samples: 10000000, features: 10000} once killed every worker with std::bad_alloc.
TEST(DatasetSizeTest, RefusesDatasetsOverTheLimitBeforeAllocating) {
  v1::Dataset spec;
  *spec.mutable_friedman1() = Friedman(10'000'000, 10'000, 0, 0);
  spec.set_validation_fraction(0.2);
  absl::Status status = DatasetCache().Get(spec).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(status), HasSubstr("dataset friedman1 of 10000000 rows x 10000 columns needs "
                                         "about 745.1 GiB"));
  EXPECT_THAT(Message(status), HasSubstr("(--max_dataset_bytes)"));

  DatasetOptions small;
  small.max_dataset_bytes = 100'000;
  DatasetCache cache(small);
  *spec.mutable_friedman1() = Friedman(2000, 10, 0, 0);  // 2 * 2000 * 44 bytes
  EXPECT_EQ(cache.Get(spec).status().code(), absl::StatusCode::kResourceExhausted);
  *spec.mutable_friedman1() = Friedman(1000, 10, 0, 0);
  EXPECT_TRUE(cache.Get(spec).ok());
  spec.clear_friedman1();
  spec.mutable_sensors()->set_samples(1000);  // 32 channels
  EXPECT_EQ(cache.Get(spec).status().code(), absl::StatusCode::kResourceExhausted);

  small.data_roots = {DHPT_TEST_DATA_DIR};
  small.max_dataset_bytes = 100;  // small.csv has 5 rows x 3 features: 160 bytes
  spec.mutable_csv()->set_path(DHPT_TEST_DATA_DIR "/small.csv");
  spec.mutable_csv()->set_target("price");
  EXPECT_EQ(DatasetCache(small).Get(spec).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(DatasetCacheTest, CancelledLoadsStopAndAreNotCached) {
  std::atomic<bool> cancelled = true;
  EXPECT_TRUE(absl::IsCancelled(GenerateFriedman1(Friedman(100'000, 10, 0, 0), &cancelled).status()));
  EXPECT_TRUE(absl::IsCancelled(GenerateSensorChannels(Sensors(100'000, 0), &cancelled).status()));
  DatasetCache cache;
  v1::Dataset spec;
  *spec.mutable_friedman1() = Friedman(50'000, 10, 0, 0);
  spec.set_validation_fraction(0.2);
  EXPECT_TRUE(absl::IsCancelled(cache.Get(spec, &cancelled).status()));
  cancelled = false;
  EXPECT_TRUE(cache.Get(spec, &cancelled).ok());
}

}  // namespace
}  // namespace dhpt::worker
