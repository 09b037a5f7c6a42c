#pragma once

// Events that may come in floods (workers connecting and going): the first lines of an
// interval are logged, later ones only counted and told as one line once the interval has
// ended, so a flood of thousands costs a few lines an interval rather than a line each.
// Not thread-safe: its owner's mutex guards it.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dhpt {

class LogLimiter {
 public:
  // At most `lines` lines each `interval`; a zero interval logs every line.
  LogLimiter(int lines, absl::Duration interval) : lines_(lines), interval_(interval) {}

  absl::Duration interval() const { return interval_; }
  int lines() const { return lines_; }

  // Whether to log the line of an event at `now`. One that is not logged is counted under its
  // `kind` ("connects"), for Summary. Call Summary first: the counts of an ended interval are
  // told before a line of the next.
  bool Admit(absl::string_view kind, absl::Time now) {
    if (interval_ <= absl::ZeroDuration()) return true;
    if (counts_.empty() && now >= start_ + interval_) {
      start_ = now;
      logged_ = 0;
    }
    if (logged_ < lines_) {
      ++logged_;
      return true;
    }
    for (auto& [name, count] : counts_) {
      if (name == kind) {
        ++count;
        return false;
      }
    }
    counts_.emplace_back(std::string(kind), 1);
    return false;
  }

  // Once an interval with events not logged has ended by `now`: their counts by kind in the
  // order first seen ("180 connects, 178 disconnects"), and a new interval begins. Otherwise
  // empty (nothing held back, or the interval still runs).
  std::string Summary(absl::Time now) {
    if (counts_.empty() || now < start_ + interval_) return "";
    std::string text = Flush();
    start_ = now;
    logged_ = 0;
    return text;
  }

  // The counts not told yet, whether or not their interval has ended (empty if none), and
  // forgotten: for the owner's last line, at shutdown, where no later Summary would tell them.
  std::string Flush() {
    std::string text;
    for (const auto& [name, count] : counts_) {
      absl::StrAppend(&text, text.empty() ? "" : ", ", count, " ", name);
    }
    counts_.clear();
    return text;
  }

 private:
  const int lines_;
  const absl::Duration interval_;
  absl::Time start_ = absl::InfinitePast();
  int logged_ = 0;
  std::vector<std::pair<std::string, int64_t>> counts_;
};

}  // namespace dhpt
