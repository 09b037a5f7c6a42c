#include "services/worker/xgboost_trainer.h"

#include <array>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/worker/module_loader.h"
#include "services/worker/xgboost_module.h"

namespace dhpt::worker {
namespace {

static_assert(kForestChunkTrees == kTreeProgressEvery, "a forest reports once per chunk");

constexpr ModuleSpec kXgboostModuleSpec = {
    .what = "XGBoost",
    .file = kXgboostModuleFile,
    .env = kXgboostModuleEnv,
    .symbol = kXgboostModuleSymbol,
    .abi = kXgboostModuleAbi,
};

// Loading XGBoost takes a few milliseconds; one that has not answered in this long is stuck.
constexpr absl::Duration kProbeTimeout = absl::Seconds(60);

// A numeric hyperparameter checked against the catalogue that spec validation uses, so a
// value the scheduler accepts is one this trainer runs (services/common/model_catalog.h).
absl::StatusOr<double> CheckedNumber(v1::Model::Kind kind, const std::string& name,
                                     const std::string& value) {
  const HyperparameterRange* range = FindHyperparameterRange(kind, name);
  double parsed = 0;
  if (range == nullptr) return parsed;
  if (!absl::SimpleAtod(value, &parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be a number, got \"", value, "\""));
  }
  RETURN_IF_ERROR(CheckHyperparameterValue(*range, parsed));
  return parsed;
}

// The request's hyperparameters, checked, with the counts and the forest's seed taken out.
absl::StatusOr<XgboostPlan> Plan(const XgboostRequest& request) {
  const v1::Model::Kind kind = request.random_forest ? v1::Model::RANDOM_FOREST : v1::Model::XGBOOST;
  XgboostPlan plan;
  plan.rounds = kDefaultBoostRounds;
  plan.trees = kDefaultForestTrees;
  plan.progress_every = kTreeProgressEvery;
  for (const auto& [name, value] : request.params) {
    ASSIGN_OR_RETURN(double number, CheckedNumber(kind, name, value));
    if (request.random_forest && (name == "n_estimators" || name == "num_parallel_tree")) {
      plan.trees = static_cast<int>(number);
    } else if (!request.random_forest && (name == "n_estimators" || name == "num_boost_round")) {
      plan.rounds = static_cast<int>(number);
    } else if (request.random_forest && name == "seed") {
      plan.seed = static_cast<uint64_t>(number);
    } else {
      plan.booster_params.emplace_back(name, value);
    }
  }
  return plan;
}

}  // namespace

absl::StatusOr<std::string> ProbeXgboostVersion() {
  const ModuleProbe probe = ProbeModule(
      kXgboostModuleSpec,
      [](const void* table, std::array<int64_t, 4>& values) {
        int major = 0, minor = 0, patch = 0;
        static_cast<const XgboostModule*>(table)->version(&major, &minor, &patch);
        values = {major, minor, patch, 0};
      },
      kProbeTimeout);
  if (!probe.loaded) return absl::FailedPreconditionError(probe.error);
  return absl::StrCat(probe.values[0], ".", probe.values[1], ".", probe.values[2]);
}

absl::Status CheckXgboostModule() {
  absl::StatusOr<std::string> version = ProbeXgboostVersion();
  if (version.ok()) return absl::OkStatus();
  // The probe's message says what is wrong and what to install where.
  return absl::FailedPreconditionError(absl::StrCat(
      "this worker could run no XGBoost or Random Forest trial: ", version.status().message()));
}

absl::StatusOr<XgboostResult> TrainXgboost(const SplitDataset& data,
                                           const XgboostRequest& request) {
  if (data.train.target.empty()) {
    return absl::InvalidArgumentError(
        "the data set has no target column: set dataset.csv.target to the column to predict");
  }
  ASSIGN_OR_RETURN(const XgboostPlan plan, Plan(request));
  ASSIGN_OR_RETURN(const XgboostModule* module, LoadModule<XgboostModule>(kXgboostModuleSpec));
  return module->train(data, request, plan, &MeasureInference);
}

}  // namespace dhpt::worker
