#pragma once

// The bytes of reply pages (ListTrials, ListStudies) built and not yet sent, across all
// callers. Without a bound, N callers each asking for a 10,000-trial page hold N pages at once
// (60 such calls took a scheduler from 127 MB to 1.16 GB). A page is cut short to what the
// budget has left (its next_page_token says where to go on), and a call that finds too little
// left is RESOURCE_EXHAUSTED; the share is held until the reply has been written.
//
// glibc keeps what a thread freed in that thread's arena, and gRPC builds replies on many
// threads: once the last large page is sent, the free memory is handed back (malloc_trim), so
// the scheduler's size falls back after a burst.

#include <cstddef>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace dhpt::scheduler {

// The default of --max_reply_bytes_in_flight, in bytes on the wire: a few large pages at once.
// A built page takes about six times its wire size in memory until it is written (trial
// messages with their maps of metrics, then the serialised copy; measured: 14 pages of 5 MB
// held 350 MB), so this costs about 200 MB at most, which a 4 GB board can spare.
inline constexpr size_t kDefaultMaxReplyBytesInFlight = 32 << 20;
// The least a page is built with: below it the caller is asked to come back.
inline constexpr size_t kMinReplyBytes = 64 << 10;
// Freed reply memory is handed back to the system once this much has been released since the
// last time and no reply is in flight (a trim walks every arena: not worth it per call).
inline constexpr size_t kTrimAfterReleasedBytes = 16 << 20;

class ReplyBudget {
 public:
  explicit ReplyBudget(size_t max_bytes) : max_bytes_(max_bytes) {}

  // A share of the budget, given back when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        Reset();
        budget_ = std::exchange(other.budget_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
      }
      return *this;
    }
    ~Lease() { Reset(); }
    size_t bytes() const { return bytes_; }
    void Reset();

   private:
    friend class ReplyBudget;
    Lease(ReplyBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
    ReplyBudget* budget_ = nullptr;
    size_t bytes_ = 0;
  };

  // What a page may take now; RESOURCE_EXHAUSTED, saying why, when less than kMinReplyBytes.
  absl::StatusOr<size_t> Available() const;
  // Takes `bytes` (the page as built, at most what Available said, plus at most one item).
  Lease Take(size_t bytes);
  // For a page built before its share was known (ListStudies off the core's lock): takes
  // `bytes` if they fit in what is left; nullopt if not (the page is to be cut to the budget);
  // RESOURCE_EXHAUSTED as Available. One step, so pages built at once cannot both take the rest.
  absl::StatusOr<std::optional<Lease>> TakeIfFits(size_t bytes);
  // Takes `bytes` more only if they fit (an export's curves); RESOURCE_EXHAUSTED otherwise.
  absl::Status Grow(Lease& lease, size_t bytes);

  size_t in_use() const {
    absl::MutexLock lock(&mutex_);
    return in_use_;
  }
  size_t max_bytes() const { return max_bytes_; }

  // Trims once more after a trim at the last release: the threads that sent the pages may
  // free what gRPC held for them (serialised copies) just after it, on other threads, and a
  // burst's memory then stayed taken. Called by the scheduler's periodic tick.
  void TrimIfOwed();

 private:
  void Release(size_t bytes);
  absl::Status Exhausted(size_t in_use) const;

  const size_t max_bytes_;
  mutable absl::Mutex mutex_;
  size_t in_use_ ABSL_GUARDED_BY(mutex_) = 0;
  bool trim_owed_ ABSL_GUARDED_BY(mutex_) = false;
  size_t released_since_trim_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace dhpt::scheduler
