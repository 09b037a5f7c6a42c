// libdhpt_autoencoder.so: the AutoEncoder's libtorch code (autoencoder_trainer.h says what it
// trains and reports), loaded by the GPU worker at its first AutoEncoder trial
// (autoencoder_module.h says why it is a library of its own). Links libtorch and Abseil only.

#include "services/worker/autoencoder_module.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <ATen/CPUGeneratorImpl.h>
#include <cmath>
#include <exception>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "services/common/status_macros.h"

namespace dhpt::worker {
namespace {

// On standardised features, predicting the mean scores a loss of about 1. A loss this many
// times worse is a diverged run; reporting its astronomically negative R² as a result would
// only distort the optimiser's model, so the trial fails instead.
constexpr double kDivergedLoss = 1e4;

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
                                                  const TrialContext& context,
                                                  MeasureInferenceFunction measure_inference) {
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
  ASSIGN_OR_RETURN(costs.inference, measure_inference(validation, predict, options));
  return costs;
}

torch::Tensor ToTensor(const Dataset& data) {
  return torch::from_blob(const_cast<float*>(data.features.data()), {data.rows, data.cols},
                          torch::kFloat32)
      .clone();
}

// The caller (AutoencoderTrainer::Train) has checked the columns and the bottleneck.
absl::StatusOr<AutoencoderRun> TrainOnDevice(const SplitDataset& data,
                                             const AutoencoderConfig& config,
                                             const TrialContext& context,
                                             const torch::Device& device,
                                             MeasureInferenceFunction measure_inference) {
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
  AutoencoderRun run;
  run.metrics = {
      {"r2", r2},
      {"mse", sse / static_cast<double>(validation.numel())},
      {"val_loss", validation_loss},
  };
  if (context.measure_deployment) {
    if (context.cancelled != nullptr && context.cancelled->load()) {
      return absl::CancelledError("cancelled after training");
    }
    ASSIGN_OR_RETURN(run.deployment, MeasureDeployment(network, data.validation, mean, scale,
                                                       device, context, measure_inference));
  }
  return run;
}

TorchDevices Probe() {
  TorchDevices devices;
  devices.built_with_cuda = at::hasCUDA();
  devices.cuda_devices = devices.built_with_cuda ? static_cast<int>(torch::cuda::device_count()) : 0;
  return devices;
}

// libtorch reports errors (out of memory on the device, shape mistakes) as exceptions; they
// stop here and become the trial's error.
absl::StatusOr<AutoencoderRun> Train(const SplitDataset& data, const AutoencoderConfig& config,
                                     const TrialContext& context, const std::string& device,
                                     MeasureInferenceFunction measure_inference) {
  try {
    return TrainOnDevice(data, config, context, torch::Device(device), measure_inference);
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("libtorch: ", error.what_without_backtrace()));
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("libtorch: ", error.what()));
  }
}

}  // namespace
}  // namespace dhpt::worker

extern "C" __attribute__((visibility("default"))) const dhpt::worker::AutoencoderModule*
DhptAutoencoderModule() {
  static const dhpt::worker::AutoencoderModule module{
      .abi = dhpt::worker::kAutoencoderModuleAbi,
      .libtorch_version = TORCH_VERSION,
      .probe = dhpt::worker::Probe,
      .train = dhpt::worker::Train,
  };
  return &module;
}

