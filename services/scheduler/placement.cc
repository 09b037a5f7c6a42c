#include "services/scheduler/placement.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/study/model_choice.h"

namespace dhpt::scheduler {

bool NeedsGpu(const v1::StudySpec& spec) {
  return spec.model().kind() == v1::Model::AUTOENCODER && !spec.allow_cpu_fallback();
}

bool MatchesSelector(const v1::StudySpec& spec, const v1::WorkerCapabilities& worker) {
  for (const auto& [key, value] : spec.worker_selector()) {
    auto it = worker.labels().find(key);
    if (it == worker.labels().end() || it->second != value) return false;
  }
  return true;
}

bool HasCommand(const v1::StudySpec& spec, const v1::WorkerCapabilities& worker) {
  if (spec.model().kind() != v1::Model::COMMAND) return true;
  const auto& commands = worker.commands();
  return std::find(commands.begin(), commands.end(), spec.model().command()) != commands.end();
}

bool CanRun(const v1::StudySpec& spec, const v1::WorkerCapabilities& worker) {
  // Whatever a worker claims: only clients evaluate these (SuggestTrials).
  if (spec.model().kind() == v1::Model::EXTERNAL) return false;
  if (!HasCommand(spec, worker)) return false;
  // A model-choice study's trials each run as their own kind: a worker that runs some of its
  // kinds runs those trials (a board too small for Random Forest still tunes XGBoost).
  const std::vector<v1::Model::Kind> kinds = study::StudyModelKinds(spec);
  if (std::none_of(kinds.begin(), kinds.end(),
                   [&](v1::Model::Kind kind) { return RunsKind(worker, kind); })) {
    return false;
  }
  if (!MatchesSelector(spec, worker)) return false;
  return !NeedsGpu(spec) || worker.device_kind() == v1::WorkerCapabilities::CUDA;
}

bool RunsKind(const v1::WorkerCapabilities& worker, v1::Model::Kind kind) {
  const auto& models = worker.models();
  return std::find(models.begin(), models.end(), kind) != models.end();
}

std::string PlacementClass(const v1::WorkerCapabilities& worker) {
  std::vector<int> models(worker.models().begin(), worker.models().end());
  std::sort(models.begin(), models.end());
  std::vector<std::string> commands(worker.commands().begin(), worker.commands().end());
  std::sort(commands.begin(), commands.end());
  const std::map<std::string, std::string> labels(worker.labels().begin(), worker.labels().end());
  // Lengths first, so that no name's bytes can pass for a separator.
  std::string key = absl::StrCat(worker.device_kind(), "|", absl::StrJoin(models, ","), "|");
  for (const std::string& command : commands) absl::StrAppend(&key, command.size(), ":", command);
  absl::StrAppend(&key, "|");
  for (const auto& [name, value] : labels) {
    absl::StrAppend(&key, name.size(), ":", name, value.size(), ":", value);
  }
  return key;
}

namespace {

// "labelled board=pi4, gpu=orin" in key order, or "" without a selector.
std::string SelectorText(const v1::StudySpec& spec) {
  if (spec.worker_selector().empty()) return "";
  const std::map<std::string, std::string> sorted(spec.worker_selector().begin(),
                                                  spec.worker_selector().end());
  return absl::StrCat(" labelled ", absl::StrJoin(sorted, ", ", absl::PairFormatter("=")));
}

}  // namespace

std::string WaitingForWorker(const v1::StudySpec& spec,
                             const std::vector<const v1::WorkerCapabilities*>& connected) {
  const std::string model = v1::Model::Kind_Name(spec.model().kind());
  if (spec.model().kind() == v1::Model::EXTERNAL) {
    return "waiting for a client to ask for trials (SuggestTrials, or dhpt ask)";
  }
  std::map<std::string, int> by_kind;
  int selected = 0;
  int with_command = 0;
  for (const v1::WorkerCapabilities* worker : connected) {
    ++by_kind[v1::WorkerCapabilities::DeviceKind_Name(worker->device_kind())];
    selected += MatchesSelector(spec, *worker) ? 1 : 0;
    with_command += HasCommand(spec, *worker) ? 1 : 0;
  }
  std::vector<std::string> parts;
  for (const auto& [kind, count] : by_kind) {
    parts.push_back(absl::StrCat(count, " ", kind, count == 1 ? " worker" : " workers"));
  }
  std::string present =
      parts.empty() ? "no worker is connected" : absl::StrCat("connected: ", absl::StrJoin(parts, ", "));
  const std::string selector = SelectorText(spec);
  if (!selector.empty() && !connected.empty()) {
    absl::StrAppend(&present, "; ", selected, " of them", selector);
  }
  if (spec.model().kind() == v1::Model::COMMAND) {
    if (!connected.empty()) absl::StrAppend(&present, "; ", with_command, " of them with it");
    return absl::StrCat("waiting for a worker", selector, " that has command \"",
                        spec.model().command(), "\" (", present, "; its operator registers it "
                        "with --command=", spec.model().command(), "=PATH)");
  }
  if (NeedsGpu(spec)) {
    return absl::StrCat("waiting for a CUDA worker", selector, " that runs ", model, " (", present,
                        "; set allow_cpu_fallback to let a GPU worker without a CUDA device run it)");
  }
  return absl::StrCat("waiting for a worker", selector, " that runs ", model, " (", present, ")");
}

}  // namespace dhpt::scheduler
