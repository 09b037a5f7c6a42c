#include "services/worker/autoencoder_trainer.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/autoencoder_module.h"

namespace dhpt::worker {
namespace {

SplitDataset SensorSplit(int samples, uint64_t seed = 7) {
  v1::SensorChannels spec;
  spec.set_samples(samples);
  spec.set_seed(seed);
  absl::StatusOr<Dataset> data = GenerateSensorChannels(spec);
  EXPECT_TRUE(data.ok()) << data.status();
  absl::StatusOr<SplitDataset> split = SplitTrainValidation(*data, 0.2, 0);
  EXPECT_TRUE(split.ok()) << split.status();
  return *split;
}

v1::ParameterValue Int(int64_t v) {
  v1::ParameterValue value;
  value.set_int_value(v);
  return value;
}
v1::ParameterValue Double(double v) {
  v1::ParameterValue value;
  value.set_double_value(v);
  return value;
}
v1::ParameterValue String(const std::string& v) {
  v1::ParameterValue value;
  value.set_string_value(v);
  return value;
}

std::unique_ptr<AutoencoderTrainer> CpuTrainer() {
  absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> trainer =
      AutoencoderTrainer::Create(DevicePreference::kCpu);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return std::move(*trainer);
}

TEST(AutoencoderTrainerTest, LearnsSensorChannelsOnTheCpuInSeconds) {
  const SplitDataset data = SensorSplit(4000);
  std::vector<std::pair<int64_t, double>> progress;
  TrialContext context;
  context.threads = 2;
  context.progress = [&](int64_t step, double value) { progress.emplace_back(step, value); };
  auto trainer = CpuTrainer();
  EXPECT_EQ(trainer->device(), "cpu");
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<TrainerMetrics> metrics = trainer->Train(
      data, {{"epochs", Int(15)}, {"learning_rate", Double(3e-3)}, {"bottleneck", Int(6)}},
      context);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GT(metrics->at("r2"), 0.9);
  EXPECT_GT(metrics->at("mse"), 0);
  // One report per epoch.
  ASSERT_EQ(progress.size(), 15u);
  for (size_t i = 0; i < progress.size(); ++i) EXPECT_EQ(progress[i].first, static_cast<int64_t>(i + 1));
  // Progress is the objective itself (validation r2 after each epoch), for early stopping.
  EXPECT_GT(progress.back().second, progress.front().second);
  EXPECT_DOUBLE_EQ(progress.back().second, metrics->at("r2"));
  RecordProperty("seconds", std::to_string(seconds));
  RecordProperty("r2", std::to_string(metrics->at("r2")));
}

TEST(AutoencoderTrainerTest, SameSeedSameResult) {
  const SplitDataset data = SensorSplit(600);
  const Hyperparameters params = {{"epochs", Int(3)}, {"seed", Int(11)}, {"dropout", Double(0)}};
  auto trainer = CpuTrainer();
  absl::StatusOr<TrainerMetrics> first = trainer->Train(data, params, {});
  absl::StatusOr<TrainerMetrics> second = trainer->Train(data, params, {});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_DOUBLE_EQ(first->at("r2"), second->at("r2"));
  Hyperparameters other = params;
  other["seed"] = Int(12);
  absl::StatusOr<TrainerMetrics> third = trainer->Train(data, other, {});
  ASSERT_TRUE(third.ok());
  EXPECT_NE(first->at("r2"), third->at("r2"));
}

TEST(AutoencoderTrainerTest, EveryActivationAndDepthTrains) {
  const SplitDataset data = SensorSplit(400);
  auto trainer = CpuTrainer();
  for (const char* activation : {"relu", "leaky_relu", "elu", "gelu", "silu", "tanh"}) {
    absl::StatusOr<TrainerMetrics> metrics = trainer->Train(
        data,
        {{"activation", String(activation)}, {"hidden_layers", Int(3)}, {"hidden_width", Int(48)},
         {"width_decay", Double(0.7)}, {"dropout", Double(0.1)}, {"epochs", Int(2)},
         {"weight_decay", Double(1e-4)}, {"batch_size", Int(32)}},
        {});
    ASSERT_TRUE(metrics.ok()) << activation << ": " << metrics.status();
    EXPECT_TRUE(std::isfinite(metrics->at("r2"))) << activation;
  }
}

TEST(AutoencoderTrainerTest, BadHyperparametersAreInvalidArgumentsThatNameThem) {
  const SplitDataset data = SensorSplit(200);
  auto trainer = CpuTrainer();
  const std::vector<std::pair<Hyperparameters, std::string>> cases = {
      {{{"activation", String("sigmoidish")}}, "activation"},
      {{{"hidden_layers", Int(0)}}, "hidden_layers"},
      {{{"hidden_width", Double(12.5)}}, "hidden_width"},
      {{{"dropout", Double(1)}}, "dropout"},
      {{{"learning_rate", Double(0)}}, "learning_rate"},
      {{{"epochs", String("ten")}}, "epochs"},
      {{{"bottleneck", Int(32)}}, "bottleneck"},  // As wide as the 32 channels.
      {{{"max_depth", Int(3)}}, "max_depth"},
  };
  for (const auto& [params, name] : cases) {
    absl::StatusOr<TrainerMetrics> metrics = trainer->Train(data, params, {});
    ASSERT_FALSE(metrics.ok()) << name;
    EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(metrics.status().message().find(name), std::string::npos) << metrics.status();
  }
}

// The same ranges and words as spec validation's, from services/common/model_catalog.h.
TEST(AutoencoderTrainerTest, RangesAreTheCataloguesThatValidationUses) {
  const SplitDataset data = SensorSplit(200);
  auto trainer = CpuTrainer();
  const std::vector<std::pair<Hyperparameters, std::string>> cases = {
      {{{"dropout", Double(1)}}, "AutoEncoder hyperparameter dropout must be in [0, 1), got 1"},
      {{{"hidden_layers", Int(9)}},
       "AutoEncoder hyperparameter hidden_layers must be a whole number in [1, 8], got 9"},
      {{{"bottleneck", Int(32)}},
       "AutoEncoder hyperparameter bottleneck 32 must be smaller than the data's 32 channels "
       "(feature columns), or nothing is compressed"},
  };
  for (const auto& [params, message] : cases) {
    EXPECT_EQ(trainer->Train(data, params, {}).status().message(), message);
  }
}

TEST(AutoencoderTrainerTest, DivergenceFailsWithAHint) {
  const SplitDataset data = SensorSplit(400);
  absl::StatusOr<TrainerMetrics> metrics = CpuTrainer()->Train(
      data, {{"learning_rate", Double(10)}, {"epochs", Int(5)}, {"activation", String("elu")}}, {});
  // Never a silent NaN: the trial fails and says what to change.
  ASSERT_FALSE(metrics.ok()) << "r2 " << metrics->at("r2");
  EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(metrics.status().message().find("lower learning_rate"), std::string::npos)
      << metrics.status();
}

// Cancelled once training runs (at the first epoch's report, from inside Train), it stops at
// the next batch: a check made only before training starts would train all 50 epochs.
TEST(AutoencoderTrainerTest, CancellationStopsBetweenBatches) {
  const SplitDataset data = SensorSplit(2000);
  std::atomic<bool> cancelled{false};
  std::vector<int64_t> reported;
  TrialContext context;
  context.cancelled = &cancelled;
  context.progress = [&](int64_t epoch, double) {
    reported.push_back(epoch);
    cancelled = true;
  };
  absl::StatusOr<TrainerMetrics> metrics = CpuTrainer()->Train(data, {{"epochs", Int(50)}}, context);
  EXPECT_EQ(metrics.status().code(), absl::StatusCode::kCancelled) << metrics.status();
  EXPECT_EQ(metrics.status().message(), "cancelled in epoch 2");
  EXPECT_EQ(reported, std::vector<int64_t>{1});
}

TEST(AutoencoderTrainerTest, DevicePreferences) {
  EXPECT_FALSE(ParseDevicePreference("gpu").ok());
  EXPECT_EQ(*ParseDevicePreference("cpu"), DevicePreference::kCpu);
  const TorchDevices devices = ProbeTorchDevices();
  absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> automatic =
      AutoencoderTrainer::Create(DevicePreference::kAuto);
  ASSERT_TRUE(automatic.ok());
  absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> cuda =
      AutoencoderTrainer::Create(DevicePreference::kCuda);
  if (devices.cuda_devices == 0) {
    EXPECT_EQ((*automatic)->device(), "cpu");
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  } else {
    EXPECT_EQ((*automatic)->device(), "cuda:0");
    EXPECT_TRUE(cuda.ok());
  }
}

// Points DHPT_AUTOENCODER_MODULE at `path` for one scope.
class ModuleOverride {
 public:
  explicit ModuleOverride(const std::string& path) { setenv(kAutoencoderModuleEnv, path.c_str(), 1); }
  ~ModuleOverride() { unsetenv(kAutoencoderModuleEnv); }
};

// The libtorch code is a library loaded at the first trial: one that is missing, or is not the
// AutoEncoder's, fails the trial (and a CUDA worker's start) saying what to install where.
TEST(AutoencoderTrainerTest, AMissingLibraryIsAClearTrialError) {
  using ::testing::HasSubstr;
  const SplitDataset data = SensorSplit(100);
  const Hyperparameters params = {{"epochs", Int(1)}};
  {
    const std::string missing = "/nonexistent/libdhpt_autoencoder.so";
    ModuleOverride override(missing);
    const TorchDevices devices = ProbeTorchDevices();
    EXPECT_EQ(devices.cuda_devices, 0);
    EXPECT_THAT(devices.error, HasSubstr(missing));
    absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> cuda =
        AutoencoderTrainer::Create(DevicePreference::kCuda);
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(cuda.status().message(), HasSubstr("DHPT_AUTOENCODER_MODULE"));

    absl::StatusOr<TrainerMetrics> metrics = CpuTrainer()->Train(data, params, {});
    EXPECT_EQ(metrics.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(metrics.status().message(), HasSubstr("cannot load the AutoEncoder library"));
    EXPECT_THAT(metrics.status().message(), HasSubstr(missing));
    EXPECT_THAT(metrics.status().message(), HasSubstr("DHPT_AUTOENCODER_MODULE"));
  }
  {
    ModuleOverride override("libm.so.6");  // A library, but not the AutoEncoder's.
    absl::StatusOr<TrainerMetrics> metrics = CpuTrainer()->Train(data, params, {});
    EXPECT_EQ(metrics.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(metrics.status().message(),
                HasSubstr("is not an AutoEncoder library: it has no DhptAutoencoderModule"));
  }
  // The library beside this test binary again.
  EXPECT_TRUE(CpuTrainer()->Train(data, params, {}).ok());
}

// Deployment costs of a completed trial: all there, none zero, and a wider network is larger
// and slower per row. Printed, as the example values docs/deployment-costs.md quotes.
TEST(AutoencoderTrainerTest, MeasuresDeploymentCosts) {
  const SplitDataset data = SensorSplit(500);
  TrialContext context;
  context.threads = 2;
  context.measure_deployment = true;
  auto trainer = CpuTrainer();
  auto train = [&](int64_t width) {
    absl::StatusOr<TrainerMetrics> metrics = trainer->Train(
        data, {{"epochs", Int(2)}, {"hidden_width", Int(width)}, {"bottleneck", Int(4)}}, context);
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    return metrics.ok() ? *metrics : TrainerMetrics{};
  };
  const TrainerMetrics narrow = train(16);
  const TrainerMetrics wide = train(512);
  for (const TrainerMetrics* m : {&narrow, &wide}) {
    std::printf("autoencoder: model_bytes=%.0f latency_us=%.2f batch256_us=%.3f "
                "peak_rss_bytes=%.0f\n",
                m->at("model_bytes"), m->at("inference_latency_us"),
                m->at("inference_latency_batch256_us"),
                m->contains("inference_peak_rss_bytes") ? m->at("inference_peak_rss_bytes") : -1);
    for (const char* name :
         {"model_bytes", "inference_latency_us", "inference_latency_batch256_us"}) {
      EXPECT_GT(m->at(name), 0) << name;
    }
  }
  EXPECT_GT(wide.at("model_bytes"), 10 * narrow.at("model_bytes"));
  EXPECT_GT(wide.at("inference_latency_batch256_us"), narrow.at("inference_latency_batch256_us"));

  context.measure_deployment = false;
  absl::StatusOr<TrainerMetrics> plain = trainer->Train(data, {{"epochs", Int(1)}}, context);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->contains("model_bytes"));
}

}  // namespace
}  // namespace dhpt::worker
