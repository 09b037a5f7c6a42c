#include "services/study/objectives_validation.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/benchmark_functions.h"
#include "services/common/labels.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/study/spec_errors.h"

namespace dhpt::study {
namespace {

const MultiObjectiveFunction* MultiObjectiveProblem(const v1::StudySpec& spec) {
  if (spec.model().kind() != v1::Model::FUNCTION) return nullptr;
  return FindMultiObjectiveFunction(spec.model().function());
}

absl::Status CheckMetric(const v1::StudySpec& spec, absl::string_view field,
                         const std::string& metric) {
  if (metric.empty()) return Invalid(field, "is required");
  if (IsUserCode(spec.model().kind())) {
    if (IsUserCodeName(metric)) return absl::OkStatus();
    return Invalid(field, absl::StrCat(Quote(metric), " is not a metric name your code can "
                                       "print as name=value: 1-64 letters, digits, '.', '_' "
                                       "or '-'"));
  }
  const std::vector<std::string> reported = TrialMetrics(spec);
  if (std::find(reported.begin(), reported.end(), metric) == reported.end()) {
    return Invalid(field, absl::StrCat(Quote(metric), " is not reported by ",
                                       v1::Model::Kind_Name(spec.model().kind()),
                                       " trials; one of ", absl::StrJoin(reported, ", ")));
  }
  return absl::OkStatus();
}

absl::Status CheckObjective(const v1::StudySpec& spec, const v1::Objective& objective,
                            const std::string& field) {
  RETURN_IF_ERROR(CheckMetric(spec, field + ".metric", objective.metric()));
  if (objective.goal() == v1::Objective::GOAL_UNSPECIFIED) {
    return Invalid(field + ".goal", absl::StrCat("is required for ", Quote(objective.metric()),
                                                 ": MINIMIZE or MAXIMIZE (left out, it is "
                                                 "implied only for r2, mse, val_loss, value, "
                                                 "loss and the measured costs)"));
  }
  if (objective.has_reference() &&
      !(std::abs(objective.reference()) <= kMaxReferenceMagnitude)) {
    return Invalid(field + ".reference",
                   absl::StrCat("must be a number between -", kMaxReferenceMagnitude, " and ",
                                kMaxReferenceMagnitude));
  }
  return absl::OkStatus();
}

absl::Status Between(absl::string_view field, double value, double low, double high) {
  if (!(value >= low && value <= high)) {
    return Invalid(field, absl::StrCat("must be between ", low, " and ", high));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> TrialMetrics(const v1::StudySpec& spec) {
  const v1::Model::Kind kind = spec.model().kind();
  std::vector<std::string> metrics;
  if (const MultiObjectiveFunction* problem = MultiObjectiveProblem(spec)) {
    for (int i = 0; i < problem->objectives; ++i) metrics.push_back(MultiObjectiveMetric(i));
  }
  for (absl::string_view metric : ReportedMetrics(kind)) {
    if (metrics.empty() || metric != "value") metrics.emplace_back(metric);
  }
  if (kind != v1::Model::FUNCTION) {
    // Measured only where the worker observes a GPU or power rails: a trial elsewhere fails
    // for want of them, which worker_selector avoids.
    for (absl::string_view metric : kMeasurementMetrics) {
      if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) {
        metrics.emplace_back(metric);
      }
    }
  }
  return metrics;
}

absl::Status ValidateObjectives(v1::StudySpec& spec) {
  const v1::Model::Kind kind = spec.model().kind();
  if (spec.objectives_size() > kMaxObjectives) {
    return Invalid("objectives", absl::StrCat("has ", spec.objectives_size(),
                                              " entries, more than the limit of ", kMaxObjectives));
  }
  if (spec.objectives_size() > 0 && spec.has_objective() &&
      !(spec.objective().metric() == spec.objectives(0).metric() &&
        spec.objective().goal() == spec.objectives(0).goal())) {
    return Invalid("objective", "give either objective or objectives, not both");
  }
  if (spec.objectives_size() == 0 && !spec.has_objective()) {
    if (const MultiObjectiveFunction* problem = MultiObjectiveProblem(spec)) {
      for (int i = 0; i < problem->objectives; ++i) {
        v1::Objective* objective = spec.add_objectives();
        objective->set_metric(MultiObjectiveMetric(i));
        objective->set_goal(v1::Objective::MINIMIZE);
      }
    }
  }
  if (spec.objectives_size() == 1) {
    *spec.mutable_objective() = spec.objectives(0);
    spec.clear_objectives();
  }
  if (spec.objectives_size() == 0) {
    v1::Objective& objective = *spec.mutable_objective();
    if (objective.metric().empty() && IsUserCode(kind)) {
      return Invalid("objective.metric",
                     "is required: the metric your code reports, e.g. "
                     "objective: {metric: accuracy, goal: MAXIMIZE}");
    }
    if (objective.metric().empty()) {
      objective.set_metric(kind == v1::Model::FUNCTION ? "value" : "r2");
      if (objective.goal() == v1::Objective::GOAL_UNSPECIFIED) {
        objective.set_goal(kind == v1::Model::FUNCTION ? v1::Objective::MINIMIZE
                                                       : v1::Objective::MAXIMIZE);
      }
    }
    if (objective.goal() == v1::Objective::GOAL_UNSPECIFIED) {
      objective.set_goal(ImpliedGoal(objective.metric()));
    }
    if (objective.has_reference()) {
      return Invalid("objective.reference",
                     "is the hypervolume's reference point, for studies with several objectives");
    }
    return CheckObjective(spec, objective, "objective");
  }
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < spec.objectives_size(); ++i) {
    const std::string field = absl::StrCat("objectives[", i, "]");
    v1::Objective& objective = *spec.mutable_objectives(i);
    if (objective.goal() == v1::Objective::GOAL_UNSPECIFIED) {
      objective.set_goal(ImpliedGoal(objective.metric()));
    }
    RETURN_IF_ERROR(CheckObjective(spec, spec.objectives(i), field));
    if (!seen.insert(spec.objectives(i).metric()).second) {
      return Invalid(field + ".metric",
                     absl::StrCat(Quote(spec.objectives(i).metric()), " is already an objective"));
    }
  }
  if (spec.algorithm().name() == v1::Algorithm::HILL_CLIMBING) {
    return Invalid("algorithm.name",
                   "HILL_CLIMBING follows one objective; for several use TPE, NSGA2 or BAYESIAN");
  }
  *spec.mutable_objective() = spec.objectives(0);
  return absl::OkStatus();
}

absl::Status ValidateConstraints(const v1::StudySpec& spec) {
  if (spec.constraints_size() > kMaxConstraints) {
    return Invalid("constraints", absl::StrCat("has ", spec.constraints_size(),
                                               " entries, more than the limit of ",
                                               kMaxConstraints));
  }
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < spec.constraints_size(); ++i) {
    const v1::Constraint& constraint = spec.constraints(i);
    const std::string field = absl::StrCat("constraints[", i, "]");
    RETURN_IF_ERROR(CheckMetric(spec, field + ".metric", constraint.metric()));
    if (!seen.insert(constraint.metric()).second) {
      return Invalid(field + ".metric",
                     absl::StrCat(Quote(constraint.metric()),
                                  " is constrained twice; give one entry with min and max"));
    }
    if (!constraint.has_max() && !constraint.has_min()) {
      return Invalid(field, "needs max, min or both");
    }
    if ((constraint.has_max() && !std::isfinite(constraint.max())) ||
        (constraint.has_min() && !std::isfinite(constraint.min()))) {
      return Invalid(field, "bounds must be finite numbers");
    }
    if (constraint.has_max() && constraint.has_min() && constraint.min() > constraint.max()) {
      return Invalid(field, "min is above max: no trial could be feasible");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateWorkerSelector(const v1::StudySpec& spec) {
  if (spec.worker_selector_size() > kMaxLabels) {
    return Invalid("worker_selector", absl::StrCat("has ", spec.worker_selector_size(),
                                                   " labels, more than the limit of ", kMaxLabels));
  }
  for (const auto& [key, value] : spec.worker_selector()) {
    RETURN_IF_ERROR(ValidateLabel("worker_selector", key, value));
  }
  return absl::OkStatus();
}

absl::Status ValidateNsga2(v1::StudySpec& spec) {
  v1::Algorithm& algorithm = *spec.mutable_algorithm();
  if (algorithm.name() != v1::Algorithm::NSGA2) {
    if (algorithm.has_nsga2()) return Invalid("algorithm.nsga2", "is only for NSGA2");
    return absl::OkStatus();
  }
  v1::Nsga2Settings& nsga2 = *algorithm.mutable_nsga2();
  if (!nsga2.has_population_size()) nsga2.set_population_size(50);
  if (nsga2.population_size() < 2 || nsga2.population_size() > 10000) {
    return Invalid("algorithm.nsga2.population_size", "must be between 2 and 10000");
  }
  if (nsga2.has_mutation_prob()) {
    RETURN_IF_ERROR(Between("algorithm.nsga2.mutation_prob", nsga2.mutation_prob(), 0, 1));
  }
  if (!nsga2.has_crossover_prob()) nsga2.set_crossover_prob(0.9);
  RETURN_IF_ERROR(Between("algorithm.nsga2.crossover_prob", nsga2.crossover_prob(), 0, 1));
  if (!nsga2.has_swapping_prob()) nsga2.set_swapping_prob(0.5);
  return Between("algorithm.nsga2.swapping_prob", nsga2.swapping_prob(), 0, 1);
}

}  // namespace dhpt::study
