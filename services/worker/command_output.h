#pragma once

// What a COMMAND trial's program prints on stdout, read as it arrives. Two formats, line by
// line, so that Katib training code runs unchanged and other code has a structured choice:
//   - Katib's StdOut collector: any number of `name=value` pairs anywhere on a line, found as
//     Katib's default filter `([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)` finds them
//     (names here may also hold '.', as study metric names may).
//   - JSON lines: a line whose first non-space character is '{' and that parses as a JSON
//     object; its number fields are metrics, others are ignored. (One that does not parse is
//     read as Katib pairs.)
// A `step` key on a line is the step of that line's values, not a metric. Lines that hold
// neither are the program's log. Every limit below bounds what a program can make the worker
// hold, whatever it prints.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dhpt::worker {

// Longer lines are skipped whole (a progress bar or a dump, not a metric).
inline constexpr size_t kMaxOutputLineBytes = 64 * 1024;
// Distinct metric names kept per trial, the objective's included; later names are ignored.
// With the worker's own measurements a result stays within the scheduler's 64 metrics.
inline constexpr size_t kMaxOutputMetrics = 48;
inline constexpr size_t kMaxOutputMetricNameBytes = 64;
// Bytes of stdout parsed per trial by default; the rest is drained and discarded.
inline constexpr int64_t kDefaultMaxOutputBytes = int64_t{64} << 20;
// The key that gives a line's step rather than a metric.
inline constexpr absl::string_view kOutputStepKey = "step";

// One value of the objective metric to stream as the trial's progress.
struct IntermediateValue {
  int64_t step = 0;
  double value = 0;
  bool operator==(const IntermediateValue&) const = default;
};

class CommandOutputParser {
 public:
  CommandOutputParser(std::string objective_metric, int64_t max_bytes = kDefaultMaxOutputBytes);

  // Parses every line `bytes` completes (with the partial line kept from before) and returns
  // the objective's values to stream, in order: those whose step is above the last streamed.
  std::vector<IntermediateValue> Feed(absl::string_view bytes);
  // The output ended: a last line without a newline is parsed too.
  std::vector<IntermediateValue> Finish();

  // The last value of every metric reported (NaN and infinities never are).
  std::map<std::string, double> metrics() const;
  std::optional<double> objective() const;
  // What the limits cost, for the log.
  int64_t skipped_long_lines() const { return skipped_long_lines_; }
  int64_t discarded_bytes() const { return discarded_bytes_; }
  bool metric_limit_reached() const { return metric_limit_reached_; }

 private:
  struct Metric {
    double last = 0;
    int64_t reports = 0;  // A report's default step is its number.
  };

  void ParseLine(absl::string_view line, std::vector<IntermediateValue>& events);
  void Report(const std::string& name, double value, std::optional<int64_t> step,
              std::vector<IntermediateValue>& events);

  const std::string objective_metric_;
  const int64_t max_bytes_;
  int64_t parsed_bytes_ = 0;
  std::string partial_;         // The current line, up to kMaxOutputLineBytes.
  bool skipping_line_ = false;  // The current line is over the limit: drop it to its end.
  std::map<std::string, Metric> metrics_;
  std::optional<int64_t> last_streamed_step_;
  int64_t skipped_long_lines_ = 0;
  int64_t discarded_bytes_ = 0;
  bool metric_limit_reached_ = false;
};

}  // namespace dhpt::worker
