#include "services/cli/ask_tell.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "services/cli/terminal_text.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"

namespace dhpt::cli {
namespace {

// `what` and `example` name the word's kind ("metric", "loss=0.25").
absl::StatusOr<std::pair<std::string, std::string>> SplitWord(const std::string& word,
                                                              absl::string_view what,
                                                              absl::string_view example) {
  const size_t equals = word.find('=');
  if (equals == std::string::npos || equals == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", word, "\" is not ", what, "=value (e.g. ", example, ")"));
  }
  return std::make_pair(word.substr(0, equals), word.substr(equals + 1));
}

}  // namespace

std::string ShellWord(absl::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return absl::ascii_isalnum(c) || absl::string_view("_-.,:/@%+=").find(c) !=
                                         absl::string_view::npos;
  });
  if (plain) return std::string(word);
  return absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'");
}

std::string AskLine(const v1::Trial& trial) {
  std::string line = absl::StrCat(trial.number());
  const std::map<std::string, v1::ParameterValue> sorted(trial.params().begin(),
                                                         trial.params().end());
  for (const auto& [name, value] : sorted) {
    // One line per trial whatever a value holds (the spec refuses control characters; a study
    // stored before that rule is shown escaped), and one shell word per parameter: a value
    // with a space, a quote or a `$` is quoted, so `eval "set -- $line"` reads it back whole.
    absl::StrAppend(&line, " ",
                    ShellWord(absl::StrCat("--", name, "=",
                                           TerminalText(FormatParameterValueExact(value)))));
  }
  return line;
}

std::optional<std::string> OversizedTellReason(const absl::Status& status,
                                               const v1::CompleteTrialRequest& request) {
  if (!absl::IsResourceExhausted(status) ||
      !absl::StrContains(status.message(), "larger than max")) {
    return std::nullopt;  // The scheduler's own RESOURCE_EXHAUSTED (a limit it names) is its word.
  }
  // "... (2345 vs. 1024)": the limit is the second number.
  std::string limit;
  const size_t vs = status.message().rfind("vs. ");
  int64_t limit_bytes = 0;
  if (vs != absl::string_view::npos &&
      absl::SimpleAtoi(absl::StripSuffix(status.message().substr(vs + 4), ")"), &limit_bytes)) {
    limit = absl::StrCat("of ", limit_bytes, " bytes ");
  }
  // The biggest part of the request is what to shrink: the reason, one long metric name, or
  // the metrics together (each entry is its name, a double and a few bytes of tags).
  const size_t reason_bytes = request.infeasible_reason().size();
  size_t metric_bytes = 0;
  std::string longest;
  for (const auto& [name, value] : request.metrics()) {
    metric_bytes += name.size() + 12;
    if (name.size() > longest.size()) longest = name;
  }
  std::string what;
  std::string fix;
  if (reason_bytes >= metric_bytes) {
    what = absl::StrCat("the --infeasible reason (", reason_bytes, " bytes)");
    fix = "give a shorter reason";
  } else if (2 * longest.size() > metric_bytes) {
    constexpr size_t kShownName = 40;
    what = absl::StrCat("metric name \"",
                        TerminalText(longest.size() > kShownName
                                         ? absl::StrCat(longest.substr(0, kShownName), "...")
                                         : longest),
                        "\" (", longest.size(), " bytes)");
    fix = "give shorter metric names";
  } else {
    const int metrics = request.metrics_size();
    what = absl::StrCat("the result (", metrics, metrics == 1 ? " metric" : " metrics", ")");
    fix = absl::StrCat("tell the objectives and at most ", kMaxTellMetrics, " metrics in all");
  }
  return absl::StrCat("trial ", request.trial(), ": ", what,
                      " is over the scheduler's message limit ", limit, "(", status.message(),
                      "; dhpt-scheduler --max_message_bytes): ", fix);
}

std::string OversizedTellFailure(absl::string_view oversized,
                                 const v1::CompleteTrialRequest& request) {
  const std::string failure = absl::StrCat("bad result: ", oversized);
  const std::string& reason = request.infeasible_reason();
  if (reason.empty()) return failure;
  if (reason.size() <= kKeptTellReasonBytes) return absl::StrCat(reason, " [", failure, "]");
  // Cut on a UTF-8 character boundary: the scheduler refuses a reason that is not valid UTF-8.
  size_t cut = kKeptTellReasonBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(reason.substr(0, cut), "... [cut to ", kKeptTellReasonBytes, " bytes; ",
                      failure, "]");
}

absl::StatusOr<google::protobuf::Map<std::string, double>> ParseMetricWords(
    const std::vector<std::string>& words) {
  google::protobuf::Map<std::string, double> metrics;
  for (const std::string& word : words) {
    ASSIGN_OR_RETURN(auto pair, SplitWord(word, "metric", "loss=0.25"));
    if (metrics.contains(pair.first)) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", pair.first, " is given twice"));
    }
    // Decimal only (no hex, no "nan"): what a program printing a metric writes.
    double value = 0;
    const char* end = pair.second.data() + pair.second.size();
    const std::from_chars_result parsed = std::from_chars(pair.second.data(), end, value);
    // Out of range (1e999) leaves `value` untouched: refused, never stored as 0.
    if (pair.second.empty() || parsed.ptr != end || parsed.ec != std::errc() ||
        !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", pair.first, ": \"", pair.second,
                       "\" is not a finite decimal number"));
    }
    metrics[pair.first] = value;
  }
  return metrics;
}

absl::StatusOr<google::protobuf::Map<std::string, google::protobuf::Value>> ParseParameterWords(
    const std::vector<std::string>& words) {
  google::protobuf::Map<std::string, google::protobuf::Value> params;
  for (const std::string& word : words) {
    ASSIGN_OR_RETURN(auto pair, SplitWord(word, "parameter", "lr=0.01"));
    if (params.contains(pair.first)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", pair.first, " is given twice"));
    }
    double number = 0;
    google::protobuf::Value& value = params[pair.first];
    if (absl::SimpleAtod(pair.second, &number)) {
      value.set_number_value(number);
    } else {
      value.set_string_value(pair.second);
    }
  }
  return params;
}

}  // namespace dhpt::cli
