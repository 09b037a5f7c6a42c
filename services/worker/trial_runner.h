#pragma once

// Runs one assigned trial to a TrialResult: loads the (cached) dataset, trains or evaluates,
// measures (training costs, telemetry, and for completed trials of trained models the
// deployment costs), and turns every error into a FAILED result with the reason. Used by the worker
// runtime and, with no scheduler at all, by sequential runs.

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "dhpt/v1/worker_service.pb.h"
#include "services/worker/command_registry.h"
#include "services/worker/datasets.h"
#include "services/worker/gpu_telemetry.h"
#include "services/worker/model_trainer.h"
#include "services/worker/power_rails.h"

namespace dhpt::worker {

struct TrialRunnerOptions {
  // Runs AUTOENCODER trials; without one this runner refuses them.
  std::shared_ptr<ModelTrainer> autoencoder;
  // Sampled while every trial runs; without one, results carry no GPU figures.
  std::shared_ptr<GpuReader> gpu;
  // Sampled likewise and integrated to the trial's energy; without them, no energy figures.
  std::shared_ptr<PowerRails> power;
  // How often the GPU and the power rails are sampled.
  absl::Duration sample_interval = absl::Milliseconds(100);
  // Where CSV files may be read from and how large a dataset may be; with the defaults, no
  // CSV file at all.
  DatasetOptions datasets;
  // The programs COMMAND trials may run, by name; without any, this runner refuses them.
  std::shared_ptr<const CommandRegistry> commands;
  CommandOptions command_options;
};

class TrialRunner {
 public:
  explicit TrialRunner(TrialRunnerOptions options = {})
      : options_(std::move(options)), datasets_(options_.datasets) {}
  // Never throws: this is the trial's exception boundary. std::bad_alloc and any other
  // std::exception from loading or training become a FAILED result with a message DHPT wrote
  // (the exception's own text goes to the log only), and the worker lives on.
  v1::TrialResult Run(const v1::Assign& assign, const TrialContext& context);

 private:
  v1::TrialResult RunUnguarded(const v1::Assign& assign, const TrialContext& context);

  const TrialRunnerOptions options_;
  DatasetCache datasets_;
};

}  // namespace dhpt::worker
