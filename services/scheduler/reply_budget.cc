#include "services/scheduler/reply_budget.h"

#include <malloc.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dhpt::scheduler {

void ReplyBudget::Lease::Reset() {
  if (budget_ != nullptr && bytes_ > 0) budget_->Release(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

absl::Status ReplyBudget::Exhausted(size_t in_use) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the scheduler is sending ", in_use >> 20, " MiB of pages to other callers, its limit "
      "(--max_reply_bytes_in_flight=", max_bytes_, "); retry in a moment, or ask for a smaller "
      "page_size"));
}

absl::StatusOr<size_t> ReplyBudget::Available() const {
  absl::MutexLock lock(&mutex_);
  const size_t left = max_bytes_ - std::min(in_use_, max_bytes_);
  if (left < std::min(kMinReplyBytes, max_bytes_)) return Exhausted(in_use_);
  return left;
}

ReplyBudget::Lease ReplyBudget::Take(size_t bytes) {
  absl::MutexLock lock(&mutex_);
  in_use_ += bytes;
  return Lease(this, bytes);
}

absl::StatusOr<std::optional<ReplyBudget::Lease>> ReplyBudget::TakeIfFits(size_t bytes) {
  absl::MutexLock lock(&mutex_);
  const size_t left = max_bytes_ - std::min(in_use_, max_bytes_);
  if (left < std::min(kMinReplyBytes, max_bytes_)) return Exhausted(in_use_);
  if (bytes > left) return std::nullopt;
  in_use_ += bytes;
  return Lease(this, bytes);
}

absl::Status ReplyBudget::Grow(Lease& lease, size_t bytes) {
  absl::MutexLock lock(&mutex_);
  if (in_use_ + bytes > max_bytes_) return Exhausted(in_use_);
  in_use_ += bytes;
  if (lease.budget_ == nullptr) lease.budget_ = this;
  lease.bytes_ += bytes;
  return absl::OkStatus();
}

void ReplyBudget::Release(size_t bytes) {
  bool trim = false;
  {
    absl::MutexLock lock(&mutex_);
    in_use_ -= std::min(bytes, in_use_);
    released_since_trim_ += bytes;
    if (in_use_ == 0 && released_since_trim_ >= kTrimAfterReleasedBytes) {
      released_since_trim_ = 0;
      trim = true;
      trim_owed_ = true;
    }
  }
  // Outside the lock: a trim walks every arena (milliseconds), and callers go on meanwhile.
  if (trim) malloc_trim(0);
}

void ReplyBudget::TrimIfOwed() {
  {
    absl::MutexLock lock(&mutex_);
    if (!trim_owed_ || in_use_ != 0) return;
    trim_owed_ = false;
  }
  malloc_trim(0);
}

}  // namespace dhpt::scheduler
