#pragma once

// The seam between the GPU worker and libdhpt_autoencoder.so, the shared library that holds the
// AutoEncoder's libtorch code. The worker links no libtorch: linked at start, libtorch's
// relocations and static initialisers alone held about 145 MiB of an idle worker (of it 42 MiB
// of live malloc'd operator registrations, docs/benchmarks.md "Idle memory"). The worker
// dlopens the library at its first AutoEncoder trial, and asks it which devices libtorch sees
// from a short-lived child process at start (autoencoder_trainer.cc).
//
// Both sides are built from this tree with one compiler, so the table passes C++ types (the
// standard library's and Abseil's, whose shared libraries both sides load); `abi` changes with
// any change here, and a library of another version is refused by name.
//
// No torch, no gRPC and no generated proto code is used through this header: the library links
// only libtorch and Abseil, so it holds no second copy of the worker's protobuf registrations.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "services/worker/autoencoder_trainer.h"
#include "services/worker/inference_benchmark.h"

namespace dhpt::worker {

// The library's file name, looked for next to the executable, then in ../lib/dhpt/ beside it;
// DHPT_AUTOENCODER_MODULE (a path) overrides both.
inline constexpr char kAutoencoderModuleFile[] = "libdhpt_autoencoder.so";
inline constexpr char kAutoencoderModuleEnv[] = "DHPT_AUTOENCODER_MODULE";
// The one symbol the library exports: extern "C" const AutoencoderModule* DhptAutoencoderModule().
inline constexpr char kAutoencoderModuleSymbol[] = "DhptAutoencoderModule";
inline constexpr int kAutoencoderModuleAbi = 1;

// What one trained network reports; the worker adds the deployment metrics.
struct AutoencoderRun {
  TrainerMetrics metrics;
  std::optional<DeploymentCosts> deployment;  // With context.measure_deployment.
};

// MeasureInference (inference_benchmark.h), passed in so that the library needs none of the
// worker's own code linked in.
using MeasureInferenceFunction = absl::StatusOr<InferenceCosts> (*)(
    const Dataset& validation, const PredictRows& predict, const InferenceBenchmarkOptions& options);

struct AutoencoderModule {
  int abi = kAutoencoderModuleAbi;
  const char* libtorch_version = "";
  TorchDevices (*probe)() = nullptr;
  // Trains on data.train and scores on data.validation on `device` ("cpu", "cuda:0"). The
  // caller has parsed and checked `config` against the data; libtorch's exceptions stop inside.
  absl::StatusOr<AutoencoderRun> (*train)(const SplitDataset& data, const AutoencoderConfig& config,
                                          const TrialContext& context, const std::string& device,
                                          MeasureInferenceFunction measure_inference) = nullptr;
};

}  // namespace dhpt::worker

extern "C" const dhpt::worker::AutoencoderModule* DhptAutoencoderModule();
