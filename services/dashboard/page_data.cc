#include "services/dashboard/page_data.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "services/cli/cli_json.h"
#include "services/cli/study_file.h"
#include "services/common/param_values.h"

namespace dhpt::dashboard {
namespace {

using cli::JsonString;

// CliJson on one line: it indents, and every newline it writes is formatting (a newline inside
// a string is escaped), so dropping each with the indent after it leaves the same JSON. One
// line is what a server-sent event's data field needs.
std::string Compact(const google::protobuf::Message& message) {
  const std::string pretty = cli::CliJson(message);
  std::string out;
  out.reserve(pretty.size());
  for (size_t i = 0; i < pretty.size(); ++i) {
    if (pretty[i] != '\n') {
      out += pretty[i];
      continue;
    }
    while (i + 1 < pretty.size() && pretty[i + 1] == ' ') ++i;
  }
  return out;
}

std::string Number(double value) {
  return std::isfinite(value) ? absl::StrCat(value) : "null";
}

std::string TimeJson(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "null";
  return JsonString(google::protobuf::util::TimeUtil::ToString(time));
}

double Seconds(const google::protobuf::Timestamp& time) {
  return static_cast<double>(time.seconds()) + time.nanos() * 1e-9;
}

bool Maximize(const v1::StudySpec& spec) {
  const v1::Objective& objective =
      spec.objectives_size() > 0 ? spec.objectives(0) : spec.objective();
  return objective.goal() == v1::Objective::MAXIMIZE;
}

// The value the history plots: the objective, or the first objective of a multi-objective study.
std::optional<double> ObjectiveOf(const v1::Trial& trial) {
  if (trial.state() != v1::Trial::COMPLETED) return std::nullopt;
  if (trial.has_objective_value()) return trial.objective_value();
  if (trial.objective_values_size() > 0) return trial.objective_values(0);
  return std::nullopt;
}

}  // namespace

std::string StudiesJson(const std::vector<v1::Study>& studies) {
  std::vector<std::string> items;
  items.reserve(studies.size());
  for (const v1::Study& study : studies) {
    const v1::StudySpec& spec = study.spec();
    const int64_t done = int64_t{study.trials_completed()} + study.trials_failed() +
                         study.trials_cancelled() + study.trials_pruned();
    const std::optional<double> best = ObjectiveOf(study.best_trial());
    items.push_back(absl::StrCat(
        "{\"name\":", JsonString(spec.name()),
        ",\"state\":", JsonString(v1::Study::State_Name(study.state())),
        ",\"state_reason\":", JsonString(study.state_reason()),
        ",\"algorithm\":", JsonString(v1::Algorithm::Name_Name(spec.algorithm().name())),
        ",\"model\":", JsonString(v1::Model::Kind_Name(spec.model().kind())),
        ",\"done\":", done, ",\"max_trials\":", spec.max_trials(),
        ",\"running\":", study.trials_running(), ",\"failed\":", study.trials_failed(),
        ",\"best\":", best ? Number(*best) : "null",
        ",\"maximize\":", Maximize(spec) ? "true" : "false",
        ",\"objectives\":", std::max(1, spec.objectives_size()),
        ",\"created\":", TimeJson(study.create_time()), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string WorkersJson(const std::vector<v1::Worker>& workers) {
  std::vector<std::string> items;
  items.reserve(workers.size());
  for (const v1::Worker& worker : workers) items.push_back(Compact(worker));
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string StudyJson(const v1::Study& study, bool allow_stop) {
  return absl::StrCat("{\"study\":", Compact(study), ",\"allow_stop\":",
                      allow_stop ? "true" : "false", "}");
}

std::string TrialJson(const v1::Trial& trial, const std::vector<v1::TrialCurve>& curves) {
  std::vector<std::string> items;
  for (const v1::TrialCurve& curve : curves) items.push_back(Compact(curve));
  return absl::StrCat("{\"trial\":", Compact(trial), ",\"curves\":[", absl::StrJoin(items, ","),
                      "]}");
}

std::string ErrorJson(absl::string_view message) {
  return absl::StrCat("{\"error\":", JsonString(message), "}");
}

namespace {

std::string Numbers(const std::vector<double>& values) {
  std::vector<std::string> items;
  items.reserve(values.size());
  for (double value : values) items.push_back(Number(value));
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string AxisJson(const analysis::PlotAxis& axis) {
  std::vector<std::string> categories;
  for (const std::string& category : axis.categories) categories.push_back(JsonString(category));
  return absl::StrCat("{\"label\":", JsonString(axis.label), ",\"log\":", axis.log ? "true" : "false",
                      ",\"categories\":[", absl::StrJoin(categories, ","), "],\"min\":",
                      Number(axis.min), ",\"max\":", Number(axis.max), "}");
}

}  // namespace

std::string PlotJson(const analysis::PlotData& plot) {
  std::vector<std::string> axes, panels;
  for (const analysis::PlotAxis& axis : plot.axes) axes.push_back(AxisJson(axis));
  for (const analysis::PlotPanel& panel : plot.panels) {
    std::vector<std::string> series;
    for (const analysis::PlotSeries& s : panel.series) {
      series.push_back(absl::StrCat(
          "{\"name\":", JsonString(s.name), ",\"line\":", s.line ? "true" : "false",
          ",\"x\":", Numbers(s.x), ",\"y\":", Numbers(s.y), ",\"z\":", Numbers(s.z),
          ",\"trials\":[", absl::StrJoin(s.trials, ","), "]}"));
    }
    panels.push_back(absl::StrCat("{\"title\":", JsonString(panel.title), ",\"x\":", AxisJson(panel.x),
                                  ",\"y\":", AxisJson(panel.y), ",\"z\":", AxisJson(panel.z),
                                  ",\"series\":[", absl::StrJoin(series, ","), "]}"));
  }
  return absl::StrCat("{\"kind\":", JsonString(analysis::PlotKindName(plot.kind)),
                      ",\"title\":", JsonString(plot.title), ",\"points_total\":", plot.points_total,
                      ",\"downsampled\":", plot.downsampled ? "true" : "false",
                      ",\"empty_reason\":", JsonString(plot.empty_reason), ",\"axes\":[",
                      absl::StrJoin(axes, ","), "],\"panels\":[", absl::StrJoin(panels, ","), "]}");
}

std::string EventJson(const v1::StudyEvent& event) {
  std::string out = absl::StrCat("{\"position\":", event.position());
  if (event.has_study()) absl::StrAppend(&out, ",\"study\":", Compact(event.study()));
  if (event.has_trial()) absl::StrAppend(&out, ",\"trial\":", Compact(event.trial()));
  return out + "}";
}

HistorySeries::HistorySeries(bool maximize, int max_buckets)
    : maximize_(maximize), max_buckets_(std::max(2, max_buckets)) {}

void HistorySeries::Add(const v1::Trial& trial) {
  const std::optional<double> value = ObjectiveOf(trial);
  if (!value || !std::isfinite(*value)) return;
  const int64_t number = trial.number();
  const auto better = [this](double a, double b) { return maximize_ ? a > b : a < b; };
  while (buckets_.size() >= static_cast<size_t>(max_buckets_) &&
         number >= buckets_.back().first + width_) {
    Halve();
  }
  if (buckets_.empty() || number >= buckets_.back().first + width_) {
    Bucket bucket;
    bucket.first = number - number % width_;
    bucket.last = number;
    bucket.min = bucket.max = *value;
    bucket.best = buckets_.empty() || better(*value, buckets_.back().best) ? *value
                                                                           : buckets_.back().best;
    bucket.count = 1;
    buckets_.push_back(bucket);
    return;
  }
  // Trials come in number order, so a value lands in the last bucket.
  Bucket& bucket = buckets_.back();
  bucket.last = std::max(bucket.last, number);
  bucket.min = std::min(bucket.min, *value);
  bucket.max = std::max(bucket.max, *value);
  if (better(*value, bucket.best)) bucket.best = *value;
  ++bucket.count;
}

void HistorySeries::Halve() {
  width_ *= 2;
  std::vector<Bucket> merged;
  for (const Bucket& bucket : buckets_) {
    const int64_t first = bucket.first - bucket.first % width_;
    if (!merged.empty() && merged.back().first == first) {
      Bucket& into = merged.back();
      into.last = bucket.last;
      into.min = std::min(into.min, bucket.min);
      into.max = std::max(into.max, bucket.max);
      into.best = bucket.best;  // The later bucket's best includes the earlier one's.
      into.count += bucket.count;
    } else {
      merged.push_back(bucket);
      merged.back().first = first;
    }
  }
  buckets_ = std::move(merged);
}

std::string HistorySeries::Json() const {
  std::vector<std::string> points;
  points.reserve(buckets_.size());
  for (const Bucket& b : buckets_) {
    points.push_back(absl::StrCat("[", b.first, ",", b.last, ",", Number(b.min), ",",
                                  Number(b.max), ",", Number(b.best), ",", b.count, "]"));
  }
  return absl::StrCat("{\"maximize\":", maximize_ ? "true" : "false", ",\"width\":", width_,
                      ",\"points\":[", absl::StrJoin(points, ","), "]}");
}

PlotSample::PlotSample(const v1::StudySpec& spec, int64_t trials)
    : spec_(spec), stride_(StrideFor(trials)), data_(analysis::StudyDataFromProto(spec, {})) {}

int64_t PlotSample::StrideFor(int64_t trials) {
  int64_t stride = 1;
  while (trials > stride * kMaxPlotTrials && stride < kMaxSampleStride) stride *= 2;
  return stride;
}

PlotSample PlotSample::Before(const Mark& mark) const {
  PlotSample prefix(spec_, 0);
  prefix.stride_ = stride_;
  prefix.seen_ = mark.seen;
  if (mark.anchored) prefix.anchor_ = anchor_;
  prefix.data_.trials.assign(data_.trials.begin(), data_.trials.begin() + static_cast<ptrdiff_t>(mark.kept));
  return prefix;
}

void PlotSample::AddPage(const google::protobuf::RepeatedPtrField<v1::Trial>& trials,
                         const google::protobuf::RepeatedPtrField<v1::TrialCurve>& curves,
                         int64_t covered) {
  seen_ += covered;
  if (trials.empty()) return;
  const bool first = !anchor_;
  if (first) anchor_ = trials[0];
  std::vector<v1::Trial> page;
  page.reserve(trials.size() + 1);
  if (!first) page.push_back(*anchor_);
  page.insert(page.end(), trials.begin(), trials.end());
  analysis::StudyData part = analysis::StudyDataFromProto(
      spec_, page, std::vector<v1::TrialCurve>(curves.begin(), curves.end()));
  if (first) {
    data_ = std::move(part);
  } else {
    data_.trials.insert(data_.trials.end(), std::make_move_iterator(part.trials.begin() + 1),
                        std::make_move_iterator(part.trials.end()));
  }
}

absl::StatusOr<TableQuery> ParseTableQuery(const std::map<std::string, std::string>& values) {
  TableQuery query;
  const auto get = [&values](const std::string& key) -> std::string {
    const auto it = values.find(key);
    return it == values.end() ? "" : it->second;
  };
  if (const std::string sort = get("sort"); !sort.empty()) {
    static const char* const kColumns[] = {"number", "state",    "value",    "worker", "node",
                                           "device", "start",    "duration", "error"};
    const bool known = std::find(std::begin(kColumns), std::end(kColumns), sort) !=
                           std::end(kColumns) ||
                       absl::StartsWith(sort, "param:") || absl::StartsWith(sort, "metric:");
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sort: not a column of the trial table; use number, state, value, worker, node, "
          "device, start, duration, error, param:NAME or metric:NAME"));
    }
    query.sort = sort;
  }
  query.descending = get("desc") == "1" || get("desc") == "true";
  if (const std::string state = get("state"); !state.empty()) {
    if (!v1::Trial::State_Parse(state, &query.state)) {
      return absl::InvalidArgumentError(
          "state: one of PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, PRUNED");
    }
  }
  query.text = get("q");
  if (const std::string page = get("page"); !page.empty()) {
    if (!absl::SimpleAtoi(page, &query.page) || query.page < 0) {
      return absl::InvalidArgumentError("page: a page number from 0");
    }
  }
  if (const std::string size = get("size"); !size.empty()) {
    if (!absl::SimpleAtoi(size, &query.page_size) || query.page_size < 1 ||
        query.page_size > kMaxTablePageSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("size: rows per page, from 1 to ", kMaxTablePageSize));
    }
  }
  if (static_cast<int64_t>(query.page + 1) * query.page_size > kMaxTableRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page: only the first ", kMaxTableRows,
        " rows of an order can be paged to; filter the table or sort the other way"));
  }
  return query;
}

TrialTable::TrialTable(TableQuery query)
    : query_(std::move(query)),
      lower_text_(absl::AsciiStrToLower(query_.text)),
      keep_(static_cast<size_t>(query_.page + 1) * static_cast<size_t>(query_.page_size)) {}

TrialTable::Key TrialTable::KeyOf(const v1::Trial& trial) const {
  Key key;
  const auto number = [&key](double value) {
    key.missing = !std::isfinite(value);
    key.number = value;
  };
  const auto text = [&key](const std::string& value) {
    key.missing = value.empty();
    key.text = value;
  };
  const std::string& sort = query_.sort;
  if (sort == "number") {
    number(static_cast<double>(trial.number()));
  } else if (sort == "state") {
    text(v1::Trial::State_Name(trial.state()));
  } else if (sort == "value") {
    if (const std::optional<double> value = ObjectiveOf(trial)) number(*value);
  } else if (sort == "worker") {
    text(trial.worker_id());
  } else if (sort == "node") {
    text(trial.node_name());
  } else if (sort == "device") {
    text(trial.device());
  } else if (sort == "error") {
    text(trial.error());
  } else if (sort == "start") {
    if (trial.has_start_time()) number(Seconds(trial.start_time()));
  } else if (sort == "duration") {
    if (trial.has_start_time() && trial.has_end_time()) {
      number(Seconds(trial.end_time()) - Seconds(trial.start_time()));
    }
  } else if (absl::StartsWith(sort, "param:")) {
    const auto it = trial.params().find(sort.substr(6));
    if (it != trial.params().end()) {
      switch (it->second.kind_case()) {
        case v1::ParameterValue::kDoubleValue: number(it->second.double_value()); break;
        case v1::ParameterValue::kIntValue: number(static_cast<double>(it->second.int_value())); break;
        case v1::ParameterValue::kStringValue: text(it->second.string_value()); break;
        default: break;
      }
    }
  } else if (absl::StartsWith(sort, "metric:")) {
    const auto it = trial.metrics().find(sort.substr(7));
    if (it != trial.metrics().end()) number(it->second);
  }
  return key;
}

bool TrialTable::Before(const Row& a, const Row& b) const {
  if (a.key.missing != b.key.missing) return b.key.missing;
  if (!a.key.missing) {
    const int order = a.key.text != b.key.text ? (a.key.text < b.key.text ? -1 : 1)
                      : a.key.number != b.key.number ? (a.key.number < b.key.number ? -1 : 1)
                                                       : 0;
    if (order != 0) return query_.descending ? order > 0 : order < 0;
  }
  return a.number < b.number;  // Ties in number order, so pages are stable.
}

bool TrialTable::Matches(const v1::Trial& trial) const {
  if (query_.state != v1::Trial::STATE_UNSPECIFIED && trial.state() != query_.state) return false;
  const std::string& text = lower_text_;
  if (text.empty()) return true;
  const auto Contains = [](const std::string& haystack, const std::string& needle) {
    return absl::StrContains(absl::AsciiStrToLower(haystack), needle);
  };
  if (Contains(trial.worker_id(), text) ||
      Contains(trial.node_name(), text) ||
      Contains(trial.device(), text) ||
      Contains(trial.error(), text) ||
      Contains(v1::Trial::State_Name(trial.state()), text)) {
    return true;
  }
  for (const auto& [name, value] : trial.params()) {
    if (Contains(FormatParameterValue(value), text)) return true;
  }
  return false;
}

void TrialTable::Add(const v1::Trial& trial) {
  if (!Matches(trial)) return;
  ++total_;
  Row row{KeyOf(trial), trial.number(), {}};
  const auto after = [this](const Row& a, const Row& b) { return Before(a, b); };
  if (heap_.size() >= keep_) {
    if (!Before(row, heap_.front())) return;
    std::pop_heap(heap_.begin(), heap_.end(), after);
    heap_.pop_back();
  }
  row.trial = trial;
  heap_.push_back(std::move(row));
  std::push_heap(heap_.begin(), heap_.end(), after);
}

bool TrialTable::Done() const {
  // One matching trial past the page says there is a next page; a page just full does not.
  return query_.NumberOrder() && static_cast<size_t>(total_) > keep_;
}

std::string TrialTable::Json() const {
  std::vector<const Row*> rows;
  for (const Row& row : heap_) rows.push_back(&row);
  std::sort(rows.begin(), rows.end(), [this](const Row* a, const Row* b) { return Before(*a, *b); });
  std::vector<std::string> items;
  const size_t first = static_cast<size_t>(query_.page) * query_.page_size;
  for (size_t i = first; i < rows.size(); ++i) items.push_back(Compact(rows[i]->trial));
  return absl::StrCat("{\"total\":", total_, ",\"complete\":", Done() ? "false" : "true",
                      ",\"page\":", query_.page, ",\"page_size\":", query_.page_size,
                      ",\"rows\":[", absl::StrJoin(items, ","), "]}");
}

}  // namespace dhpt::dashboard
