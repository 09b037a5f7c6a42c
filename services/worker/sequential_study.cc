#include "services/worker/sequential_study.h"

#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/study/early_stopping.h"
#include "services/study/model_choice.h"
#include "services/study/spec_translation.h"
#include "services/study/spec_validation.h"
#include "services/study/trial_outcome.h"

namespace dhpt::worker {
namespace {

using google::protobuf::util::TimeUtil;

// How often the study's interrupt is passed on to the running trial's own flag.
constexpr absl::Duration kInterruptPoll = absl::Milliseconds(20);

google::protobuf::Timestamp Now() {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
}

// One trial's stop flag, the one its trainer watches: set by the study's early-stopping rule,
// or, within kInterruptPoll, by the study's own interrupt (which must not itself be set by a
// pruned trial, since that would end the study).
class TrialStop {
 public:
  explicit TrialStop(const std::atomic<bool>* study_interrupted)
      : forward_([this, study_interrupted](std::stop_token stop) {
          while (!stop.stop_requested() && study_interrupted != nullptr) {
            if (study_interrupted->load()) {
              flag_ = true;
              return;
            }
            std::this_thread::sleep_for(absl::ToChronoMilliseconds(kInterruptPoll));
          }
        }) {}
  const std::atomic<bool>* flag() const { return &flag_; }
  void Set() { flag_ = true; }

