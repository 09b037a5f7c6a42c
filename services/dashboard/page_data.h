#pragma once

// What the dashboard's pages show, as JSON, from the scheduler's study and trial messages: no
// HTTP or gRPC here (dashboard_server.cc does the wiring). Everything a study or a worker wrote
// (names, parameter names, categorical values, errors, labels) is JSON-escaped here and put
// into the page as text (textContent) by the scripts in assets/.
//
// Memory stays bounded however large a study is: the history plot is a fixed number of
// buckets, and a table page keeps only the rows up to that page while the trials stream past.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dhpt/v1/study_service.pb.h"
#include "services/analysis/plot_data.h"

namespace dhpt::dashboard {

// The history plot's resolution: trials are grouped into at most this many buckets of
// consecutive numbers (each with its min, max and the best so far), whatever the study's size.
inline constexpr int kHistoryBuckets = 500;
// A table page holds at most this many rows.
inline constexpr int kMaxTablePageSize = 200;
inline constexpr int kDefaultTablePageSize = 50;
// Sorted or filtered pages are built by streaming every trial past a heap of the rows up to the
// page asked for; pages past this many rows are refused (filter, or sort the other way).
inline constexpr int kMaxTableRows = 10000;

// The studies page: one summary per study (no spec), as a JSON array.
std::string StudiesJson(const std::vector<v1::Study>& studies);
// The workers page: each worker's id, node, labels, device, slots and running trials.
std::string WorkersJson(const std::vector<v1::Worker>& workers);
// The study page's summary: {"study": {... with its spec}, "allow_stop": b}.
std::string StudyJson(const v1::Study& study, bool allow_stop);
// The trial page: {"trial": {...}, "curves": [{attempt, steps, values}, ...]}.
std::string TrialJson(const v1::Trial& trial, const std::vector<v1::TrialCurve>& curves);
// {"error": message}, for any answer that failed.
std::string ErrorJson(absl::string_view message);
// One plot of the study-insight plots (services/analysis, issue 29) for the page to draw:
// {"kind", "title", "points_total", "downsampled", "empty_reason", "axes": [axis...],
//  "panels": [{"title", "x", "y", "z": axis, "series": [{"name", "line", "x", "y", "z",
//  "trials"}]}]}, an axis being {"label", "log", "categories", "min", "max"}.
std::string PlotJson(const analysis::PlotData& plot);
// One event of a study's watch, for the browser's event stream:
// {"position": N, "study": {...}} or {"position": N, "trial": {...}}.
std::string EventJson(const v1::StudyEvent& event);

// The objective's history, downsampled: trial numbers are grouped into buckets of a width that
// doubles (adjacent buckets merged) whenever more than `max_buckets` would be needed.
class HistorySeries {
 public:
  explicit HistorySeries(bool maximize, int max_buckets = kHistoryBuckets);
  // Trials in number order; only completed ones with an objective value count.
  void Add(const v1::Trial& trial);
  // {"maximize": b, "width": W, "points": [[first, last, min, max, best, count], ...]}
  std::string Json() const;
  int buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    int64_t first = 0;  // The bucket covers numbers [first, first + width_).
    int64_t last = 0;   // The last number with a value in it.
    double min = 0, max = 0, best = 0;  // best: the best value up to the bucket's end.
    int64_t count = 0;
  };
  void Halve();

  bool maximize_;
  int max_buckets_;
  int64_t width_ = 1;
  std::vector<Bucket> buckets_;
};

// The trials the study-insight plots are drawn from at most (about: every trial that improved
// on the best so far comes too); each plot shows at most 2,000 points of them
// (analysis::kMaxPointsPerSeries).
inline constexpr int64_t kMaxPlotTrials = 20000;
// The largest stride the scheduler samples with (ListTrialsRequest.sample_stride): a study of
// more than 20,000 x 1,024 trials is drawn from more than kMaxPlotTrials.
inline constexpr int64_t kMaxSampleStride = 1024;

