#include "services/worker/autoencoder_trainer.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <ATen/CPUGeneratorImpl.h>
#include <cmath>
#include <exception>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/param_values.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/worker/inference_benchmark.h"

namespace dhpt::worker {
namespace {


// On standardised features, predicting the mean scores a loss of about 1. A loss this many
// times worse is a diverged run; reporting its astronomically negative R² as a result would
// only distort the optimiser's model, so the trial fails instead.
constexpr double kDivergedLoss = 1e4;

absl::Status Invalid(absl::string_view name, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("AutoEncoder hyperparameter ", name, ": ", message));
}

absl::StatusOr<double> Number(const std::string& name, const v1::ParameterValue& value) {
  if (std::optional<double> number = AsNumber(value)) return *number;
  return Invalid(name, absl::StrCat("must be a number, got \"", value.string_value(), "\""));
}

// Reads `name` within its range in the catalogue that spec validation also uses
// (services/common/model_catalog.h), so what a study may set is what this trainer runs.
absl::Status Read(const Hyperparameters& params, const std::string& name, auto& out) {
  auto it = params.find(name);
  if (it == params.end()) return absl::OkStatus();
  ASSIGN_OR_RETURN(double value, Number(name, it->second));
  const HyperparameterRange* range = FindHyperparameterRange(v1::Model::AUTOENCODER, name);
  if (range != nullptr) {
    if (absl::Status status = CheckHyperparameterValue(*range, value); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("AutoEncoder hyperparameter ", status.message()));
    }
  }
  out = static_cast<std::remove_reference_t<decltype(out)>>(value);
  return absl::OkStatus();
}

torch::nn::AnyModule Activation(const std::string& name) {
  if (name == "leaky_relu") return torch::nn::AnyModule(torch::nn::LeakyReLU());
  if (name == "elu") return torch::nn::AnyModule(torch::nn::ELU());
  if (name == "gelu") return torch::nn::AnyModule(torch::nn::GELU());
  if (name == "silu") return torch::nn::AnyModule(torch::nn::SiLU());
  if (name == "tanh") return torch::nn::AnyModule(torch::nn::Tanh());
  return torch::nn::AnyModule(torch::nn::ReLU());
}

// Hidden widths from the input side: hidden_width, then narrower by width_decay, never below
// the bottleneck.
std::vector<int64_t> HiddenWidths(const AutoencoderConfig& config) {
  std::vector<int64_t> widths;
  double width = config.hidden_width;
  for (int layer = 0; layer < config.hidden_layers; ++layer) {
    widths.push_back(std::max<int64_t>(config.bottleneck, std::llround(width)));
    width *= config.width_decay;
  }
  return widths;
}

// input -> hidden... -> bottleneck (linear code) -> hidden reversed... -> input.
torch::nn::Sequential BuildNetwork(int64_t inputs, const AutoencoderConfig& config) {
  torch::nn::Sequential network;
  const std::vector<int64_t> widths = HiddenWidths(config);
  auto hidden = [&](int64_t from, int64_t to) {
    network->push_back(torch::nn::Linear(from, to));
    network->push_back(Activation(config.activation));
    if (config.dropout > 0) network->push_back(torch::nn::Dropout(config.dropout));
  };
  int64_t width = inputs;
  for (int64_t next : widths) {
    hidden(width, next);
    width = next;
  }
  network->push_back(torch::nn::Linear(width, config.bottleneck));
  width = config.bottleneck;
  for (auto it = widths.rbegin(); it != widths.rend(); ++it) {
    hidden(width, *it);
    width = *it;
  }
  network->push_back(torch::nn::Linear(width, inputs));
  return network;
}

// PyTorch's default Linear initialisation (weights and biases uniform in ±1/sqrt(fan_in)),
// drawn from the trial's own generator so that concurrent trials stay reproducible.
void InitializeWeights(torch::nn::Sequential& network, at::Generator& generator) {
  torch::NoGradGuard no_grad;
  for (auto& module : network->modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      const double bound = 1 / std::sqrt(static_cast<double>(linear->options.in_features()));
      linear->weight.uniform_(-bound, bound, generator);
      linear->bias.uniform_(-bound, bound, generator);
    }
  }
}

// at::set_num_threads sets the calling thread's OpenMP team size, and also a process-wide
// default that a thread adopts on its first parallel operation (its lazy initialisation). So a
// trial first forces that initialisation (at::get_num_threads), then sets its own count: a
// neighbour's later change of the default can no longer reach it.
void SetTrialThreads(int threads) {
  (void)at::get_num_threads();
  at::set_num_threads(std::max(1, threads));
}

// One intra-op thread while the deployment is measured, the trial's count again afterwards. The
// process-wide default is 1 meanwhile, which reaches only threads that never ran a torch
// operation; every trial thread has (SetTrialThreads).
class SingleThreadedScope {
 public:
  SingleThreadedScope() : previous_(at::get_num_threads()) { at::set_num_threads(1); }
  ~SingleThreadedScope() { at::set_num_threads(previous_); }
  SingleThreadedScope(const SingleThreadedScope&) = delete;
  SingleThreadedScope& operator=(const SingleThreadedScope&) = delete;

