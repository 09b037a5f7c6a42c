#include "services/worker/autoencoder_trainer.h"

#include <torch/version.h>  // Its macros only: this file links no libtorch (autoencoder_module.h).

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "services/common/model_catalog.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"
#include "services/worker/autoencoder_module.h"
#include "services/worker/inference_benchmark.h"
#include "services/worker/module_loader.h"

namespace dhpt::worker {
namespace {

// A probe that has not answered in this long is killed and counts as no device: CUDA's first
// initialisation takes seconds on a Jetson, never minutes.
constexpr absl::Duration kProbeTimeout = absl::Seconds(120);

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

constexpr ModuleSpec kAutoencoderModuleSpec = {
    .what = "AutoEncoder",
    .file = kAutoencoderModuleFile,
    .env = kAutoencoderModuleEnv,
    .symbol = kAutoencoderModuleSymbol,
    .abi = kAutoencoderModuleAbi,
};

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
// Loading libtorch maps and dirties more than a hundred MiB that stay for the life of a
// process, so the question is asked by a forked child that loads the library and exits.
TorchDevices ProbeTorchDevices() {
  const ModuleProbe probe = ProbeModule(
      kAutoencoderModuleSpec,
      [](const void* table, std::array<int64_t, 4>& values) {
        const TorchDevices devices = static_cast<const AutoencoderModule*>(table)->probe();
        values[0] = devices.built_with_cuda;
        values[1] = devices.cuda_devices;
      },
      kProbeTimeout);
  TorchDevices devices;
  devices.error = probe.error;
  devices.module_unusable = probe.unusable;
  if (probe.loaded) {
    devices.built_with_cuda = probe.values[0] != 0;
    devices.cuda_devices = static_cast<int>(probe.values[1]);
  }
  return devices;
}

absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> AutoencoderTrainer::Create(
    DevicePreference preference) {
  // The CPU needs no probe, so nothing of libtorch is loaded before the first trial.
  if (preference == DevicePreference::kCpu) {
    return std::unique_ptr<AutoencoderTrainer>(new AutoencoderTrainer("cpu"));
  }
  return Create(preference, ProbeTorchDevices());
}

absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> AutoencoderTrainer::Create(
    DevicePreference preference, const TorchDevices& devices) {
  std::string device = "cpu";
  if (preference != DevicePreference::kCpu && devices.cuda_devices > 0) device = "cuda:0";
  if (preference == DevicePreference::kCuda && device == "cpu") {
    return absl::FailedPreconditionError(
        !devices.error.empty()   ? absl::StrCat("--device=cuda: ", devices.error)
        : devices.built_with_cuda ? "--device=cuda: no CUDA device is visible"
                                  : "--device=cuda: this libtorch was built without CUDA");
  }
  return std::unique_ptr<AutoencoderTrainer>(new AutoencoderTrainer(device));
}

absl::StatusOr<TrainerMetrics> AutoencoderTrainer::Train(const SplitDataset& data,
                                                         const Hyperparameters& params,
                                                         const TrialContext& context) {
  ASSIGN_OR_RETURN(AutoencoderConfig config, ParseAutoencoderConfig(params));
  if (data.train.cols < 2) {
    return absl::InvalidArgumentError("an AutoEncoder needs at least 2 feature columns");
  }
  if (absl::Status status = CheckAutoencoderBottleneck(config.bottleneck, data.train.cols);
      !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("AutoEncoder hyperparameter ", status.message()));
  }
  ASSIGN_OR_RETURN(const AutoencoderModule* module,
                   LoadModule<AutoencoderModule>(kAutoencoderModuleSpec));
  ASSIGN_OR_RETURN(AutoencoderRun run,
                   module->train(data, config, context, device_, &MeasureInference));
  if (run.deployment.has_value()) AddDeploymentMetrics(*run.deployment, run.metrics);
  return std::move(run.metrics);
}

}  // namespace dhpt::worker
