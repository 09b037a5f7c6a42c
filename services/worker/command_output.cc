#include "services/worker/command_output.h"

#include <algorithm>
#include <cmath>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/charconv.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace dhpt::worker {
namespace {

using Pairs = std::vector<std::pair<std::string, double>>;

// Katib's [\w|-], plus '.' so that dotted study metric names (val.loss) can be printed.
bool IsNameChar(char c) {
  return absl::ascii_isalnum(c) || c == '_' || c == '|' || c == '-' || c == '.';
}
// RE2's \s.
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Printable ASCII without spaces: safe in a proto string and in any table.
bool IsMetricName(absl::string_view name) {
  return !name.empty() && name.size() <= kMaxOutputMetricNameBytes &&
         std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

// The value part of Katib's filter, [+-]?\d*(\.\d+)?([Ee][+-]?\d+)?, matched greedily at
// `pos`. Returns its length (possibly 0).
size_t MatchNumber(absl::string_view s, size_t pos) {
  size_t i = pos;
  auto digits = [&](size_t from) {
    size_t j = from;
    while (j < s.size() && IsDigit(s[j])) ++j;
    return j;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  i = digits(i);
  if (i + 1 < s.size() && s[i] == '.' && IsDigit(s[i + 1])) i = digits(i + 1);
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && IsDigit(s[j])) i = digits(j);
  }
  return i - pos;
}

// A matched value as a double: nullopt when it holds no digit ("", "-", "e5"), as Go's
// ParseFloat refuses those in Katib, or is out of a double's range.
std::optional<double> ParseNumber(absl::string_view text) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);  // from_chars takes no '+'.
  const absl::string_view mantissa = text.substr(0, text.find_first_of("eE"));
  if (std::none_of(mantissa.begin(), mantissa.end(), IsDigit)) return std::nullopt;
  double value = 0;
  if (absl::from_chars(text.data(), text.data() + text.size(), value).ec != std::errc()) {
    return std::nullopt;  // Beyond a double's range: no value to keep.
  }
  return value;
}

// Every name=value pair on the line, leftmost first and without overlap, as Go's
// FindAllStringSubmatch returns them. A match can only start where a run of name characters
// starts, since the run is greedy and cannot be followed by more of itself.
void MatchKatibPairs(absl::string_view line, Pairs& pairs) {
  size_t i = 0;
  while (i < line.size()) {
    if (!IsNameChar(line[i])) {
      ++i;
      continue;
    }
    const size_t name_start = i;
    while (i < line.size() && IsNameChar(line[i])) ++i;
    const size_t name_end = i;
    size_t j = i;
    while (j < line.size() && IsSpace(line[j])) ++j;
    if (j >= line.size() || line[j] != '=') continue;  // Scanning resumes after the run.
    ++j;
    while (j < line.size() && IsSpace(line[j])) ++j;
    const size_t length = MatchNumber(line, j);
    absl::string_view name = line.substr(name_start, name_end - name_start);
    if (std::optional<double> value = ParseNumber(line.substr(j, length));
        value && name.size() <= kMaxOutputMetricNameBytes) {
      pairs.emplace_back(std::string(name), *value);
    }
    i = j + length;
  }
}

// The number fields of a JSON object line; false when the line is not one.
bool MatchJsonPairs(absl::string_view line, Pairs& pairs) {
  google::protobuf::Struct object;
  if (!google::protobuf::util::JsonStringToMessage(
           google::protobuf::StringPiece(line.data(), line.size()), &object)
           .ok()) {
    return false;
  }
  for (const auto& [name, value] : object.fields()) {
    if (value.kind_case() == google::protobuf::Value::kNumberValue) {
      pairs.emplace_back(name, value.number_value());
    }
  }
  return true;
}

std::optional<int64_t> AsStep(double value) {
  // 2^63: the first double past int64's range.
  if (!std::isfinite(value) || value != std::floor(value) ||
      std::abs(value) >= 9.2233720368547758e18) {
    return std::nullopt;
  }
  return static_cast<int64_t>(value);
}

}  // namespace

CommandOutputParser::CommandOutputParser(std::string objective_metric, int64_t max_bytes)
    : objective_metric_(std::move(objective_metric)), max_bytes_(std::max<int64_t>(max_bytes, 0)) {}