// The study-insight plots' trials in the analyses' compact form (analysis::StudyData: a few
// numbers per trial, not the Trial messages), gathered while a study's pages stream past in
// number order. A study of more than kMaxPlotTrials trials is drawn from every stride-th trial
// and every trial that improved on the best so far (single objective): the scheduler's sample
// (ListTrialsRequest.sample_stride), which passes over the other trials without building them.
// A copy taken between pages resumes where it stopped: the dashboard keeps one up to where the
// study still changes and reads only the rest the next time.
class PlotSample {
 public:
  // `trials`: how many the study has now (its summary's counts), which sets the stride.
  PlotSample(const v1::StudySpec& spec, int64_t trials);
  // The smallest power of two that keeps a study of `trials` within kMaxPlotTrials (up to
  // kMaxSampleStride): a power of two so that it changes only when the study has doubled, not
  // with every trial past the limit.
  static int64_t StrideFor(int64_t trials);
  // One page of the sample in number order, with their curves when they were asked for;
  // `covered`: how many of the study's trials the page went through.
  void AddPage(const google::protobuf::RepeatedPtrField<v1::Trial>& trials,
               const google::protobuf::RepeatedPtrField<v1::TrialCurve>& curves, int64_t covered);
  const analysis::StudyData& data() const { return data_; }
  // Where the sample stands between two pages, and a copy of it as it was there: what a later
  // read resumes from, copied once rather than at every page.
  struct Mark {
    int64_t seen = 0;
    size_t kept = 0;
    bool anchored = false;
  };
  Mark mark() const { return {seen_, data_.trials.size(), anchor_.has_value()}; }
  PlotSample Before(const Mark& mark) const;
  int64_t stride() const { return stride_; }
  int64_t seen() const { return seen_; }  // Every trial the pages added went through.
  int64_t kept() const { return static_cast<int64_t>(data_.trials.size()); }

 private:
  v1::StudySpec spec_;
  int64_t stride_;
  int64_t seen_ = 0;
  // Times are seconds since the earliest trial's creation: this first trial is put before each
  // later page so that every page has the same origin.
  std::optional<v1::Trial> anchor_;
  analysis::StudyData data_;
};

// One page of a study's trial table: which rows, in which order.
struct TableQuery {
  // "number", "state", "value", "worker", "node", "device", "start", "duration", "error",
  // "param:NAME" or "metric:NAME".
  std::string sort = "number";
  bool descending = false;
  // Only trials in this state (unset: all); the scheduler filters on it.
  v1::Trial::State state = v1::Trial::STATE_UNSPECIFIED;
  // Only trials whose worker, node, device, error or a parameter value contains this text.
  std::string text;
  int page = 0;
  int page_size = kDefaultTablePageSize;

  // Number order with no text filter: the page is the stream's own order (no heap needed).
  bool NumberOrder() const { return sort == "number" && !descending && text.empty(); }
};
// From the query string's values (sort, desc, state, q, page, size); INVALID_ARGUMENT naming
// the value otherwise.
absl::StatusOr<TableQuery> ParseTableQuery(const std::map<std::string, std::string>& values);

// Builds one page while every trial of the study streams past, holding at most
// (page + 1) * page_size trials.
class TrialTable {
 public:
  explicit TrialTable(TableQuery query);
  void Add(const v1::Trial& trial);
  // True once the page cannot change any more and a next page exists (number order, page full,
  // one more trial matched): stop streaming.
  bool Done() const;
  // {"total": matching trials seen, "page": P, "page_size": S, "rows": [trial, ...]}.
  std::string Json() const;

 private:
  struct Key {
    bool missing = true;  // Rows without the value sort last either way.
    double number = 0;
    std::string text;
  };
  struct Row {
    Key key;
    int64_t number = 0;
    v1::Trial trial;
  };
  Key KeyOf(const v1::Trial& trial) const;
  // True when `a` comes before `b` on the page.
  bool Before(const Row& a, const Row& b) const;
  bool Matches(const v1::Trial& trial) const;

  const TableQuery query_;
  const std::string lower_text_;  // The text filter, matched regardless of case.
  const size_t keep_;
  int64_t total_ = 0;
  std::vector<Row> heap_;  // A max-heap by Before: the last row of the kept ones on top.
};

}  // namespace dhpt::dashboard
