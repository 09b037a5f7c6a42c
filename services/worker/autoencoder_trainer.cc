#include "services/worker/autoencoder_trainer.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/version.h>  // Its macros only: this file links no libtorch (autoencoder_module.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "services/common/model_catalog.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"
#include "services/worker/autoencoder_module.h"
#include "services/worker/inference_benchmark.h"

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

std::string ExecutableDirectory() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return ".";
  const std::string executable(path, static_cast<size_t>(length));
  const size_t slash = executable.rfind('/');
  return slash == std::string::npos ? "." : executable.substr(0, slash);
}

// DHPT_AUTOENCODER_MODULE, else the library next to the executable (the build tree, `dhpt
// local`), else in ../lib/dhpt/ beside it (the images); the first candidate when none exists,
// so that the error names where it was looked for.
std::string ModulePath() {
  if (const char* path = std::getenv(kAutoencoderModuleEnv); path != nullptr && *path != '\0') {
    return path;
  }
  const std::string directory = ExecutableDirectory();
  const std::string beside = absl::StrCat(directory, "/", kAutoencoderModuleFile);
  const std::string installed = absl::StrCat(directory, "/../lib/dhpt/", kAutoencoderModuleFile);
  if (access(beside.c_str(), F_OK) != 0 && access(installed.c_str(), F_OK) == 0) return installed;
  return beside;
}

// dlopen hands back the same handle for a path already loaded, so every trial may ask; the
// library is never closed (libtorch cannot be unloaded).
absl::StatusOr<const AutoencoderModule*> LoadModule(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load the AutoEncoder library (", error != nullptr ? error : path,
        "): install ", kAutoencoderModuleFile, " beside this worker's binary or in ../lib/dhpt/, "
        "or set ", kAutoencoderModuleEnv, " to its path"));
  }
  auto* entry = reinterpret_cast<const AutoencoderModule* (*)()>(
      dlsym(handle, kAutoencoderModuleSymbol));
  if (entry == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not an AutoEncoder library: it has no ", kAutoencoderModuleSymbol));
  }
  const AutoencoderModule* module = entry();
  if (module->abi != kAutoencoderModuleAbi) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " was built for another version of this worker (interface ", module->abi,
        ", this worker needs ", kAutoencoderModuleAbi, "): install the library built with it"));
  }
  return module;
}

// What the probe process writes back: fixed size, so one write and no allocation in between.
struct ProbeReply {
  int loaded = 0;
  int built_with_cuda = 0;
  int cuda_devices = 0;
  char error[512] = {};
};

// In the forked child: load the library, ask libtorch, write the answer, exit without running
// libtorch's (or anyone's) static destructors.
[[noreturn]] void RunProbe(const std::string& path, int fd) {
  ProbeReply reply;
  if (absl::StatusOr<const AutoencoderModule*> module = LoadModule(path); module.ok()) {
    const TorchDevices devices = (*module)->probe();
    reply.loaded = 1;
    reply.built_with_cuda = devices.built_with_cuda;
    reply.cuda_devices = devices.cuda_devices;
  } else {
    std::snprintf(reply.error, sizeof(reply.error), "%s",
                  std::string(module.status().message()).c_str());
  }
  const char* data = reinterpret_cast<const char*>(&reply);
  for (size_t written = 0; written < sizeof(reply);) {
    const ssize_t n = write(fd, data + written, sizeof(reply) - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  _exit(0);
}

// Reads the probe's reply until `deadline`; false when it ended or timed out without one.
bool ReadReply(int fd, absl::Time deadline, ProbeReply& reply) {
  char* data = reinterpret_cast<char*>(&reply);
  size_t got = 0;
  while (got < sizeof(reply)) {
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0) return false;
    pollfd poll_fd{.fd = fd, .events = POLLIN};
    const int ready = poll(&poll_fd, 1, static_cast<int>(std::min<int64_t>(wait_ms, INT_MAX)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, data + got, sizeof(reply) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
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
// Loading libtorch maps and dirties more than a hundred MiB that stay for the life of a
// process, so the question is asked by a forked child that loads the library and exits. The
// child only loads, probes, writes and exits; glibc's fork keeps malloc and the loader usable
// in the child of a threaded process.
TorchDevices ProbeTorchDevices() {
  TorchDevices devices;
  const std::string path = ModulePath();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    devices.error = absl::StrCat("cannot ask libtorch for devices: pipe: ", std::strerror(errno));
    return devices;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    RunProbe(path, fds[1]);
  }
  close(fds[1]);
  if (pid < 0) {
    devices.error = absl::StrCat("cannot ask libtorch for devices: fork: ", std::strerror(errno));
    close(fds[0]);
    return devices;
  }
  ProbeReply reply;
  const bool answered = ReadReply(fds[0], absl::Now() + kProbeTimeout, reply);
  close(fds[0]);
  if (!answered) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!answered) {
    devices.module_unusable = WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL;
    devices.error = WIFSIGNALED(status)
                        ? absl::StrCat("the libtorch device probe (", path, ") died of signal ",
                                       WTERMSIG(status))
                        : absl::StrCat("the libtorch device probe (", path, ") gave no answer in ",
                                       absl::FormatDuration(kProbeTimeout));
    return devices;
  }
  if (reply.loaded == 0) {
    devices.module_unusable = true;
    devices.error = reply.error;
    return devices;
  }
  devices.built_with_cuda = reply.built_with_cuda != 0;
  devices.cuda_devices = reply.cuda_devices;
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
  ASSIGN_OR_RETURN(const AutoencoderModule* module, LoadModule(ModulePath()));
  ASSIGN_OR_RETURN(AutoencoderRun run,
                   module->train(data, config, context, device_, &MeasureInference));
  if (run.deployment.has_value()) AddDeploymentMetrics(*run.deployment, run.metrics);
  return std::move(run.metrics);
}

}  // namespace dhpt::worker