std::vector<IntermediateValue> CommandOutputParser::Feed(absl::string_view bytes) {
  std::vector<IntermediateValue> events;
  const auto room = static_cast<size_t>(max_bytes_ - parsed_bytes_);
  const bool cut = bytes.size() > room;
  if (cut) {
    discarded_bytes_ += static_cast<int64_t>(bytes.size() - room);
    bytes = bytes.substr(0, room);
  }
  parsed_bytes_ += static_cast<int64_t>(bytes.size());
  while (!bytes.empty()) {
    // '\r' ends a line too: progress bars redraw theirs with it.
    const size_t end = bytes.find_first_of("\n\r");
    const absl::string_view piece = bytes.substr(0, end);
    if (skipping_line_) {
      // Dropping the rest of an over-long line.
    } else if (partial_.size() + piece.size() > kMaxOutputLineBytes) {
      skipping_line_ = true;
      partial_.clear();
      ++skipped_long_lines_;
    } else if (end != absl::string_view::npos && partial_.empty()) {
      ParseLine(piece, events);  // The common case: a whole line, parsed in place.
    } else {
      partial_.append(piece.data(), piece.size());
      if (end != absl::string_view::npos) {
        ParseLine(partial_, events);
        partial_.clear();
      }
    }
    if (end == absl::string_view::npos) break;
    skipping_line_ = false;
    bytes.remove_prefix(end + 1);
  }
  if (cut) {  // The line the limit cuts is never parsed: it is not whole.
    partial_.clear();
    skipping_line_ = true;
  }
  return events;
}

std::vector<IntermediateValue> CommandOutputParser::Finish() {
  std::vector<IntermediateValue> events;
  if (!skipping_line_ && !partial_.empty()) ParseLine(partial_, events);
  partial_.clear();
  skipping_line_ = true;  // Nothing after the end.
  return events;
}

std::map<std::string, double> CommandOutputParser::metrics() const {
  std::map<std::string, double> metrics;
  for (const auto& [name, metric] : metrics_) metrics.emplace(name, metric.last);
  return metrics;
}

std::optional<double> CommandOutputParser::objective() const {
  auto it = metrics_.find(objective_metric_);
  if (it == metrics_.end()) return std::nullopt;
  return it->second.last;
}

void CommandOutputParser::ParseLine(absl::string_view line,
                                    std::vector<IntermediateValue>& events) {
  const size_t first = line.find_first_not_of(" \t\f\v");
  if (first == absl::string_view::npos) return;
  Pairs pairs;
  if (line[first] != '{' || !MatchJsonPairs(line, pairs)) {
    if (line.find('=') == absl::string_view::npos) return;  // Log, quickly.
    MatchKatibPairs(line, pairs);
  }
  std::optional<int64_t> step;
  for (const auto& [name, value] : pairs) {
    if (name == kOutputStepKey) {
      if (std::optional<int64_t> s = AsStep(value)) step = s;  // The last one holds.
    }
  }
  for (const auto& [name, value] : pairs) {
    if (name != kOutputStepKey) Report(name, value, step, events);
  }
}

void CommandOutputParser::Report(const std::string& name, double value, std::optional<int64_t> step,
                                 std::vector<IntermediateValue>& events) {
  if (!std::isfinite(value) || !IsMetricName(name)) return;
  const bool objective = name == objective_metric_;
  auto it = metrics_.find(name);
  if (it == metrics_.end()) {
    // One place stays free for the objective, however many names a program prints first.
    const size_t others = metrics_.size() - (metrics_.contains(objective_metric_) ? 1 : 0);
    if (!objective && others + 1 >= kMaxOutputMetrics) {
      metric_limit_reached_ = true;
      return;
    }
    it = metrics_.emplace(name, Metric{}).first;
  }
  it->second.last = value;
  const int64_t reports = ++it->second.reports;
  if (!objective) return;
  const int64_t at = step.value_or(reports);
  // Early stopping compares values at increasing steps; a repeated or earlier step still
  // counts as the latest value, but is not streamed.
  if (last_streamed_step_ && at <= *last_streamed_step_) return;
  last_streamed_step_ = at;
  events.push_back({at, value});
}

}  // namespace dhpt::worker
