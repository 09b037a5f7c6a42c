#pragma once

// The seam between the workers and libdhpt_xgboost.so, the shared library that holds the code
// calling XGBoost's C API (xgboost_module.cc). Linked at start, XGBoost and what it needs
// (dmlc, libgomp) held about 4 MiB of an idle CPU worker's 22 MiB, and its static registries
// ran before main; the worker now loads the library at its first XGBoost or Random Forest
// trial and checks at start, in a child process, that it loads (module_loader.h).
//
// The worker checks a trial's hyperparameters against the catalogue spec validation uses
// before it loads anything (xgboost_trainer.cc); the library is handed a checked plan. It links
// XGBoost and Abseil only, never our static libraries, whose protobuf registrations would then
// run twice in the worker; MeasureInference comes in as a function pointer.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/worker/inference_benchmark.h"
#include "services/worker/xgboost_trainer.h"

namespace dhpt::worker {

inline constexpr char kXgboostModuleFile[] = "libdhpt_xgboost.so";
inline constexpr char kXgboostModuleEnv[] = "DHPT_XGBOOST_MODULE";
// The one symbol the library exports: extern "C" const XgboostModule* DhptXgboostModule().
inline constexpr char kXgboostModuleSymbol[] = "DhptXgboostModule";
inline constexpr int kXgboostModuleAbi = 1;

// A request's hyperparameters as the worker checked them: the tree counts and the forest's
// seed taken out, the rest to set on each booster in order.
struct XgboostPlan {
  int rounds = 0;       // Boosting rounds (gradient boosting).
  int trees = 0;        // Trees (a random forest).
  uint64_t seed = 0;    // A random forest's seed, from which each chunk's is derived.
  // Boosting rounds between progress reports (early stopping's rungs, model_catalog.h).
  int progress_every = 1;
  std::vector<std::pair<std::string, std::string>> booster_params;
};

// MeasureInference (inference_benchmark.h), passed in so that the library needs none of the
// worker's own code linked in.
using MeasureInferenceFunction = absl::StatusOr<InferenceCosts> (*)(
    const Dataset& validation, const PredictRows& predict, const InferenceBenchmarkOptions& options);

struct XgboostModule {
  int abi = kXgboostModuleAbi;  // First, as every module's table (module_loader.h).
  void (*version)(int* major, int* minor, int* patch) = nullptr;  // The XGBoost it loaded.
  absl::StatusOr<XgboostResult> (*train)(const SplitDataset& data, const XgboostRequest& request,
                                         const XgboostPlan& plan,
                                         MeasureInferenceFunction measure_inference) = nullptr;
};

}  // namespace dhpt::worker

extern "C" const dhpt::worker::XgboostModule* DhptXgboostModule();
