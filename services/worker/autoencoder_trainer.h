#pragma once

// AutoEncoder trials on libtorch: an MLP encoder and a mirrored decoder trained to reconstruct
// the (standardised) features. The objective is the reconstruction R² on the validation split,
// 1 - SSE/SST over every feature in the data's own units; the validation loss (MSE on
// standardised features) is streamed after every epoch. A run whose validation loss turns
// non-finite or exceeds 10^4 (the mean scores about 1) fails as diverged.
//
// Hyperparameters (defaults in brackets):
//   hidden_layers [2]     hidden layers on each side of the bottleneck, 1..8
//   hidden_width [64]     width of the first (and last) hidden layer, 1..4096
//   width_decay [0.5]     each further hidden layer is this times narrower (0 < d <= 1), never
//                         narrower than the bottleneck
//   bottleneck [8]        size of the code, 1..4096
//   activation [relu]     relu, leaky_relu, elu, gelu, silu, tanh
//   learning_rate [1e-3]  AdamW step size
//   weight_decay [0]      AdamW decoupled weight decay
//   dropout [0]           after every hidden activation, 0 <= p < 1
//   epochs [20], batch_size [64], seed [0]
//
// With context.measure_deployment, a completed trial also reports its deployment costs
// (inference_benchmark.h): the size of the network saved with torch::save, and the latency of
// the whole inference path a deployment runs (standardise, forward pass under InferenceMode on
// the trial's device, back to the data's units on the host) with one intra-op thread.
//
// The libtorch code is a shared library of its own, libdhpt_autoencoder.so, loaded at the first
// trial (autoencoder_module.h): the worker binary links no libtorch, and a library that cannot
// be loaded fails the trial with FAILED_PRECONDITION saying where it was looked for. This header
// stays free of torch headers.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "services/common/model_catalog.h"
#include "services/worker/model_trainer.h"

namespace dhpt::worker {

enum class DevicePreference { kAuto, kCuda, kCpu };

absl::StatusOr<DevicePreference> ParseDevicePreference(const std::string& text);

struct AutoencoderConfig {
  int hidden_layers = 2;
  int hidden_width = 64;
  double width_decay = 0.5;
  int bottleneck = 8;
  std::string activation = "relu";
  double learning_rate = 1e-3;
  double weight_decay = 0;
  double dropout = 0;
  int epochs = kDefaultAutoencoderEpochs;
  int batch_size = 64;
  int64_t seed = 0;
};

// INVALID_ARGUMENT naming the hyperparameter and its allowed values.
absl::StatusOr<AutoencoderConfig> ParseAutoencoderConfig(const Hyperparameters& params);

// What libtorch can offer this process.
// "1.13.0": the libtorch this binary was built with.
std::string LibtorchVersion();

struct TorchDevices {
  bool built_with_cuda = false;
  int cuda_devices = 0;
  std::string error;  // Why libtorch could not be asked (no library): then no device is known.
  // The module could not be loaded (missing, not ours, truncated: the probe loading it died),
  // as against a probe that only ran out of time: such a worker could run no AutoEncoder trial.
  bool module_unusable = false;
};
// Asked in a short-lived child process that loads the library, so that this process maps no
// libtorch until its first trial. Takes as long as libtorch's (and CUDA's) initialisation.
TorchDevices ProbeTorchDevices();

class AutoencoderTrainer final : public ModelTrainer {
 public:
  // kAuto takes CUDA device 0 when one is visible and the CPU otherwise; kCuda fails with
  // FAILED_PRECONDITION when none is visible. kCpu loads nothing; the others probe.
  static absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> Create(DevicePreference preference);
  // With devices already probed (the GPU worker probes once at start).
  static absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> Create(DevicePreference preference,
                                                                    const TorchDevices& devices);

  std::string device() const override { return device_; }
  bool on_cuda() const { return device_ != "cpu"; }
  absl::StatusOr<TrainerMetrics> Train(const SplitDataset& data, const Hyperparameters& params,
                                       const TrialContext& context) override;

 private:
  explicit AutoencoderTrainer(std::string device) : device_(std::move(device)) {}
  const std::string device_;
};

}  // namespace dhpt::worker
