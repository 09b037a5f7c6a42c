#include "services/cli/report.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/cli/terminal_text.h"
#include "services/cli/text_table.h"
#include "services/common/model_catalog.h"
#include "services/common/param_values.h"

namespace dhpt::cli {
namespace {

std::string Metric(const v1::Trial& trial, absl::string_view name, int digits) {
  auto it = trial.metrics().find(std::string(name));
  if (it == trial.metrics().end()) return "";
  return absl::StrFormat("%.*g", digits, it->second);
}

std::string ShortState(v1::Trial::State state) {
  std::string name = v1::Trial::State_Name(state);
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  return name;
}

// "board=pi4,gpu=orin" in key order.
std::string Labels(const v1::WorkerCapabilities& caps) {
  const std::map<std::string, std::string> sorted(caps.labels().begin(), caps.labels().end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

// Whether byte `i` of `text` starts a UTF-8 character (so a cut there splits none).
bool CharacterStart(absl::string_view text, size_t i) {
  return i >= text.size() || (static_cast<unsigned char>(text[i]) & 0xc0) != 0x80;
}

// The trial's error, for states where it says why the trial did not (yet) succeed.
const std::string& ShownError(const v1::Trial& trial) {
  static const std::string* const kNone = new std::string;
  return trial.state() == v1::Trial::COMPLETED ? *kNone : trial.error();
}

}  // namespace

std::string ShortReason(absl::string_view error, size_t width) {
  std::string flat;
  for (char c : error) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space) {
      flat += c;
    } else if (!flat.empty() && flat.back() != ' ') {
      flat += ' ';
    }
  }
  while (!flat.empty() && flat.back() == ' ') flat.pop_back();
  constexpr absl::string_view kGap = " ... ";
  if (flat.size() <= width) return flat;
  if (width < kGap.size() + 2) {  // No room for both ends.
    while (width > 0 && !CharacterStart(flat, width)) --width;
    return flat.substr(0, width);
  }
  size_t head = (width - kGap.size()) / 2;
  size_t tail = flat.size() - (width - kGap.size() - head);
  while (head > 0 && !CharacterStart(flat, head)) --head;
  while (tail < flat.size() && !CharacterStart(flat, tail)) ++tail;
  while (head > 0 && flat[head - 1] == ' ') --head;  // The gap has its own spaces.
  while (tail < flat.size() && flat[tail] == ' ') ++tail;
  return absl::StrCat(absl::string_view(flat).substr(0, head), kGap,
                      absl::string_view(flat).substr(tail));
}

std::string FailedTrialLine(const std::string& study, const v1::Trial& trial) {
  const std::string where = trial.worker_id().empty()
                                ? (trial.client_id().empty() ? "" : " by client " + trial.client_id())
                                : " on " + trial.worker_id();
  return TerminalText(absl::StrCat("trial ", trial.number(), " ", v1::Trial::State_Name(trial.state()),
                                   where, ": ", ShortReason(trial.error(), kFailureLineReasonWidth),
                                   " (dhpt trial ", study, " ", trial.number(), " shows all)"));
}

std::string ProgressLine(const v1::Study& study) {
  const v1::StudySpec& spec = study.spec();
  std::string line = absl::StrFormat(
      "%s %s  %d/%d done", spec.name(), v1::Study::State_Name(study.state()),
      study.trials_completed() + study.trials_failed() + study.trials_pruned(), spec.max_trials());
  if (study.trials_failed() > 0) absl::StrAppend(&line, " (", study.trials_failed(), " failed)");
  if (study.trials_pruned() > 0) absl::StrAppend(&line, " (", study.trials_pruned(), " pruned)");
  // Cancelled trials (a stopped study's) are spent from max_trials without being done: said, or
  // an extended study ends at "603/605 done" with nothing to explain the gap.
  if (study.trials_cancelled() > 0) {
    absl::StrAppend(&line, " (", study.trials_cancelled(), " cancelled)");
  }
  absl::StrAppend(&line, "  ", study.trials_running(), " running");
  if (spec.objectives_size() >= 2) {
    absl::StrAppend(&line, absl::StrFormat("  front %d, hypervolume %s%.6g",
                                           study.pareto_front_size(),
                                           study.hypervolume_estimated() ? "~" : "",
                                           study.hypervolume()));
  } else if (study.has_best_trial() && study.best_trial().has_objective_value()) {
    absl::StrAppend(&line, absl::StrFormat("  best %s %.6g", spec.objective().metric(),
                                           study.best_trial().objective_value()));
  }
  if (!study.state_reason().empty()) {
    absl::StrAppend(&line, "  (", TerminalText(study.state_reason()), ")");
  }
  return line;
}

std::string TrialsTable(const v1::StudySpec& spec, const std::vector<v1::Trial>& trials) {
  std::vector<std::string> header = {"#", "state"};
  for (const v1::Parameter& p : spec.parameters()) header.push_back(p.name());
  const std::string& objective = spec.objective().metric();
  // The other objectives and the constrained metrics follow the first objective.
  std::vector<std::string> extra;
  for (int i = 1; i < spec.objectives_size(); ++i) extra.push_back(spec.objectives(i).metric());
  for (const v1::Constraint& c : spec.constraints()) {
    if (c.metric() != objective &&
        std::find(extra.begin(), extra.end(), c.metric()) == extra.end()) {
      extra.push_back(c.metric());
    }
  }
  header.push_back(objective);
  header.insert(header.end(), extra.begin(), extra.end());
  header.insert(header.end(), {"wall s", "cpu s", "cpu util", "peak MiB", "worker"});
  const bool reasons = std::any_of(trials.begin(), trials.end(),
                                   [](const v1::Trial& t) { return !ShownError(t).empty(); });
  if (reasons) header.push_back("reason");
  TextTable table(header);
  for (const v1::Trial& trial : trials) {
    std::string state = trial.infeasible() ? "infeasible" : ShortState(trial.state());
    // A pruned trial shows how far it got and the value it had there.
    const bool pruned = trial.state() == v1::Trial::PRUNED;
    if (pruned && trial.metrics().contains(std::string(kMetricPrunedStep))) {
      absl::StrAppend(&state, "@", Metric(trial, kMetricPrunedStep, 12));
    }
    // Where its point came from, when not from the algorithm.
    if (trial.origin() == v1::Trial::ADDED) absl::StrAppend(&state, " (added)");
    if (trial.origin() == v1::Trial::ENQUEUED) absl::StrAppend(&state, " (enqueued)");
    std::vector<std::string> row = {absl::StrCat(trial.number()), std::move(state)};
    for (const v1::Parameter& p : spec.parameters()) {
      auto it = trial.params().find(p.name());
      // Absent: a condition switched the parameter off in this trial (kInactiveCell).
      row.push_back(it == trial.params().end() ? std::string(kInactiveCell)
                                               : FormatParameterValue(it->second));
    }
    if (trial.has_objective_value()) {
      row.push_back(absl::StrFormat("%.5g", trial.objective_value()));
    } else {
      row.push_back(pruned ? Metric(trial, objective, 5) : "");
    }
    for (const std::string& metric : extra) row.push_back(Metric(trial, metric, 5));
    row.push_back(Metric(trial, kMetricWallSeconds, 3));
    row.push_back(Metric(trial, kMetricCpuSeconds, 3));
    row.push_back(Metric(trial, kMetricCpuUtilization, 2));
    auto rss = trial.metrics().find(std::string(kMetricPeakRssBytes));
    row.push_back(rss == trial.metrics().end() ? "" : absl::StrFormat("%.0f", rss->second / (1 << 20)));
    row.push_back(trial.worker_id().empty() ? trial.client_id() : trial.worker_id());
    if (reasons) row.push_back(ShortReason(ShownError(trial), kReasonColumnWidth));
    table.Add(std::move(row));
  }
  return table.Render();
}

// "w1", "client laptop", or "elsewhere (added)" for a result a user added.
std::string RanWhere(const v1::Trial& trial) {
  if (trial.origin() == v1::Trial::ADDED) return "elsewhere (added)";
  if (!trial.worker_id().empty()) return trial.worker_id();
  return "client " + trial.client_id();
}

std::string StudySummary(const v1::Study& study) {
  std::string out = absl::StrFormat(
      "study %s: %s%s\n  %d completed, %d failed, %d cancelled\n", study.spec().name(),
      v1::Study::State_Name(study.state()),
      study.state_reason().empty() ? "" : absl::StrCat(" (", TerminalText(study.state_reason()), ")"),
      study.trials_completed(), study.trials_failed(), study.trials_cancelled());
  if (study.trials_pruned() > 0) {
    absl::StrAppend(&out, "  ", study.trials_pruned(), " pruned (stopped early)");
    // Pruned trials that were level with the best when stopped: the rule may have cost the best.
    if (study.trials_pruned_within_reach() > 0) {
      absl::StrAppend(&out, ", ", study.trials_pruned_within_reach(),
                      " of them within reach of the best when stopped");
    }
    absl::StrAppend(&out, "\n");
  }
  if (study.trials_added() > 0) {
    absl::StrAppend(&out, "  ", study.trials_added(), " added (results from elsewhere, learnt from)\n");
  }
  if (study.spec().objectives_size() >= 2) {
    absl::StrAppendFormat(&out, "  Pareto front: %d trials, hypervolume %.6g (dhpt pareto %s)\n",
                          study.pareto_front_size(), study.hypervolume(), study.spec().name());
    return out;
  }
  if (!study.has_best_trial()) return out + "  no completed trial\n";
  const v1::Trial& best = study.best_trial();
  std::vector<std::string> params;
  for (const v1::Parameter& p : study.spec().parameters()) {
    auto it = best.params().find(p.name());
    if (it != best.params().end()) params.push_back(p.name() + "=" + FormatParameterValue(it->second));
  }
  // An added trial ran elsewhere, on no device of ours: no empty "()".
  const std::string device =
      best.device().empty() ? "" : absl::StrCat(" (", TerminalText(best.device()), ")");
  absl::StrAppendFormat(&out, "  best trial #%d: %s = %.6g\n  with %s\n  on %s%s\n",
                        best.number(), study.spec().objective().metric(), best.objective_value(),
                        TerminalText(absl::StrJoin(params, ", ")), TerminalText(RanWhere(best)),
                        device);
  if (best.infeasible()) {
    absl::StrAppendFormat(&out, "  no trial meets the constraints yet: this one misses them by %.6g\n",
                          best.constraint_violation());
  }
  return out;
}

std::string StudiesTable(const std::vector<v1::Study>& studies) {
  TextTable table(
      {"study", "state", "model", "algorithm", "done", "pruned", "failed", "running", "best"});
  for (const v1::Study& s : studies) {
    // Done as in ProgressLine: every trial that counts toward max_trials.
    const int done = s.trials_completed() + s.trials_pruned() + s.trials_failed();
    table.Add({s.spec().name(), v1::Study::State_Name(s.state()),
               v1::Model::Kind_Name(s.spec().model().kind()),
               v1::Algorithm::Name_Name(s.spec().algorithm().name()),
               absl::StrCat(done, "/", s.spec().max_trials()), absl::StrCat(s.trials_pruned()),
               absl::StrCat(s.trials_failed()), absl::StrCat(s.trials_running()),
               s.spec().objectives_size() >= 2
                   ? absl::StrFormat("front %d", s.pareto_front_size())
                   : s.has_best_trial() ? absl::StrFormat("%.6g", s.best_trial().objective_value())
                                        : ""});
  }
  return table.Render();
}

namespace {

// "XGBOOST 0.20x" per learnt kind (times the cluster's median board); before any, "prior 0.40x"
// where its CPU is known, else "-".
std::string SpeedText(const v1::Worker& worker) {
  std::vector<std::string> speeds;
  for (const v1::WorkerSpeed& speed : worker.speeds()) {
    speeds.push_back(absl::StrFormat("%s %.2fx", v1::Model::Kind_Name(speed.kind()),
                                     speed.relative_speed()));
  }
  // Before its board completed a trial: the prior placement uses, from its CPU limit.
  if (speeds.empty() && worker.prior_speed() > 0) {
    return absl::StrFormat("prior %.2fx", worker.prior_speed());
  }
  return speeds.empty() ? "-" : absl::StrJoin(speeds, ", ");
}

// Its last heartbeat's utilisation: "1.50 cpu 300MiB gpu 42%"; "-" before the first.
std::string UtilisationText(const v1::Worker& w) {
  if (!w.has_utilisation()) return "-";
  const v1::WorkerUtilisation& u = w.utilisation();
  std::string text = absl::StrFormat("%.2f cpu %.0fMiB", u.cpu_cores(),
                                     static_cast<double>(u.memory_bytes()) / (1 << 20));
  if (u.has_gpu_percent()) absl::StrAppendFormat(&text, " gpu %.0f%%", u.gpu_percent());
  return text;
}

}  // namespace

std::string WorkersTable(const std::vector<v1::Worker>& workers) {
  TextTable table({"worker", "device", "models", "slots", "running", "speed", "utilisation",
                   "node", "arch", "version", "labels"});
  for (const v1::Worker& w : workers) {
    const v1::WorkerCapabilities& caps = w.capabilities();
    std::vector<std::string> models;
    for (int model : caps.models()) {
      std::string name = v1::Model::Kind_Name(static_cast<v1::Model::Kind>(model));
      // COMMAND(gbr|quadratic): the commands its operator registered.
      if (model == v1::Model::COMMAND && !caps.commands().empty()) {
        absl::StrAppend(&name, "(", absl::StrJoin(caps.commands(), "|"), ")");
      }
      models.push_back(std::move(name));
    }
    table.Add({w.worker_id(),
               absl::StrCat(v1::WorkerCapabilities::DeviceKind_Name(caps.device_kind()), " ",
                            caps.device_name()),
               absl::StrJoin(models, ","), absl::StrCat(caps.slots()),
               absl::StrCat(w.running_trials_size()), SpeedText(w), UtilisationText(w),
               caps.node_name(), caps.arch(),
               caps.version(), Labels(caps)});
  }
  return table.Render();
}

}  // namespace dhpt::cli