 private:
  const int previous_;
};

absl::StatusOr<DeploymentCosts> MeasureDeployment(torch::nn::Sequential& network,
                                                  const Dataset& validation,
                                                  const torch::Tensor& mean,
                                                  const torch::Tensor& scale,
                                                  const torch::Device& device,
                                                  const TrialContext& context) {
  DeploymentCosts costs;
  std::ostringstream saved;
  torch::save(network, saved);
  costs.model_bytes = static_cast<double>(saved.tellp());
  network->eval();
  SingleThreadedScope single_threaded;
  const torch::Tensor device_mean = mean.to(device);
  const torch::Tensor device_scale = scale.to(device);
  auto predict = [&](const float* features, int64_t rows) -> absl::Status {
    try {
      torch::InferenceMode inference;
      torch::Tensor input =
          torch::from_blob(const_cast<float*>(features), {rows, validation.cols}, torch::kFloat32)
              .to(device);
      // Back on the host, as a caller would need it: this also waits for a CUDA device.
      torch::Tensor output =
          (network->forward((input - device_mean) / device_scale) * device_scale + device_mean)
              .to(torch::kCPU);
      (void)output;
      return absl::OkStatus();
    } catch (const c10::Error& error) {
      return absl::InternalError(
          absl::StrCat("libtorch inference: ", error.what_without_backtrace()));
    }
  };
  InferenceBenchmarkOptions options;
  options.cancelled = context.cancelled;
  ASSIGN_OR_RETURN(costs.inference, MeasureInference(validation, predict, options));
  return costs;
}

torch::Tensor ToTensor(const Dataset& data) {
  return torch::from_blob(const_cast<float*>(data.features.data()), {data.rows, data.cols},
                          torch::kFloat32)
      .clone();
}

absl::StatusOr<TrainerMetrics> TrainOnDevice(const SplitDataset& data,
                                             const AutoencoderConfig& config,
                                             const TrialContext& context,
                                             const torch::Device& device) {
  if (data.train.cols < 2) {
    return absl::InvalidArgumentError("an AutoEncoder needs at least 2 feature columns");
  }
  if (absl::Status status = CheckAutoencoderBottleneck(config.bottleneck, data.train.cols);
      !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("AutoEncoder hyperparameter ", status.message()));
  }
  SetTrialThreads(context.threads);
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(config.seed));

  // Standardise with the training split's statistics; constant columns keep scale 1.
  torch::Tensor train = ToTensor(data.train);
  torch::Tensor validation = ToTensor(data.validation);
  torch::Tensor mean = train.mean(0);
  torch::Tensor scale = train.std(0, /*unbiased=*/false);
  scale = torch::where(scale > 1e-6, scale, torch::ones_like(scale));
  torch::Tensor train_z = ((train - mean) / scale).to(device);
  torch::Tensor validation_z = ((validation - mean) / scale).to(device);
  const double sst = (validation - validation.mean(0)).pow(2).sum().item<double>();
  if (!(sst > 0)) {
    return absl::InvalidArgumentError("the validation features are constant: R² is undefined");
  }
  // R² in the data's own units, over every feature: reported after every epoch, so that early
  // stopping compares trials in the study's objective, and at the end.
  auto r2_and_sse = [&](const torch::Tensor& reconstruction_z) {
    torch::Tensor reconstruction = reconstruction_z.to(torch::kCPU) * scale + mean;
    const double sse = (validation - reconstruction).pow(2).sum().item<double>();
    return std::pair<double, double>{1 - sse / sst, sse};
  };

  torch::nn::Sequential network = BuildNetwork(data.train.cols, config);
  InitializeWeights(network, generator);
  network->to(device);
  torch::optim::AdamW optimizer(
      network->parameters(),
      torch::optim::AdamWOptions(config.learning_rate).weight_decay(config.weight_decay));

  const int64_t rows = data.train.rows;
  const int64_t batch = std::min<int64_t>(config.batch_size, rows);
  double validation_loss = 0;
  double r2 = 0;
  double sse = 0;
  for (int epoch = 1; epoch <= config.epochs; ++epoch) {
    network->train();
    torch::Tensor order = torch::randperm(rows, generator, torch::kLong).to(device);
    for (int64_t start = 0; start < rows; start += batch) {
      if (context.cancelled != nullptr && context.cancelled->load()) {
        return absl::CancelledError(absl::StrCat("cancelled in epoch ", epoch));
      }
      torch::Tensor inputs = train_z.index_select(0, order.slice(0, start, start + batch));
      optimizer.zero_grad();
      torch::Tensor loss = torch::mse_loss(network->forward(inputs), inputs);
      loss.backward();
      optimizer.step();
    }
    network->eval();
    torch::NoGradGuard no_grad;
    torch::Tensor reconstruction_z = network->forward(validation_z);
    validation_loss = torch::mse_loss(reconstruction_z, validation_z).item<double>();
    if (!std::isfinite(validation_loss) || validation_loss > kDivergedLoss) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training diverged: the validation loss is ", validation_loss, " after epoch ", epoch,
          " (predicting the mean scores about 1); lower learning_rate"));
    }
    std::tie(r2, sse) = r2_and_sse(reconstruction_z);
    if (context.progress) context.progress(epoch, r2);
  }
  if (config.epochs < 1) {  // Untrained: scored as it is.
    torch::NoGradGuard no_grad;
    network->eval();
    std::tie(r2, sse) = r2_and_sse(network->forward(validation_z));
  }
  TrainerMetrics metrics{
      {"r2", r2},
      {"mse", sse / static_cast<double>(validation.numel())},
      {"val_loss", validation_loss},
  };
  if (context.measure_deployment) {
    if (context.cancelled != nullptr && context.cancelled->load()) {
      return absl::CancelledError("cancelled after training");
    }
    ASSIGN_OR_RETURN(DeploymentCosts costs,
                     MeasureDeployment(network, data.validation, mean, scale, device, context));
    AddDeploymentMetrics(costs, metrics);
  }
  return metrics;
}

}  // namespace

