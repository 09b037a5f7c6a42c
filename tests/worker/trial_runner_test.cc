#include "services/worker/trial_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <new>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"

namespace dhpt::worker {
namespace {

using ::testing::HasSubstr;

constexpr char kBraninAssign[] = R"pb(
  trial_id: 1 attempt: 1 model { kind: FUNCTION function: "branin" }
  params { key: "x1" value { double_value: 1 } }
  params { key: "x2" value { double_value: 2 } })pb";

// A runner of a worker started with --data_root=tests/data.
TrialRunnerOptions WithTestData() {
  TrialRunnerOptions options;
  options.datasets.data_roots = {DHPT_TEST_DATA_DIR};
  return options;
}

v1::Assign Parse(const std::string& text) {
  v1::Assign assign;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &assign));
  return assign;
}

TEST(TrialRunnerTest, FunctionTrialReportsValueAndMeasurements) {
  TrialRunner runner;
  v1::TrialResult result = runner.Run(Parse(R"pb(
    trial_id: 7 attempt: 2 model { kind: FUNCTION function: "branin" }
    params { key: "x1" value { double_value: 3.14159265 } }
    params { key: "x2" value { double_value: 2.275 } })pb"), {});
  EXPECT_EQ(result.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(result.trial_id(), 7u);
  EXPECT_EQ(result.attempt(), 2);
  EXPECT_NEAR(result.metrics().at("value"), 0.397887, 1e-5);
  for (const char* m : {"wall_seconds", "cpu_seconds", "cpu_utilization", "peak_rss_bytes"}) {
    EXPECT_TRUE(result.metrics().contains(m)) << m;
  }
  EXPECT_EQ(result.device(), "cpu");
}

TEST(TrialRunnerTest, XgboostTrialReportsR2AndMse) {
  TrialRunner runner;
  v1::TrialResult result = runner.Run(Parse(R"pb(
    trial_id: 1 attempt: 1
    model { kind: XGBOOST fixed { key: "objective" value { string_value: "reg:squarederror" } } }
    dataset { friedman1 { samples: 1000 features: 10 noise: 1 } validation_fraction: 0.2 }
    params { key: "max_depth" value { int_value: 4 } }
    params { key: "eta" value { double_value: 0.1 } })pb"), TrialContext{});
  ASSERT_EQ(result.state(), v1::Trial::COMPLETED) << result.error();
  EXPECT_GT(result.metrics().at("r2"), 0.8);
  EXPECT_GT(result.metrics().at("mse"), 0);
  EXPECT_TRUE(result.metrics().contains("dataset_seconds"));
  // A completed trial of a trained model reports what deploying it would cost.
  for (const char* m : {"model_bytes", "inference_latency_us", "inference_latency_batch256_us"}) {
    EXPECT_GT(result.metrics().at(m), 0) << m;
  }
}

TEST(TrialRunnerTest, MultiObjectiveFunctionReportsItsObjectives) {
  std::string zdt1 = R"pb(trial_id: 4 attempt: 1 model { kind: FUNCTION function: "zdt1" })pb";
  for (int i = 1; i <= 10; ++i) {
    zdt1 += absl::StrCat(" params { key: \"x", i, "\" value { double_value: 0 } }");
  }
  v1::TrialResult result = TrialRunner().Run(Parse(zdt1), {});
  ASSERT_EQ(result.state(), v1::Trial::COMPLETED) << result.error();
  // ZDT1 at x = 0: f1 = 0, f2 = g (1 - sqrt(f1 / g)) with g = 1.
  EXPECT_DOUBLE_EQ(result.metrics().at("f1"), 0);
  EXPECT_DOUBLE_EQ(result.metrics().at("f2"), 1);
  EXPECT_FALSE(result.metrics().contains("value"));
  EXPECT_TRUE(result.metrics().contains("wall_seconds"));

  v1::TrialResult one_dim = TrialRunner().Run(Parse(R"pb(
    trial_id: 4 attempt: 1 model { kind: FUNCTION function: "zdt1" }
    params { key: "x1" value { double_value: 0.5 } })pb"), {});
  EXPECT_EQ(one_dim.state(), v1::Trial::FAILED);
  EXPECT_THAT(one_dim.error(), HasSubstr("zdt1 is not defined in 1 dimensions"));
  v1::TrialResult unknown = TrialRunner().Run(Parse(R"pb(
    trial_id: 4 attempt: 1 model { kind: FUNCTION function: "zdt9" }
    params { key: "x1" value { double_value: 0.5 } })pb"), {});
  EXPECT_THAT(unknown.error(), HasSubstr("unknown function \"zdt9\""));
}

TEST(TrialRunnerTest, BadCsvFailsTheTrialWithTheReason) {
  TrialRunner runner(WithTestData());
  v1::TrialResult result = runner.Run(Parse(R"pb(
    trial_id: 1 attempt: 1 model { kind: XGBOOST }
    dataset { csv { path: ")pb" DHPT_TEST_DATA_DIR R"pb(/bad_cell.csv" target: "price" }
              validation_fraction: 0.2 }
    params { key: "max_depth" value { int_value: 4 } })pb"), {});
  EXPECT_EQ(result.state(), v1::Trial::FAILED);
  EXPECT_THAT(result.error(), HasSubstr("line 3, column 2: not a number"));
  EXPECT_THAT(result.error(), ::testing::Not(HasSubstr("oops")));
}

TEST(TrialRunnerTest, CsvOutsideTheDataRootsFails) {
  const std::string csv = R"pb(
    trial_id: 1 attempt: 1 model { kind: XGBOOST }
    dataset { csv { path: ")pb" DHPT_TEST_DATA_DIR R"pb(/small.csv" target: "price" }
              validation_fraction: 0.2 })pb";
  v1::TrialResult without_roots = TrialRunner().Run(Parse(csv), {});
  EXPECT_EQ(without_roots.state(), v1::Trial::FAILED);
  EXPECT_THAT(without_roots.error(), HasSubstr("none is set: start it with --data_root=DIR"));
  TrialRunnerOptions elsewhere;
  elsewhere.datasets.data_roots = {DHPT_BIN_DIR};
  v1::TrialResult outside = TrialRunner(elsewhere).Run(Parse(csv), {});
  EXPECT_EQ(outside.state(), v1::Trial::FAILED);
  EXPECT_THAT(outside.error(), HasSubstr("is outside this worker's data roots"));
  EXPECT_EQ(TrialRunner(WithTestData()).Run(Parse(csv), {}).state(), v1::Trial::COMPLETED);
}

// Once, this spec crashed every worker with an uncaught std::bad_alloc on its slot thread.
TEST(TrialRunnerTest, HugeDatasetFailsOneTrialAndTheWorkerLivesOn) {
  TrialRunner runner;
  v1::TrialResult result = runner.Run(Parse(R"pb(
    trial_id: 3 attempt: 1 model { kind: RANDOM_FOREST }
    dataset { friedman1 { samples: 10000000 features: 10000 } validation_fraction: 0.2 })pb"), {});
  EXPECT_EQ(result.state(), v1::Trial::FAILED);
  EXPECT_EQ(result.trial_id(), 3u);
  EXPECT_THAT(result.error(), HasSubstr("over this worker's limit"));
  EXPECT_EQ(runner.Run(Parse(kBraninAssign), {}).state(), v1::Trial::COMPLETED);
}

// Throws from Train, as a trainer that runs out of memory or hits a library bug would.
class ThrowingTrainer : public ModelTrainer {
 public:
  explicit ThrowingTrainer(std::function<void()> thrower) : thrower_(std::move(thrower)) {}
  std::string device() const override { return "cpu"; }
  absl::StatusOr<TrainerMetrics> Train(const SplitDataset&, const Hyperparameters&,
                                       const TrialContext&) override {
    thrower_();
    return TrainerMetrics{};
  }

 private:
  std::function<void()> thrower_;
};

TEST(TrialRunnerTest, ExceptionsBecomeFailedTrials) {
  const std::string autoencoder = R"pb(
    trial_id: 5 attempt: 2 model { kind: AUTOENCODER }
    dataset { friedman1 { samples: 100 features: 5 } validation_fraction: 0.2 })pb";
  TrialRunnerOptions options;
  options.autoencoder = std::make_shared<ThrowingTrainer>([] { throw std::bad_alloc(); });
  v1::TrialResult out_of_memory = TrialRunner(options).Run(Parse(autoencoder), {});
  EXPECT_EQ(out_of_memory.state(), v1::Trial::FAILED);
  EXPECT_EQ(out_of_memory.trial_id(), 5u);
  EXPECT_EQ(out_of_memory.attempt(), 2);
  EXPECT_THAT(out_of_memory.error(), HasSubstr("ran out of memory"));

  options.autoencoder = std::make_shared<ThrowingTrainer>(
      [] { throw std::runtime_error("/secret/path: internal detail"); });
  v1::TrialResult thrown = TrialRunner(options).Run(Parse(autoencoder), {});
  EXPECT_EQ(thrown.state(), v1::Trial::FAILED);
  EXPECT_THAT(thrown.error(), HasSubstr("unexpected error inside the worker"));
  EXPECT_THAT(thrown.error(), ::testing::Not(HasSubstr("secret")));
}

TEST(TrialRunnerTest, CancelledTrainingIsReportedAsCancelled) {
  TrialRunner runner;
  std::atomic<bool> cancelled = true;
  TrialContext context;
  context.cancelled = &cancelled;
  v1::TrialResult result = runner.Run(Parse(R"pb(
    trial_id: 1 attempt: 1 model { kind: XGBOOST }
    dataset { friedman1 { samples: 100 features: 5 } validation_fraction: 0.2 })pb"), context);
  EXPECT_EQ(result.state(), v1::Trial::CANCELLED);
}

TEST(TrialRunnerTest, ModelsThisWorkerCannotRunFail) {
  TrialRunner runner;
  v1::TrialResult result = runner.Run(Parse("trial_id: 1 model { kind: AUTOENCODER }"), {});
  EXPECT_EQ(result.state(), v1::Trial::FAILED);
  EXPECT_THAT(result.error(), HasSubstr("cannot run AUTOENCODER"));
}

// Reports a fixed utilisation and memory, as a GPU busy at 40% would.
class SteadyGpu : public GpuReader {
 public:
  SteadyGpu() {
    device_.name = "Steady GPU";
    device_.memory_total_bytes = 1 << 30;
    device_.source = "test";
  }
  const GpuDevice& device() const override { return device_; }
  absl::StatusOr<GpuSample> Sample() override {
    GpuSample sample;
    sample.utilization = 0.4;
    sample.memory_used_bytes = 1 << 20;
    return sample;
  }

 private:
  GpuDevice device_;
};

TEST(TrialRunnerTest, GpuFiguresOnlyWhereAGpuIsObserved) {
  TrialRunnerOptions options;
  options.gpu = std::make_shared<SteadyGpu>();
  TrialRunner with_gpu(options);
  v1::TrialResult result = with_gpu.Run(Parse(kBraninAssign), {});
  ASSERT_EQ(result.state(), v1::Trial::COMPLETED);
  EXPECT_DOUBLE_EQ(result.metrics().at("gpu_utilization_avg"), 0.4);
  EXPECT_DOUBLE_EQ(result.metrics().at("gpu_utilization_peak"), 0.4);
  EXPECT_DOUBLE_EQ(result.metrics().at("gpu_memory_used_peak_bytes"), 1 << 20);
  EXPECT_DOUBLE_EQ(result.metrics().at("gpu_memory_total_bytes"), 1 << 30);

  // Absent, not zero, without a GPU.
  v1::TrialResult plain = TrialRunner().Run(Parse(kBraninAssign), {});
  for (const auto& [name, value] : plain.metrics()) EXPECT_THAT(name, ::testing::Not(HasSubstr("gpu")));
}

// A board drawing a steady 2.5 W.
class SteadyRails : public PowerRails {
 public:
  std::string source() const override { return "test"; }
  std::string description() const override { return "steady"; }
  absl::StatusOr<double> TotalWatts() override { return 2.5; }
};

TEST(TrialRunnerTest, EnergyFiguresOnlyWherePowerRailsAreObserved) {
  TrialRunnerOptions options;
  options.power = std::make_shared<SteadyRails>();
  options.sample_interval = absl::Milliseconds(1);
  v1::TrialResult result = TrialRunner(options).Run(Parse(kBraninAssign), {});
  ASSERT_EQ(result.state(), v1::Trial::COMPLETED);
  EXPECT_NEAR(result.metrics().at("power_avg_watts"), 2.5, 1e-9);
  EXPECT_GT(result.metrics().at("energy_joules"), 0);
  EXPECT_LE(result.metrics().at("energy_joules"), 2.5 * result.metrics().at("wall_seconds") + 0.01);

  // Absent, not zero, without a sensor.
  v1::TrialResult plain = TrialRunner().Run(Parse(kBraninAssign), {});
  EXPECT_FALSE(plain.metrics().contains("energy_joules"));
  EXPECT_FALSE(plain.metrics().contains("power_avg_watts"));
}

TEST(TrialRunnerTest, XgboostNeedsATargetColumn) {
  v1::TrialResult result = TrialRunner(WithTestData()).Run(Parse(absl::StrCat(R"pb(
    trial_id: 1 attempt: 1 model { kind: XGBOOST }
    dataset { csv { path: ")pb", DHPT_TEST_DATA_DIR, R"pb(/small.csv" } validation_fraction: 0.2 })pb")), {});
  EXPECT_EQ(result.state(), v1::Trial::FAILED);
  EXPECT_THAT(result.error(), HasSubstr("dataset.csv.target"));
}

}  // namespace
}  // namespace dhpt::worker
