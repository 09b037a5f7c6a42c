#include "services/scheduler/placement.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dhpt::scheduler {

bool NeedsGpu(const v1::StudySpec& spec) {
  return spec.model().kind() == v1::Model::AUTOENCODER && !spec.allow_cpu_fallback();
}

bool CanRun(const v1::StudySpec& spec, const v1::WorkerCapabilities& worker) {
  const auto& models = worker.models();
  if (std::find(models.begin(), models.end(), spec.model().kind()) == models.end()) return false;
  return !NeedsGpu(spec) || worker.device_kind() == v1::WorkerCapabilities::CUDA;
}

std::string WaitingForWorker(const v1::StudySpec& spec,
                             const std::vector<const v1::WorkerCapabilities*>& connected) {
  const std::string model = v1::Model::Kind_Name(spec.model().kind());
  std::map<std::string, int> by_kind;
  for (const v1::WorkerCapabilities* worker : connected) {
    ++by_kind[v1::WorkerCapabilities::DeviceKind_Name(worker->device_kind())];
  }
  std::vector<std::string> parts;
  for (const auto& [kind, count] : by_kind) {
    parts.push_back(absl::StrCat(count, " ", kind, count == 1 ? " worker" : " workers"));
  }
  const std::string present =
      parts.empty() ? "no worker is connected" : absl::StrCat("connected: ", absl::StrJoin(parts, ", "));
  if (NeedsGpu(spec)) {
    return absl::StrCat("waiting for a CUDA worker that runs ", model, " (", present,
                        "; set allow_cpu_fallback to let a GPU worker without a CUDA device run it)");
  }
  return absl::StrCat("waiting for a worker that runs ", model, " (", present, ")");
}

}  // namespace dhpt::scheduler