 private:
  std::atomic<bool> flag_ = false;
  std::jthread forward_;  // Last: stopped and joined before flag_ goes.
};

}  // namespace

absl::StatusOr<SequentialRun> RunStudySequentially(const v1::StudySpec& request,
                                                   TrialRunner& runner,
                                                   const SequentialOptions& options) {
  ASSIGN_OR_RETURN(v1::StudySpec spec, study::NormalizeStudySpec(request));
  const optimizer::SearchSpace space = study::ToSearchSpace(spec);
  ASSIGN_OR_RETURN(std::unique_ptr<optimizer::Optimizer> optimizer,
                   optimizer::MakeOptimizer(space, study::ToOptimizerConfig(spec)));

  SequentialRun run;
  v1::Study& study = run.study;
  *study.mutable_spec() = spec;
  *study.mutable_create_time() = Now();
  study.set_state(v1::Study::RUNNING);
  std::vector<optimizer::TrialRecord> records;
  absl::flat_hash_set<std::string> keys;
  // The scheduler's early stopping, judged here on each progress report against the earlier
  // trials' curves, so that both sides of a comparison prune alike.
  const study::EarlyStoppingRule rule = study::ToEarlyStoppingRule(spec);
  const bool maximize = spec.objective().goal() == v1::Objective::MAXIMIZE;
  std::vector<study::TrialCurve> curves;
  if (options.on_start) options.on_start(study);

  auto end = [&](v1::Study::State state, std::string reason) {
    study.set_state(state);
    study.set_state_reason(std::move(reason));
    *study.mutable_end_time() = Now();
  };
  while (study.state() == v1::Study::RUNNING) {
    const int finished = study.trials_completed() + study.trials_pruned() + study.trials_failed();
    if (spec.has_max_failed_trials() && study.trials_failed() > spec.max_failed_trials()) {
      end(v1::Study::FAILED, absl::StrCat(study.trials_failed(),
                                          " trials failed, more than max_failed_trials (",
                                          spec.max_failed_trials(), ")"));
      break;
    }
    if (finished >= spec.max_trials()) {
      end(v1::Study::COMPLETED, absl::StrCat("all ", finished, " trials finished"));
      break;
    }
    if (options.cancelled != nullptr && options.cancelled->load()) {
      end(v1::Study::STOPPED, "interrupted");
      break;
    }
    // As the scheduler: under Hyperband, learning from the next trial's bracket only.
    const std::optional<std::vector<bool>> learn =
        study::LearningFilter(rule, static_cast<int64_t>(run.trials.size()));
    absl::StatusOr<std::optional<optimizer::Point>> suggestion =
        optimizer->Suggest(optimizer::History{records, keys, learn ? &*learn : nullptr});
    if (!suggestion.ok()) {
      end(v1::Study::COMPLETED, absl::StrCat("optimiser stopped: ", suggestion.status().message()));
      break;
    }
    if (!suggestion->has_value()) {
      end(v1::Study::COMPLETED,
          absl::StrCat("search space exhausted after ", finished, " trials"));
      break;
    }

    v1::Trial& trial = run.trials.emplace_back();
    trial.set_id(run.trials.size());
    trial.set_study(spec.name());
    trial.set_number(static_cast<int64_t>(run.trials.size()) - 1);
    trial.set_attempt(1);
    trial.set_worker_id(options.worker_id);
    trial.set_node_name(options.node_name);
    *trial.mutable_params() = study::ToParamMap(space, **suggestion);
    *trial.mutable_create_time() = Now();
    keys.insert(space.Key(**suggestion));
    records.push_back({std::move(**suggestion), optimizer::TrialStatus::kRunning, {}});

    v1::Assign assign;
    assign.set_trial_id(trial.id());
    assign.set_attempt(1);
    assign.set_study(spec.name());
    // A model-choice study's trial runs as its own model_kind (model_choice.h).
    study::ModelForTrial(spec, trial.params(), assign.mutable_model(), assign.mutable_params());
    if (spec.has_dataset()) *assign.mutable_dataset() = spec.dataset();
    assign.set_objective_metric(spec.objective().metric());
    study::TrialCurve& curve = curves.emplace_back();
    curve.number = trial.number();
    std::vector<const study::TrialCurve*> others;
    for (size_t k = 0; k + 1 < curves.size(); ++k) {
      if (!curves[k].values.empty()) others.push_back(&curves[k]);
    }
    // Without a rule the trainer watches the study's interrupt itself: no flag to forward.
    std::optional<TrialStop> stop;
    std::optional<study::IntermediateValue> pruned_at;
    TrialContext context{.threads = options.threads_per_trial, .cancelled = options.cancelled};
    if (!std::holds_alternative<std::monostate>(rule)) {
      stop.emplace(options.cancelled);
      context.cancelled = stop->flag();
      context.progress = [&](int64_t step, double value) {
        const std::optional<int64_t> last_step =
            curve.values.empty() ? std::nullopt : std::optional<int64_t>(curve.values.back().step);
        if (pruned_at || !study::IsJudgedReport(last_step, step, value)) return;
        curve.values.push_back({step, value});
        if (study::ShouldStop(rule, maximize, curve, others)) {
          pruned_at = curve.values.back();
          stop->Set();
        }
      };
    }
    *trial.mutable_start_time() = Now();
    const v1::TrialResult result = runner.Run(assign, context);
    *trial.mutable_end_time() = Now();

    optimizer::TrialRecord& record = records.back();
    if (pruned_at) {
      // As the scheduler records a pruned trial, with what the trial measured until it stopped:
      // the decision stands even if the trainer had just finished (stopped at its last report).
      study::RecordPruned(spec, pruned_at->step, pruned_at->value, trial);
      study::RecordCostOfPrunedAttempt(result, trial);
      study.set_trials_pruned(study.trials_pruned() + 1);
      record.status = optimizer::TrialStatus::kPruned;
      record.value = pruned_at->value;
      record.last_step = pruned_at->step;
    } else if (result.state() == v1::Trial::CANCELLED) {
      trial.set_state(v1::Trial::CANCELLED);
      trial.set_error(result.error());
      trial.set_device(result.device());
      study.set_trials_cancelled(study.trials_cancelled() + 1);
      record.status = optimizer::TrialStatus::kFailed;
    } else {
      study::RecordResult(spec, result, trial);
      if (trial.state() == v1::Trial::COMPLETED) {
        curve.completed = true;
        study.set_trials_completed(study.trials_completed() + 1);
        study::RecordCompleted(trial, record);
        if (!study.has_best_trial() ||
            study::IsBetterTrial(spec, trial, study.best_trial())) {
          *study.mutable_best_trial() = trial;
        }
      } else {
        study.set_trials_failed(study.trials_failed() + 1);
        record.status = optimizer::TrialStatus::kFailed;
      }
    }
    if (options.on_trial_end) options.on_trial_end(trial);
  }
  // As GetStudy counts them: pruned trials that were level with the best when stopped.
  if (study.trials_pruned() > 0 && study.has_best_trial()) {
    const study::TrialCurve& best = curves[static_cast<size_t>(study.best_trial().number())];
    int within_reach = 0;
    for (size_t k = 0; k < run.trials.size(); ++k) {
      within_reach += run.trials[k].state() == v1::Trial::PRUNED &&
                      study::WithinReachOfBest(maximize, curves[k], best);
    }
    study.set_trials_pruned_within_reach(within_reach);
  }
  return run;
}

}  // namespace dhpt::worker