absl::StatusOr<DevicePreference> ParseDevicePreference(const std::string& text) {
  if (text == "auto") return DevicePreference::kAuto;
  if (text == "cuda") return DevicePreference::kCuda;
  if (text == "cpu") return DevicePreference::kCpu;
  return absl::InvalidArgumentError(absl::StrCat("--device must be auto, cuda or cpu, not \"", text, "\""));
}

std::string LibtorchVersion() { return TORCH_VERSION; }

absl::StatusOr<AutoencoderConfig> ParseAutoencoderConfig(const Hyperparameters& params) {
  for (const auto& [name, value] : params) {
    if (!IsKnownHyperparameter(v1::Model::AUTOENCODER, name)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" is not an AutoEncoder hyperparameter"));
    }
  }
  AutoencoderConfig config;
  RETURN_IF_ERROR(Read(params, "hidden_layers", config.hidden_layers));
  RETURN_IF_ERROR(Read(params, "hidden_width", config.hidden_width));
  RETURN_IF_ERROR(Read(params, "width_decay", config.width_decay));
  RETURN_IF_ERROR(Read(params, "bottleneck", config.bottleneck));
  RETURN_IF_ERROR(Read(params, "learning_rate", config.learning_rate));
  RETURN_IF_ERROR(Read(params, "weight_decay", config.weight_decay));
  RETURN_IF_ERROR(Read(params, "dropout", config.dropout));
  RETURN_IF_ERROR(Read(params, "epochs", config.epochs));
  RETURN_IF_ERROR(Read(params, "batch_size", config.batch_size));
  RETURN_IF_ERROR(Read(params, "seed", config.seed));
  if (auto it = params.find("activation"); it != params.end()) {
    const std::vector<absl::string_view>& activations =
        *HyperparameterChoices(v1::Model::AUTOENCODER, "activation");
    const std::string& name = it->second.string_value();
    if (it->second.kind_case() != v1::ParameterValue::kStringValue ||
        std::find(activations.begin(), activations.end(), name) == activations.end()) {
      return Invalid("activation", absl::StrCat("must be one of ", absl::StrJoin(activations, ", ")));
    }
    config.activation = name;
  }
  return config;
}

TorchDevices ProbeTorchDevices() {
  TorchDevices devices;
  devices.built_with_cuda = at::hasCUDA();
  devices.cuda_devices = devices.built_with_cuda ? static_cast<int>(torch::cuda::device_count()) : 0;
  return devices;
}

absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> AutoencoderTrainer::Create(
    DevicePreference preference) {
  const TorchDevices devices = ProbeTorchDevices();
  std::string device = "cpu";
  if (preference != DevicePreference::kCpu && devices.cuda_devices > 0) device = "cuda:0";
  if (preference == DevicePreference::kCuda && device == "cpu") {
    return absl::FailedPreconditionError(
        devices.built_with_cuda ? "--device=cuda: no CUDA device is visible"
                                : "--device=cuda: this libtorch was built without CUDA");
  }
  return std::unique_ptr<AutoencoderTrainer>(new AutoencoderTrainer(device));
}

absl::StatusOr<TrainerMetrics> AutoencoderTrainer::Train(const SplitDataset& data,
                                                         const Hyperparameters& params,
                                                         const TrialContext& context) {
  ASSIGN_OR_RETURN(AutoencoderConfig config, ParseAutoencoderConfig(params));
  // libtorch reports errors (out of memory on the device, shape mistakes) as exceptions; they
  // stop here and become the trial's error.
  try {
    return TrainOnDevice(data, config, context, torch::Device(device_));
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("libtorch: ", error.what_without_backtrace()));
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("libtorch: ", error.what()));
  }
}

}  // namespace dhpt::worker
