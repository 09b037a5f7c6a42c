// GetParamImportances: the study's trials, as the optimiser's history holds them, handed to the
// analysis library (services/analysis/importance.h).

#include <functional>

#include "absl/strings/str_cat.h"
#include "services/analysis/importance.h"
#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core_internal.h"

namespace dhpt::scheduler {

absl::StatusOr<v1::GetParamImportancesResponse> SchedulerCore::GetParamImportances(
    const v1::GetParamImportancesRequest& request, bool read_back) {
  analysis::ImportanceOptions options;
  options.evaluator = request.evaluator() == v1::GetParamImportancesRequest::FANOVA
                          ? analysis::Evaluator::kFanova
                          : analysis::Evaluator::kPedAnova;
  options.objective = request.objective_index();
  if (request.has_target_quantile()) options.target_quantile = request.target_quantile();
  options.include_pruned = request.include_pruned();
  options.params.assign(request.params().begin(), request.params().end());
  options.seed = request.seed();
  const int limit = options.evaluator == analysis::Evaluator::kFanova
                        ? analysis::kMaxFanovaTrials
                        : analysis::kMaxPedAnovaTrials;
  v1::StudySpec spec;
  std::vector<optimizer::TrialRecord> records;
  std::vector<int64_t> numbers;
  int considered = 0;
  {
    CoreLock lock(this);
    ASSIGN_OR_RETURN(const StudyEntry* study, read_back
                                                  ? FindStudyReadingBack(request.study(), lock)
                                                  : FindSummaryLocked(request.study()));
    if (study->evicted) {
      return absl::FailedPreconditionError(absl::StrCat(
          "study \"", request.study(), "\" has ended and its trials are not in memory"));
    }
    spec = study->spec;
    // Only the trials an evaluator reads, and of a large study a seeded subsample of them, so
    // the copy made under the lock stays bounded (the library would subsample the same way).
    std::vector<int64_t> eligible;
    for (size_t number = 0; number < study->history.size(); ++number) {
      const optimizer::TrialStatus status = study->history[number].status;
      if (status == optimizer::TrialStatus::kCompleted ||
          (options.include_pruned && status == optimizer::TrialStatus::kPruned)) {
        eligible.push_back(static_cast<int64_t>(number));
      }
    }
    considered = static_cast<int>(eligible.size());
    analysis::KeepSeededSubsample(eligible, limit, options.seed, std::less<int64_t>());
    records.reserve(eligible.size());
    for (int64_t number : eligible) records.push_back(study->history[number]);
    numbers = std::move(eligible);
  }
  const analysis::StudyData data = analysis::StudyDataFromRecords(spec, records, numbers);
  ASSIGN_OR_RETURN(const analysis::ImportanceResult result,
                   analysis::ComputeImportances(data, options));
  v1::GetParamImportancesResponse response;
  for (const analysis::ParamImportance& importance : result.importances) {
    v1::ParamImportance* out = response.add_importances();
    out->set_name(importance.name);
    out->set_importance(importance.importance);
    out->set_constant(importance.constant);
  }
  response.set_evaluator(options.evaluator == analysis::Evaluator::kFanova
                             ? v1::GetParamImportancesRequest::FANOVA
                             : v1::GetParamImportancesRequest::PED_ANOVA);
  response.set_objective_metric(result.objective);
  response.set_trials_considered(considered);
  response.set_trials_used(result.trials_used);
  return response;
}

}  // namespace dhpt::scheduler
