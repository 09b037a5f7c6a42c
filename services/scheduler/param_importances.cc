// GetParamImportances: the study's trials, as the optimiser's history holds them, handed to the
// analysis library (services/analysis/importance.h). An ended study evicted from memory is read
// from the store's rows instead (each trial's record built by the same rule, study::RecordEnded),
// without reading the whole study back. An ended study keeps its latest answers (a few numbers
// each) through its eviction, until it changes (reopened, extended, deleted): a dashboard's
// plots of an ended study out of memory then cost no read of its rows (issue 31).

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/analysis/importance.h"
#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core_internal.h"
#include "services/scheduler/trial_views.h"
#include "services/study/spec_translation.h"
#include "services/study/trial_outcome.h"

namespace dhpt::scheduler {
namespace {

// An evicted study's rows are read for its importances this many at a time.
constexpr int kImportanceRowsPerRead = 10'000;

// Answers an ended study keeps (different evaluators, objectives, parameters or seeds asked).
constexpr size_t kKeptImportanceAnswers = 4;

}  // namespace

const v1::GetParamImportancesResponse* SchedulerCore::KeptImportancesLocked(
    const StudyEntry& study, const std::string& asked) const {
  for (const StudyEntry::KeptImportances& kept : study.importances) {
    if (kept.request == asked && kept.changes == study.changes) return &kept.response;
  }
  return nullptr;
}

void SchedulerCore::KeepImportancesLocked(const std::string& name, uint64_t order,
                                          uint64_t changes, std::string asked,
                                          const v1::GetParamImportancesResponse& response) {
  auto it = studies_.find(name);
  if (it == studies_.end()) return;  // Deleted meanwhile.
  StudyEntry& study = *it->second;
  if (study.order != order || study.changes != changes || !study.terminal()) return;
  // Answers of an earlier state of the study go; then the latest first, within the bound.
  std::erase_if(study.importances, [&](const StudyEntry::KeptImportances& kept) {
    return kept.changes != changes || kept.request == asked;
  });
  study.importances.insert(study.importances.begin(), {std::move(asked), changes, response});
  if (study.importances.size() > kKeptImportanceAnswers) study.importances.pop_back();
}

absl::StatusOr<std::optional<SchedulerCore::ImportanceInput>>
SchedulerCore::StoredImportanceInputLocked(const std::string& name,
                                           absl::FunctionRef<bool(optimizer::TrialStatus)> eligible,
                                           int limit, uint64_t seed, CoreLock& lock) {
  ASSIGN_OR_RETURN(const StudyEntry* study, FindSummaryLocked(name));
  const uint64_t eviction = study->eviction;
  ImportanceInput input;
  input.spec = study->spec;
  const optimizer::SearchSpace space = study->space;
  lock.Release();  // The disk is not waited for under the lock.
  // Two passes over the rows, a page at a time, so that no more than the subsample is held:
  // which trials count (their state), then the subsample's records.
  const auto each_row = [&](auto&& take) -> absl::Status {
    for (int64_t number = 0;; number += kImportanceRowsPerRead) {
      absl::StatusOr<std::vector<std::string>> rows =
          store_->ReadTrialPage(name, number, kImportanceRowsPerRead);
      if (!rows.ok()) {
        return absl::UnavailableError(absl::StrCat(
            "study \"", name, "\" has ended and its trials are in the store, which cannot read "
            "them now (", rows.status().message(), "); try again"));
      }
      for (const std::string& row : *rows) RETURN_IF_ERROR(take(row));
      if (static_cast<int>(rows->size()) < kImportanceRowsPerRead) return absl::OkStatus();
    }
  };
  absl::Status read = each_row([&](const std::string& row) {
    const v1::Trial head = HeadOf(row);
    optimizer::TrialRecord record;
    study::RecordEnded(input.spec, head, record);
    if (eligible(record.status)) input.numbers.push_back(head.number());
    return absl::OkStatus();
  });
  input.considered = static_cast<int>(input.numbers.size());
  analysis::KeepSeededSubsample(input.numbers, limit, seed, std::less<int64_t>());
  size_t next = 0;
  if (read.ok() && !input.numbers.empty()) {
    input.records.reserve(input.numbers.size());
    read = each_row([&](const std::string& row) -> absl::Status {
      if (next >= input.numbers.size() || HeadOf(row).number() != input.numbers[next]) {
        return absl::OkStatus();
      }
      const v1::Trial trial = RecordFieldsOf(row);
      ASSIGN_OR_RETURN(optimizer::Point point, study::ToPoint(space, trial.params()));
      optimizer::TrialRecord& record = input.records.emplace_back();
      record.point = std::move(point);
      study::RecordEnded(input.spec, trial, record);
      ++next;
      return absl::OkStatus();
    });
  }
  lock.Reacquire();
  RETURN_IF_ERROR(read);
  if (StillEvictedLocked(name, eviction) == nullptr) return std::nullopt;  // Changed meanwhile.
  if (input.records.size() != input.numbers.size()) {
    return absl::DataLossError(absl::StrCat("the stored trials of study \"", name,
                                            "\" changed while they were read"));
  }
  return input;
}

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
  const auto eligible = [&options](optimizer::TrialStatus status) {
    return status == optimizer::TrialStatus::kCompleted ||
           (options.include_pruned && status == optimizer::TrialStatus::kPruned);
  };
  v1::GetParamImportancesRequest question = request;
  question.clear_study();
  // Unset asks for PED-ANOVA (the dashboard) as `dhpt importance` does by name: one answer.
  question.set_evaluator(options.evaluator == analysis::Evaluator::kFanova
                             ? v1::GetParamImportancesRequest::FANOVA
                             : v1::GetParamImportancesRequest::PED_ANOVA);
  std::string asked = question.SerializeAsString();
  ImportanceInput input;
  // The study the input is of: its creation order and changes, and whether it had ended.
  uint64_t order = 0, changes = 0;
  bool ended = false;
  {
    CoreLock lock(this);
    ASSIGN_OR_RETURN(const StudyEntry* study, FindSummaryLocked(request.study()));
    // (The metrics' scrape computes a study in memory only, kept answer or not.)
    if (read_back) {
      if (const v1::GetParamImportancesResponse* kept = KeptImportancesLocked(*study, asked)) {
        return *kept;
      }
    }
    std::optional<ImportanceInput> stored;
    if (study->evicted) {
      if (!read_back) {
        return absl::FailedPreconditionError(absl::StrCat(
            "study \"", request.study(), "\" has ended and its trials are not in memory"));
      }
      // From the store's rows, as ListTrials: not the whole study read back (issue 31).
      ASSIGN_OR_RETURN(stored, StoredImportanceInputLocked(request.study(), eligible, limit,
                                                           options.seed, lock));
    }
    if (stored) {
      input = *std::move(stored);
    } else {
      // The metrics' scrape (no read back) leaves the cache's order as it is.
      if (read_back) {
        ASSIGN_OR_RETURN(study, FindStudyReadingBack(request.study(), lock));
      }
      input.spec = study->spec;
      // Only the trials an evaluator reads, and of a large study a seeded subsample of them,
      // so the copy made under the lock stays bounded (the library would subsample the same
      // way).
      for (size_t number = 0; number < study->history.size(); ++number) {
        if (eligible(study->history[number].status)) {
          input.numbers.push_back(static_cast<int64_t>(number));
        }
      }
      input.considered = static_cast<int>(input.numbers.size());
      analysis::KeepSeededSubsample(input.numbers, limit, options.seed, std::less<int64_t>());
      input.records.reserve(input.numbers.size());
      for (int64_t number : input.numbers) input.records.push_back(study->history[number]);
    }
    // Found again: the read of the rows released the lock (an evicted study that changed
    // meanwhile was read back above instead).
    ASSIGN_OR_RETURN(study, FindSummaryLocked(request.study()));
    order = study->order;
    changes = study->changes;
    ended = study->terminal();
  }
  const analysis::StudyData data = analysis::StudyDataFromRecords(input.spec, input.records, input.numbers);
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
  response.set_trials_considered(input.considered);
  response.set_trials_used(result.trials_used);
  if (ended) {
    CoreLock lock(this);
    KeepImportancesLocked(request.study(), order, changes, std::move(asked), response);
  }
  return response;
}

}  // namespace dhpt::scheduler
