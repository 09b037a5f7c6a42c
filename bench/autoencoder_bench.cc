// AutoEncoder trial time and peak memory on the CPU: DHPT's libtorch trainer, timed here, and
// the same network, data and settings in Debian's python3-torch (bench/torch_autoencoder_peer.py,
// which reads the data this harness exports). Each run is one trial: standardise, train, score.
//
//   build/bin/autoencoder_bench --export_dir=/tmp/dhpt-ae
//   /usr/bin/python3 bench/torch_autoencoder_peer.py /tmp/dhpt-ae
//
// Peak memory is the trial's: the process's high-water mark is reset before each run
// (/proc/self/clear_refs) and read after it, the same way in both.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "services/worker/autoencoder_trainer.h"
#include "services/worker/resource_meter.h"

ABSL_FLAG(int, samples, 8000, "rows of sensor data (80% train, 20% validation)");
ABSL_FLAG(int, runs, 5, "trials to time; the median is reported");
ABSL_FLAG(int, threads, 2, "threads per trial (torch.set_num_threads in the peer)");
ABSL_FLAG(std::string, export_dir, "", "write train.csv, validation.csv and settings.txt here for the peer");

namespace dhpt::worker {
namespace {

// The settings both sides use.
constexpr int kHiddenLayers = 2, kHiddenWidth = 64, kBottleneck = 6, kEpochs = 10, kBatch = 64;
constexpr double kWidthDecay = 0.5, kLearningRate = 3e-3;

void WriteCsv(const std::filesystem::path& path, const Dataset& data) {
  std::ofstream out(path);
  for (int64_t j = 0; j < data.cols; ++j) out << (j ? "," : "") << data.feature_names[j];
  out << "\n";
  out.precision(9);
  for (int64_t i = 0; i < data.rows; ++i) {
    for (int64_t j = 0; j < data.cols; ++j) out << (j ? "," : "") << data.features[i * data.cols + j];
    out << "\n";
  }
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int Main() {
  v1::SensorChannels spec;
  spec.set_samples(absl::GetFlag(FLAGS_samples));
  spec.set_seed(1);
  absl::StatusOr<Dataset> data = GenerateSensorChannels(spec);
  absl::StatusOr<SplitDataset> split = SplitTrainValidation(*data, 0.2, 0);
  if (!split.ok()) {
    std::fprintf(stderr, "%s\n", split.status().ToString().c_str());
    return 1;
  }
  if (const std::string dir = absl::GetFlag(FLAGS_export_dir); !dir.empty()) {
    std::filesystem::create_directories(dir);
    WriteCsv(std::filesystem::path(dir) / "train.csv", split->train);
    WriteCsv(std::filesystem::path(dir) / "validation.csv", split->validation);
    std::ofstream(std::filesystem::path(dir) / "settings.txt")
        << "hidden_layers=" << kHiddenLayers << "\nhidden_width=" << kHiddenWidth
        << "\nwidth_decay=" << kWidthDecay << "\nbottleneck=" << kBottleneck
        << "\nlearning_rate=" << kLearningRate << "\nepochs=" << kEpochs
        << "\nbatch_size=" << kBatch << "\nthreads=" << absl::GetFlag(FLAGS_threads)
        << "\nruns=" << absl::GetFlag(FLAGS_runs) << "\n";
  }
  auto number = [](double v) {
    v1::ParameterValue value;
    value.set_double_value(v);
    return value;
  };
  const Hyperparameters params = {
      {"hidden_layers", number(kHiddenLayers)}, {"hidden_width", number(kHiddenWidth)},
      {"width_decay", number(kWidthDecay)},     {"bottleneck", number(kBottleneck)},
      {"learning_rate", number(kLearningRate)}, {"epochs", number(kEpochs)},
      {"batch_size", number(kBatch)}};
  auto trainer = AutoencoderTrainer::Create(DevicePreference::kCpu);
  TrialContext context;
  context.threads = absl::GetFlag(FLAGS_threads);
  std::vector<double> seconds, peaks, r2;
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    ResourceMeter meter;
    absl::StatusOr<TrainerMetrics> metrics = (*trainer)->Train(*split, params, context);
    const ResourceUsage usage = meter.Stop();
    if (!metrics.ok()) {
      std::fprintf(stderr, "%s\n", metrics.status().ToString().c_str());
      return 1;
    }
    seconds.push_back(usage.wall_seconds);
    peaks.push_back(usage.peak_rss_bytes.value_or(0) / (1 << 20));
    r2.push_back(metrics->at("r2"));
  }
  std::printf("dhpt libtorch %s: %d train rows x %lld channels, %d epochs, %d threads, %d runs\n",
              TORCH_VERSION_TEXT, static_cast<int>(split->train.rows),
              static_cast<long long>(split->train.cols), kEpochs, context.threads,
              absl::GetFlag(FLAGS_runs));
  std::printf("  trial time median %.2f s (min %.2f), peak RSS median %.0f MiB, r2 median %.4f\n",
              Median(seconds), *std::min_element(seconds.begin(), seconds.end()), Median(peaks),
              Median(r2));
  return 0;
}

}  // namespace
}  // namespace dhpt::worker

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dhpt::worker::Main();
}
