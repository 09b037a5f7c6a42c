#pragma once

// Study summaries that GetStudy, GetBestTrial and ListStudies read without the scheduler core's lock (issue 34: user calls
// never wait behind workers). During a saturating run the worker streams hold the core's lock
// for most of every millisecond, and a GetStudy that took it waited tens of milliseconds for
// 0.02 ms of work. The core publishes a read study's summary as it releases its lock after
// changing it (SchedulerCore::CoreLock), so an answer from here is what the core held after the
// last call that returned: as consistent as one built under the lock.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "dhpt/v1/study_service.pb.h"

namespace dhpt::scheduler {

// One study's summary, immutable once published. The spec and the best trial change rarely and
// are shared between publications; they are copied into the answer by the reader, off the lock.
struct PublishedStudy {
  v1::Study summary;  // Without the spec; without the best trial when `best` holds it.
  std::shared_ptr<const v1::StudySpec> spec;
  std::shared_ptr<const v1::Trial> best;

  v1::Study Answer() const {
    v1::Study out = summary;
    *out.mutable_spec() = *spec;
    if (best) *out.mutable_best_trial() = *best;
    return out;
  }

  // GetBestTrial's answer: null when no trial has completed yet. An evicted study's summary
  // holds its best trial itself.
  const v1::Trial* BestTrial() const {
    if (best) return best.get();
    return summary.has_best_trial() ? &summary.best_trial() : nullptr;
  }
};

// Every study in creation order (ListStudies' pages): its order number and name.
using PublishedOrder = std::vector<std::pair<uint64_t, std::string>>;

// The published summaries by study name, and the studies' order once a user has listed them.
// Its lock is held for lookups or a pointer swap only.
class PublishedStudies {
 public:
  std::shared_ptr<const PublishedStudy> Find(absl::string_view name) const {
    absl::MutexLock lock(&mutex_);
    auto it = studies_.find(name);
    return it == studies_.end() ? nullptr : it->second;
  }

  // A null `study` takes the name off: its summary must be built under the core's lock (it
  // reads the connected workers), or the study is gone.
  void Publish(const std::string& name, std::shared_ptr<const PublishedStudy> study) {
    std::shared_ptr<const PublishedStudy> old;  // Freed after the lock is released.
    absl::MutexLock lock(&mutex_);
    if (study == nullptr) {
      if (auto it = studies_.find(name); it != studies_.end()) {
        old = std::move(it->second);
        studies_.erase(it);
      }
      return;
    }
    std::shared_ptr<const PublishedStudy>& slot = studies_[name];
    old = std::exchange(slot, std::move(study));
  }

  void PublishOrder(std::shared_ptr<const PublishedOrder> order) {
    std::shared_ptr<const PublishedOrder> old;  // Freed after the lock is released.
    absl::MutexLock lock(&mutex_);
    old = std::exchange(order_, std::move(order));
  }

  // The first `count` studies after order number `after` and before `before` (capped at the
  // first order number not yet given: a listing's horizon, StudyListing), each with its order
  // number and summary, whether more follow them, and the capped `before`; nullopt when the
  // order is not published or one of them is not (their page is built under the core's lock).
  struct Listed {
    std::vector<std::pair<uint64_t, std::shared_ptr<const PublishedStudy>>> studies;
    bool more = false;
    uint64_t before = 0;
  };
  std::optional<Listed> After(uint64_t after, uint64_t before, size_t count) const {
    absl::MutexLock lock(&mutex_);
    if (order_ == nullptr) return std::nullopt;
    auto it = std::upper_bound(order_->begin(), order_->end(), after,
                               [](uint64_t order, const auto& study) { return order < study.first; });
    Listed listed;
    listed.before = std::min(before, order_->empty() ? 0 : order_->back().first + 1);
    for (; it != order_->end() && it->first < listed.before && listed.studies.size() < count;
         ++it) {
      auto found = studies_.find(it->second);
      if (found == studies_.end()) return std::nullopt;
      listed.studies.emplace_back(it->first, found->second);
    }
    listed.more = it != order_->end() && it->first < listed.before;
    return listed;
  }

 private:
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<const PublishedStudy>> studies_
      ABSL_GUARDED_BY(mutex_);
  std::shared_ptr<const PublishedOrder> order_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace dhpt::scheduler
