// dhpt-gpu-worker: runs AutoEncoder trials on libtorch, on a CUDA device when one is visible.
// On a node without one it either refuses to start (--require-gpu, set by the Helm chart, so a
// GPU pod that lands on a Raspberry Pi fails loudly instead of training on its CPU) or announces
// itself as a CPU device, and the scheduler sends it only studies that allow a CPU fallback.

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "services/common/logging.h"
#include "services/worker/autoencoder_trainer.h"
#include "services/worker/worker_main.h"

ABSL_FLAG(std::string, device, "auto",
          "auto (CUDA device 0 when visible, else the CPU), cuda (fail without one) or cpu");
ABSL_FLAG(bool, require_gpu, false,
          "exit at start unless a CUDA device is visible (the Helm chart sets it)");
ABSL_FLAG(bool, run_cpu_models, false,
          "also run XGBoost, Random Forest and function trials, which otherwise go to CPU workers");

namespace dhpt::worker {
namespace {

using v1::Model;

absl::StatusOr<WorkerSetup> SetUpGpuWorker() {
  absl::StatusOr<DevicePreference> preference = ParseDevicePreference(absl::GetFlag(FLAGS_device));
  if (!preference.ok()) return preference.status();
  // Probed once, in a child process: this worker maps no libtorch until its first trial. Also
  // with --device=cpu: a worker whose module cannot be loaded would announce AutoEncoders and
  // fail each one in a millisecond (using up studies' budgets), or die loading a truncated one.
  const TorchDevices devices = ProbeTorchDevices();
  if (devices.module_unusable) {
    // The probe's message says what is wrong and what to install where.
    return absl::FailedPreconditionError(
        absl::StrCat("this worker could run no AutoEncoder trial: ", devices.error));
  }
  const std::string no_cuda_reason = *preference == DevicePreference::kCpu ? "--device=cpu was given"
                                     : !devices.error.empty()              ? devices.error
                                     : devices.built_with_cuda ? "libtorch sees 0 CUDA devices"
                                                               : "this libtorch was built without CUDA";
  if (absl::GetFlag(FLAGS_require_gpu) &&
      (devices.cuda_devices == 0 || *preference == DevicePreference::kCpu)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device visible: this worker must run on a GPU node; check the node's gpu "
        "label and the Deployment's node affinity (",
        no_cuda_reason, ")"));
  }
  absl::StatusOr<std::unique_ptr<AutoencoderTrainer>> trainer =
      AutoencoderTrainer::Create(*preference, devices);
  if (!trainer.ok()) return trainer.status();

  WorkerSetup setup;
  setup.models = {Model::AUTOENCODER};
  if (absl::GetFlag(FLAGS_run_cpu_models)) {  // Their XGBoost library: checked by WorkerMain.
    setup.models.insert(setup.models.end(), {Model::XGBOOST, Model::RANDOM_FOREST, Model::FUNCTION});
  }
  if ((*trainer)->on_cuda()) {
    setup.device_kind = v1::WorkerCapabilities::CUDA;
    setup.device_name = (*trainer)->device();
    absl::StatusOr<std::unique_ptr<GpuReader>> gpu = DetectGpuReader();
    if (gpu.ok()) {
      setup.device_name = (*gpu)->device().name;
      setup.device_memory_bytes = (*gpu)->device().memory_total_bytes.value_or(0);
      setup.gpu_telemetry = (*gpu)->device().source;
      setup.runner.gpu = std::move(*gpu);
    } else {
      DHPT_LOG_WARNING("trials report no GPU figures: %s", gpu.status().message());
    }
  } else {
    DHPT_LOG_WARNING(
        "no CUDA device in use (--device=%s: %s): AutoEncoder trials run on the CPU, and the "
        "scheduler sends only studies with allow_cpu_fallback",
        absl::GetFlag(FLAGS_device), no_cuda_reason);
  }
  setup.runner.autoencoder = std::move(*trainer);
  return setup;
}

}  // namespace
}  // namespace dhpt::worker

int main(int argc, char** argv) {
  dhpt::worker::WorkerKind kind;
  kind.binary = "dhpt-gpu-worker";
  kind.label = "gpu";
  kind.purpose = "Runs AutoEncoder trials on libtorch, on a CUDA device when one is visible.";
  kind.own_flags = {"device", "require_gpu", "run_cpu_models"};
  kind.setup = dhpt::worker::SetUpGpuWorker;
  kind.library_versions = ", libtorch " + dhpt::worker::LibtorchVersion();
  return dhpt::worker::WorkerMain(argc, argv, kind);
}
