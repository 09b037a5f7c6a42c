#include "services/cli/trial_view.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/time_util.h"
#include "services/cli/terminal_text.h"
#include "services/common/param_values.h"

namespace dhpt::cli {
namespace {

using google::protobuf::util::TimeUtil;

std::string Origin(v1::Trial::Origin origin) {
  switch (origin) {
    case v1::Trial::ENQUEUED:
      return " (enqueued by a user)";
    case v1::Trial::ADDED:
      return " (added: a result from elsewhere)";
    default:
      return "";
  }
}

// "worker w1" or "client laptop"; the node and device are known for the trial's own attempt
// only (the latest, or once it has ended the one whose result counted).
std::string AttemptWhere(const v1::Trial& trial, int index) {
  const v1::Trial::Attempt& attempt = trial.attempts(index);
  std::string where = attempt.client_id().empty() ? absl::StrCat("worker ", attempt.worker_id())
                                                  : absl::StrCat("client ", attempt.client_id());
  if (index + 1 == trial.attempt()) {
    if (!trial.node_name().empty()) absl::StrAppend(&where, ", node ", trial.node_name());
    if (!trial.device().empty()) absl::StrAppend(&where, ", device ", trial.device());
  }
  if (attempt.lost()) absl::StrAppend(&where, ", lost");
  return where;
}

}  // namespace

std::string TrialView(const v1::StudySpec& spec, const v1::Trial& trial,
                      const std::vector<v1::TrialCurve>& curves) {
  std::string out = absl::StrCat("trial ", trial.number(), " of ", spec.name(), ": ",
                                 v1::Trial::State_Name(trial.state()), Origin(trial.origin()),
                                 trial.infeasible() ? " (infeasible)" : "", "\n");
  std::vector<std::string> params;
  for (const v1::Parameter& p : spec.parameters()) {
    auto it = trial.params().find(p.name());
    if (it != trial.params().end()) params.push_back(p.name() + "=" + FormatParameterValue(it->second));
  }
  absl::StrAppend(&out, "  parameters: ", absl::StrJoin(params, ", "), "\n");
  if (trial.has_objective_value()) {
    absl::StrAppendFormat(&out, "  objective: %s = %.6g\n", spec.objective().metric(),
                          trial.objective_value());
  }
  if (!trial.metrics().empty()) {
    absl::StrAppend(&out, "  measurements:\n");
    const std::map<std::string, double> sorted(trial.metrics().begin(), trial.metrics().end());
    for (const auto& [name, value] : sorted) absl::StrAppendFormat(&out, "    %s = %.6g\n", name, value);
  }
  absl::StrAppend(&out, "  attempts: ", trial.attempts_size());
  if (trial.lost_attempts() > 0) absl::StrAppend(&out, " (", trial.lost_attempts(), " lost)");
  absl::StrAppend(&out, "\n");
  for (int i = 0; i < trial.attempts_size(); ++i) {
    absl::StrAppend(&out, "    ", i + 1, ": ", AttemptWhere(trial, i), "\n");
  }
  if (trial.has_create_time()) absl::StrAppend(&out, "  created: ", TimeUtil::ToString(trial.create_time()), "\n");
  if (trial.has_start_time()) absl::StrAppend(&out, "  started: ", TimeUtil::ToString(trial.start_time()), "\n");
  if (trial.has_end_time()) absl::StrAppend(&out, "  ended:   ", TimeUtil::ToString(trial.end_time()), "\n");
  // The curve of the trial's own attempt (what early stopping judged; a late result of an
  // earlier attempt may have counted), else the latest one kept.
  const auto rank = [&trial](const v1::TrialCurve& c) {
    return std::make_pair(c.attempt() == trial.attempt(), c.attempt());
  };
  const v1::TrialCurve* curve = nullptr;
  for (const v1::TrialCurve& c : curves) {
    if (c.number() == trial.number() && (curve == nullptr || rank(c) > rank(*curve))) curve = &c;
  }
  if (curve != nullptr && curve->values_size() > 0) {
    const int n = std::min(curve->values_size(), curve->steps_size());
    std::vector<std::string> points;
    for (int i = std::max(0, n - kTrialViewCurveValues); i < n; ++i) {
      points.push_back(absl::StrFormat("%d: %.6g", curve->steps(i), curve->values(i)));
    }
    absl::StrAppendFormat(&out, "  progress (attempt %d, %s of %d values, step: value): %s\n",
                          curve->attempt(),
                          n > kTrialViewCurveValues ? absl::StrCat("the last ", kTrialViewCurveValues)
                                                    : "all",
                          n, absl::StrJoin(points, ", "));
  }
  if (!trial.error().empty()) {
    absl::StrAppend(&out, trial.state() == v1::Trial::COMPLETED ? "  note:\n" : "  error:\n");
    for (absl::string_view line : absl::StrSplit(trial.error(), '\n')) {
      absl::StrAppend(&out, "    ", line, "\n");
    }
  }
  // Names, errors and values came from users and workers: escaped, line by line.
  std::string shown;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!shown.empty()) shown += '\n';
    shown += TerminalText(line);
  }
  return shown;
}

}  // namespace dhpt::cli
