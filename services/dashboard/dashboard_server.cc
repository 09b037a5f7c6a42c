#include "services/dashboard/dashboard_server.h"

#include <httplib.h>
#include <malloc.h>

#include <algorithm>
#include <optional>
#include <deque>
#include <future>
#include <list>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <google/protobuf/stubs/common.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "services/analysis/plot_data.h"
#include "services/analysis/study_data.h"
#include "services/cli/study_client.h"
#include "services/common/logging.h"
#include "services/dashboard/assets.h"
#include "services/dashboard/http_server.h"
#include "services/dashboard/page_data.h"

namespace dhpt::dashboard {
namespace {

constexpr char kJson[] = "application/json; charset=utf-8";
// Pages of trials streamed past a table, a history or a trial look-up: the scheduler's largest.
constexpr int kScanPageSize = 10000;
// A trial looked up by number: pages this large are skipped through without curves, and the
// one holding it is asked for again with them (its earlier trials' curves come too).
constexpr int kTrialSeekPageSize = 2000;
// The history is read in pages of this many trials, each with its values only (values_only),
// so that a page is cheap to read again: each time the history is asked for, the page of its
// first unfinished trial onwards (at least the last page) is.
constexpr int kHistoryPageSize = 10000;
// Studies whose history is kept between page loads (two series of kHistoryBuckets each).
constexpr size_t kHistoryCacheStudies = 64;
// Studies up to this many trials get their intermediate values read for the plots (100 trials
// a page, so at most 100 pages).
constexpr int64_t kMaxPlotCurveTrials = 10000;
// Studies whose plot sample (PlotSample, up to where the study still changes) and last answer
// are kept between reads: each holds up to about kMaxPlotTrials trials in the analyses' form
// (a few MiB, more with intermediate values), so only a few.
constexpr size_t kPlotCacheStudies = 4;
// How long Stop waits for the open event streams to end their answers.
constexpr absl::Duration kStopGrace = absl::Seconds(2);

int HttpStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kInvalidArgument: return 400;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated: return 403;
    case absl::StatusCode::kFailedPrecondition: return 409;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded: return 503;
    default: return 502;
  }
}

void Fail(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatus(status);
  res.set_content(ErrorJson(status.message()), kJson);
}

// A plots answer (PlotsJson's object) with "read": the trials read from the scheduler for it
// (of a large study, its sample's), the rest coming from what the dashboard kept, and
// "read_bytes", the size of those trials' messages (the plot view's: see ReadPlots); what
// bounds a large study's reads.
std::string WithRead(absl::string_view answer, int64_t read, int64_t read_bytes) {
  return absl::StrCat("{\"read\":", read, ",\"read_bytes\":", read_bytes, ",", answer.substr(1));
}

bool Permanent(const absl::Status& status) {
  return absl::IsNotFound(status) || absl::IsInvalidArgument(status) ||
         absl::IsPermissionDenied(status) || absl::IsUnauthenticated(status);
}

std::map<std::string, std::string> Params(const httplib::Request& req) {
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : req.params) values.emplace(key, value);
  return values;
}

}  // namespace

// One browser's event stream (outside the anonymous namespace, since State holds them): a thread watching the study pushes events here; the HTTP
// thread writes them out, or a keepalive comment when there is nothing to say.
class EventStream {
 public:
  EventStream(const DashboardOptions& options, std::string study, uint64_t after)
      : client_(options.scheduler, options.security), study_(std::move(study)),
        keepalive_(options.keepalive) {
    thread_ = std::thread([this, after] {
      absl::Status status = client_.Watch(
          study_, [this](const v1::StudyEvent& event) { Push(event); },
          /*summaries_only=*/false, after);
      absl::MutexLock lock(&mutex_);
      finished_ = true;
      end_ = std::move(status);
    });
  }
  ~EventStream() {
    client_.Cancel();
    thread_.join();
  }
  void Cancel() { client_.Cancel(); }

  // Writes events until the browser leaves, the study ends or the watch fails.
  void Run(httplib::DataSink& sink) {
    const std::string hello = "retry: 1000\n\n";  // Reconnect after a second if cut.
    if (!sink.write(hello.data(), hello.size())) return;
    while (true) {
      std::deque<std::string> batch;
      bool finished = false, overflowed = false;
      absl::Status end;
      {
        absl::MutexLock lock(&mutex_);
        mutex_.AwaitWithTimeout(absl::Condition(this, &EventStream::Ready), keepalive_);
        batch.swap(queue_);
        finished = finished_;
        overflowed = overflowed_;
        end = end_;
      }
      std::string out;
      for (const std::string& event : batch) out += event;
      if (batch.empty() && !finished && !overflowed) out = ": keepalive\n\n";
      if (finished && !overflowed && (end.ok() || Permanent(end))) {
        // The study ended (the page stops listening), or watching it cannot work (the page
        // says why). Anything else (the dashboard stopping, a scheduler away for longer than
        // the client waits) just closes the stream: the browser reconnects with the last
        // event's id and the watch resumes from there.
        absl::StrAppend(&out, "event: ", end.ok() ? "end" : "failure", "\ndata: ",
                        ErrorJson(end.message()), "\n\n");
      }
      // (An empty write would be the chunked answer's end marker, written twice with done.)
      if (!out.empty() && !sink.write(out.data(), out.size())) return;
      if (finished || overflowed) return;
    }
  }

 private:
  bool Ready() const { return !queue_.empty() || finished_ || overflowed_; }
  void Push(const v1::StudyEvent& event) {
    absl::MutexLock lock(&mutex_);
    if (overflowed_) return;  // The browser resumes after the last event it was sent.
    if (queue_.size() >= kMaxQueuedEvents) {
      overflowed_ = true;
      client_.Cancel();
      return;
    }
    queue_.push_back(absl::StrCat("id: ", event.position(), "\ndata: ", EventJson(event), "\n\n"));
  }

  cli::StudyClient client_;
  const std::string study_;
  const absl::Duration keepalive_;
  absl::Mutex mutex_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mutex_);
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  bool overflowed_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status end_ ABSL_GUARDED_BY(mutex_);
  std::thread thread_;
};

struct DashboardServer::State {
  explicit State(const DashboardOptions& options)
      : options(options), client(options.scheduler, options.security), server(options.connections) {}

  void Routes();
  void ServeAsset(const std::string& path, httplib::Response& res) const;
  void Events(const httplib::Request& req, httplib::Response& res);
  void History(const std::string& study, httplib::Response& res);
  absl::StatusOr<HistorySeries> HistoryOf(const std::string& study);
  // The study-insight plots (services/analysis): importance, parallel coordinates, slice,
  // contour, intermediate values, EDF, timeline, and Pareto front and hypervolume.
  void Plots(const std::string& study, httplib::Response& res);
  // The plots' JSON, from the kept sample and answer where they still hold (see ReadPlots).
  absl::StatusOr<std::string> PlotsOf(const std::string& study);
  absl::StatusOr<std::string> ReadPlots(const std::string& study);
  std::string PlotsJson(const PlotSample& sample, bool curves,
                        const absl::StatusOr<v1::GetParamImportancesResponse>& importances);
  // Reads the newest studies' histories once at start, so their pages open at once.
  void WarmUp();
  void Trials(const httplib::Request& req, httplib::Response& res);
  void Trial(const std::string& study, const std::string& number, httplib::Response& res);

  const DashboardOptions options;
  cli::StudyClient client;  // Unary calls only (a Watch would need its own).
  GuardedServer server;
  int port = 0;
  std::thread thread;
  absl::Mutex mutex;
  bool stopping ABSL_GUARDED_BY(mutex) = false;
  std::list<EventStream*> open_streams ABSL_GUARDED_BY(mutex);
  // Every live page's place, from its request until its answer is let go, with the client
  // (ClientGroup) that holds it; `running` once its stream runs. An evicted one is ended (its
  // page reconnects and resumes after its last event) and no longer counts.
  struct StreamSlot {
    std::string client;
    EventStream* running = nullptr;
    bool evicted = false;
  };
  std::list<StreamSlot> stream_slots ABSL_GUARDED_BY(mutex);
  // A place for a live page of `client`, or why there is none (TakeStreamSlot's policy).
  absl::StatusOr<std::list<StreamSlot>::iterator> TakeStreamSlotLocked(const std::string& client)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex);
  std::thread warm_up;

  // Each study's history up to where it still changes (see HistoryOf).
  struct CachedHistory {
    std::string key;           // The study's create time.
    HistorySeries prefix;      // The trials before resume_token's page.
    std::string resume_token;  // Where the next read starts ("" = the first page).
    uint64_t used = 0;
  };
  absl::Mutex history_mutex;
  std::map<std::string, CachedHistory> history_cache ABSL_GUARDED_BY(history_mutex);
  uint64_t history_uses ABSL_GUARDED_BY(history_mutex) = 0;

  // Each study's plot sample up to where it still changes, and the last answer while nothing
  // can change (see ReadPlots).
  struct CachedPlots {
    std::string key;           // The study's create time.
    PlotSample prefix;         // The trials before resume_token's page.
    std::string resume_token;  // Where the next read starts ("" = the first page).
    bool curves = false;       // Whether the prefix holds intermediate values.
    std::string counts;        // The study's counts when `answer` was made; "" while it runs.
    std::string answer;        // "" while the study has pending or running trials.
    uint64_t used = 0;
  };
  absl::Mutex plot_mutex;
  std::map<std::string, CachedPlots> plot_cache ABSL_GUARDED_BY(plot_mutex);
  std::set<std::string> plots_reading ABSL_GUARDED_BY(plot_mutex);  // Read now, by one request each.
  uint64_t plot_uses ABSL_GUARDED_BY(plot_mutex) = 0;
};

void DashboardServer::State::ServeAsset(const std::string& path, httplib::Response& res) const {
  const Asset* asset = FindAsset(path);
  if (asset == nullptr) {
    res.status = 404;
    res.set_content("not found", "text/plain");
    return;
  }
  res.set_content(std::string(asset->data), std::string(asset->content_type));
}

void DashboardServer::State::Routes() {
  // The pages' own scripts and styles only: a name or error a study wrote that slipped into the
  // page as markup still could not run a script.
  server.set_default_headers(
      {{"Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'none'"},
       {"X-Content-Type-Options", "nosniff"},
       {"Referrer-Policy", "no-referrer"},
       {"Cache-Control", "no-store"}});
  // A query the scheduler could not read (a name that is not UTF-8 fails protobuf's parse, and
  // logs an error there per request) is answered here, before it costs the scheduler anything.
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Before anything is read or changed: a page whose name was re-pointed here must not
    // read studies or stop them (allowed_hosts.h).
    const std::string host = req.get_header_value("Host");
    if (req.get_header_value_count("Host") != 1 || !IsHostHeaderText(host)) {
      res.status = 400;
      res.set_content("a request needs one Host header, with a name or an address\n",
                      "text/plain; charset=utf-8");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!options.allowed_hosts.Allows(host)) {
      res.status = 421;
      res.set_content(RefusedHostMessage(host), "text/plain; charset=utf-8");
      return httplib::Server::HandlerResponse::Handled;
    }
    for (const auto& [key, value] : req.params) {
      if (!google::protobuf::internal::IsStructurallyValidUTF8(value) ||
          !google::protobuf::internal::IsStructurallyValidUTF8(key)) {
        Fail(res, absl::InvalidArgumentError("a query parameter is not UTF-8 text"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Every page is the one script-driven page; it reads its path and query (shareable links).
  for (const char* page : {"/", "/study", "/trial", "/workers"}) {
    server.Get(page, [this](const httplib::Request&, httplib::Response& res) {
      ServeAsset("index.html", res);
    });
  }
  server.Get(R"(/assets/([a-z0-9_.-]+))", [this](const httplib::Request& req, httplib::Response& res) {
    ServeAsset(req.matches[1], res);
  });
  server.Get("/api/studies", [this](const httplib::Request&, httplib::Response& res) {
    absl::StatusOr<std::vector<v1::Study>> studies = client.ListStudies();
    if (!studies.ok()) return Fail(res, studies.status());
    res.set_content(StudiesJson(*studies), kJson);
  });
  server.Get("/api/study", [this](const httplib::Request& req, httplib::Response& res) {
    absl::StatusOr<v1::Study> study = client.GetStudy(req.get_param_value("name"));
    if (!study.ok()) return Fail(res, study.status());
    res.set_content(StudyJson(*study, options.allow_stop), kJson);
  });
  server.Get("/api/history", [this](const httplib::Request& req, httplib::Response& res) {
    History(req.get_param_value("study"), res);
  });
  server.Get("/api/plots", [this](const httplib::Request& req, httplib::Response& res) {
    Plots(req.get_param_value("study"), res);
  });
  server.Get("/api/trials", [this](const httplib::Request& req, httplib::Response& res) {
    Trials(req, res);
  });
  server.Get("/api/trial", [this](const httplib::Request& req, httplib::Response& res) {
    Trial(req.get_param_value("study"), req.get_param_value("number"), res);
  });
  server.Get("/api/workers", [this](const httplib::Request&, httplib::Response& res) {
    absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
    if (!workers.ok()) return Fail(res, workers.status());
    res.set_content(WorkersJson(*workers), kJson);
  });
  server.Get("/api/events", [this](const httplib::Request& req, httplib::Response& res) {
    Events(req, res);
  });
  server.Post("/api/stop", [this](const httplib::Request& req, httplib::Response& res) {
    if (!options.allow_stop) {
      return Fail(res, absl::PermissionDeniedError(
                           "this dashboard is read-only; start it with --allow_stop to stop studies"));
    }
    // A form on another site cannot set this header (a cross-site request with it needs a CORS
    // preflight this server never answers), so only the page's own button can stop a study.
    if (req.get_header_value("X-DHPT-Confirm") != "stop") {
      return Fail(res, absl::PermissionDeniedError("stop: the request must come from the page"));
    }
    // The study is the query's: cpp-httplib also reads a form body's fields into the
    // parameters, and a body must not choose what is stopped.
    if (!req.body.empty() || !req.files.empty()) {  // A multipart body's parts are `files`.
      return Fail(res, absl::InvalidArgumentError(
                           "stop: takes the study in the query (?study=NAME) and no body"));
    }
    const std::string name = req.get_param_value("study");
    absl::StatusOr<v1::Study> study = client.StopStudy(name);
    if (!study.ok()) return Fail(res, study.status());
    DHPT_LOG_INFO("stopped study %s from the dashboard", name);
    res.set_content(StudyJson(*study, options.allow_stop), kJson);
  });
}

absl::StatusOr<HistorySeries> DashboardServer::State::HistoryOf(const std::string& study) {
  absl::StatusOr<v1::Study> found = client.GetStudy(study);
  if (!found.ok()) return found.status();
  const v1::StudySpec& spec = found->spec();
  const v1::Objective& objective = spec.objectives_size() > 0 ? spec.objectives(0) : spec.objective();
  // A study deleted and made again under its name is another study.
  const std::string key = absl::StrCat(found->create_time().seconds(), ".", found->create_time().nanos());
  // Trials finish once: the ones before the first page that held an unfinished trial (or the
  // last page) never change, so the series up to there is kept and only the rest is read
  // again. A study of 100,000 trials is read whole once, then only from where it still moves.
  HistorySeries series(objective.goal() == v1::Objective::MAXIMIZE);
  v1::ListTrialsRequest request;
  request.set_study(study);
  request.set_page_size(kHistoryPageSize);
  // The series reads only numbers, states and objective values; a full listing of 100,000
  // trials cost seconds, in parsing and copying parameters and metrics on both sides.
  request.set_values_only(true);
  {
    absl::MutexLock lock(&history_mutex);
    auto it = history_cache.find(study);
    if (it != history_cache.end() && it->second.key == key) {
      series = it->second.prefix;
      request.set_page_token(it->second.resume_token);
    }
  }
  std::optional<HistorySeries> prefix;
  std::string resume_token, last_page_token = request.page_token();
  HistorySeries before_last_page = series;
  const auto unfinished = [](const v1::Trial& trial) {
    return trial.state() == v1::Trial::PENDING || trial.state() == v1::Trial::RUNNING;
  };
  std::string page_token = request.page_token();
  absl::Status status = client.EachTrialPage(request, [&](v1::ListTrialsResponse& page) {
    if (!prefix && std::any_of(page.trials().begin(), page.trials().end(), unfinished)) {
      prefix = series;
      resume_token = page_token;
    }
    last_page_token = page_token;
    before_last_page = series;
    for (const v1::Trial& trial : page.trials()) series.Add(trial);
    page_token = page.next_page_token();
    return true;
  });
  if (!status.ok()) return status;
  if (!prefix) {
    prefix = std::move(before_last_page);
    resume_token = last_page_token;
  }
  absl::MutexLock lock(&history_mutex);
  history_cache.insert_or_assign(
      study, CachedHistory{key, *std::move(prefix), resume_token, ++history_uses});
  // Bounded: the studies looked at longest ago are read whole again if they come back.
  while (history_cache.size() > kHistoryCacheStudies) {
    auto oldest = history_cache.begin();
    for (auto it = history_cache.begin(); it != history_cache.end(); ++it) {
      if (it->second.used < oldest->second.used) oldest = it;
    }
    history_cache.erase(oldest);
  }
  return series;
}

absl::StatusOr<std::string> DashboardServer::State::PlotsOf(const std::string& study) {
  {
    // One read of a study at a time: a second browser opening it waits for the first read, then
    // takes its answer or reads only what changed since.
    absl::MutexLock lock(&plot_mutex);
    const auto free = [&]() { return plots_reading.count(study) == 0; };  // Under plot_mutex.
    plot_mutex.Await(absl::Condition(&free));
    plots_reading.insert(study);
  }
  absl::StatusOr<std::string> answer = ReadPlots(study);
  absl::MutexLock lock(&plot_mutex);
  plots_reading.erase(study);
  return answer;
}

absl::StatusOr<std::string> DashboardServer::State::ReadPlots(const std::string& study) {
  absl::StatusOr<v1::Study> found = client.GetStudy(study);
  if (!found.ok()) return found.status();
  const v1::StudySpec& spec = found->spec();
  // Pending counts a running study's budget not yet begun besides the few trials waiting to
  // start: the stride and whether curves are read follow the trials it has run or runs (a study
  // of 300 trials out of 1,000,000 was drawn from every 64th).
  const int64_t trials = int64_t{found->trials_running()} + found->trials_completed() +
                         found->trials_failed() + found->trials_cancelled() +
                         found->trials_pruned() + found->trials_added();
  // Intermediate values come in pages of 100 trials: read for studies up to kMaxPlotCurveTrials.
  const bool curves = trials <= kMaxPlotCurveTrials;
  const std::string key = absl::StrCat(found->create_time().seconds(), ".", found->create_time().nanos());
  // A study with no pending or running trial changes only by gaining trials (AddTrials, an
  // extended study), which its counts show: while they stay, the last answer stands (its
  // state may still move, to COMPLETED once the scheduler notices: not what the plots show).
  const std::string counts =
      found->trials_pending() + found->trials_running() > 0
          ? ""
          : absl::StrCat(trials, ":", found->trials_completed(), ":", found->trials_failed(), ":",
                         found->trials_pruned(), ":", found->trials_cancelled());
  // As the history (HistoryOf): the sample up to the first page that held an unfinished trial
  // never changes, so it is kept and only the rest is read again, while the stride and whether
  // curves are read stay the same (the stride doubles as the study doubles past kMaxPlotTrials).
  PlotSample sample(spec, trials);
  v1::ListTrialsRequest request;
  request.set_study(study);
  request.set_page_size(kScanPageSize);
  request.set_intermediate_values(curves);
  // Each trial with only what the plots draw (no other metrics, error or attempts): a fraction
  // of a full page to build, send and parse.
  request.set_plot_view(options.plot_view);
  // The scheduler samples a large study (PlotSample) rather than building every trial for it.
  request.set_sample_stride(static_cast<int32_t>(sample.stride()));
  {
    absl::MutexLock lock(&plot_mutex);
    auto it = plot_cache.find(study);
    if (it != plot_cache.end() && it->second.key == key) {
      it->second.used = ++plot_uses;
      if (!counts.empty() && it->second.counts == counts) return WithRead(it->second.answer, 0, 0);
      if (it->second.curves == curves && it->second.prefix.stride() == sample.stride()) {
        sample = it->second.prefix;
        request.set_page_token(it->second.resume_token);
      }
    }
  }
  // The importances are the scheduler's own pass over the study: asked for beside the sample's
  // pages rather than after them, so that on a cluster's two or more cores the two overlap.
  std::future<absl::StatusOr<v1::GetParamImportancesResponse>> importances =
      std::async(std::launch::async, [this, &study] {
        v1::GetParamImportancesRequest request;
        request.set_study(study);
        return client.GetParamImportances(request);
      });
  int64_t read = 0, read_bytes = 0;
  // Where the next read resumes: the first page that held an unfinished trial, or else the
  // last page (a trial added to a finished study lands there or after).
  std::optional<PlotSample::Mark> unfinished_mark, last_page_mark;
  std::string unfinished_token, last_page_token, page_token = request.page_token();
  const auto unfinished = [](const v1::Trial& trial) {
    return trial.state() == v1::Trial::PENDING || trial.state() == v1::Trial::RUNNING;
  };
  absl::Status status = client.EachTrialPage(request, [&](v1::ListTrialsResponse& page) {
    if (!unfinished_mark && std::any_of(page.trials().begin(), page.trials().end(), unfinished)) {
      unfinished_mark = sample.mark();
      unfinished_token = page_token;
    }
    if (page.trials_size() > 0) {
      last_page_mark = sample.mark();
      last_page_token = page_token;
    }
    read += page.trials_size();
    for (const v1::Trial& trial : page.trials()) read_bytes += trial.ByteSizeLong();
    sample.AddPage(page.trials(), page.curves(), page.trials_covered());
    page_token = page.next_page_token();
    return true;
  });
  if (!status.ok()) {
    // Whatever went wrong, the next read starts afresh rather than from what was kept.
    absl::MutexLock lock(&plot_mutex);
    plot_cache.erase(study);
    return status;
  }
  PlotSample prefix = sample.Before(unfinished_mark ? *unfinished_mark
                                    : last_page_mark ? *last_page_mark
                                                     : sample.mark());
  const std::string resume_token = unfinished_mark ? unfinished_token
                                   : last_page_mark ? last_page_token
                                                    : page_token;
  std::string answer = PlotsJson(sample, curves, importances.get());
  absl::MutexLock lock(&plot_mutex);
  plot_cache.insert_or_assign(
      study, CachedPlots{key, std::move(prefix), resume_token, curves, counts,
                         counts.empty() ? "" : answer, ++plot_uses});
  // Bounded: the study looked at longest ago is read whole again if it comes back.
  while (plot_cache.size() > kPlotCacheStudies) {
    auto oldest = plot_cache.begin();
    for (auto it = plot_cache.begin(); it != plot_cache.end(); ++it) {
      if (it->second.used < oldest->second.used) oldest = it;
    }
    plot_cache.erase(oldest);
  }
  return WithRead(answer, read, read_bytes);
}

std::string DashboardServer::State::PlotsJson(
    const PlotSample& sample, bool curves,
    const absl::StatusOr<v1::GetParamImportancesResponse>& importances) {
  const analysis::StudyData& data = sample.data();
  std::optional<analysis::ImportanceResult> importance;
  std::string importance_error;
  if (importances.ok()) {
    importance.emplace();
    importance->objective = importances->objective_metric();
    importance->trials_considered = importances->trials_considered();
    importance->trials_used = importances->trials_used();
    importance->evaluator = importances->evaluator() == v1::GetParamImportancesRequest::FANOVA
                                ? analysis::Evaluator::kFanova
                                : analysis::Evaluator::kPedAnova;
    for (const v1::ParamImportance& p : importances->importances()) {
      importance->importances.push_back({p.name(), p.importance(), p.constant()});
    }
  } else {
    importance_error = std::string(importances.status().message());
  }
  std::vector<std::string> plots;
  for (analysis::PlotKind kind : analysis::AllPlotKinds()) {
    const bool several = data.objectives.size() >= 2;
    // The page draws its own history (live); Pareto plots need two objectives, a contour two
    // parameters.
    if (kind == analysis::PlotKind::kHistory) continue;
    if ((kind == analysis::PlotKind::kParetoFront || kind == analysis::PlotKind::kHypervolume) &&
        !several) {
      continue;
    }
    if (kind == analysis::PlotKind::kContour && data.params.size() < 2) continue;
    analysis::PlotOptions plot_options;
    plot_options.importance = importance ? &*importance : nullptr;
    absl::StatusOr<analysis::PlotData> plot;
    if (kind == analysis::PlotKind::kImportance && !importance) {
      plot = analysis::PlotData();
      plot->kind = kind;
      plot->title = "importance of each parameter";
      plot->empty_reason = importance_error;
    } else {
      plot = analysis::MakePlot(data, kind, plot_options);
    }
    if (!plot.ok()) continue;  // A plot this study cannot have (see MakePlot).
    if (kind == analysis::PlotKind::kIntermediate && !curves && plot->empty_reason.empty()) {
      plot->empty_reason = absl::StrCat("intermediate values are drawn for studies of up to ",
                                        kMaxPlotCurveTrials, " trials");
      plot->panels.clear();
    }
    plots.push_back(PlotJson(*plot));
  }
  std::string answer = absl::StrCat("{\"trials\":", sample.seen(), ",\"drawn_from\":", sample.kept(),
                                    ",\"plots\":[", absl::StrJoin(plots, ","), "]}");
  plots.clear();
  // The pages just read were large and short-lived: give their memory back to the system.
  malloc_trim(0);
  return answer;
}

void DashboardServer::State::Plots(const std::string& study, httplib::Response& res) {
  absl::StatusOr<std::string> answer = PlotsOf(study);
  if (!answer.ok()) return Fail(res, answer.status());
  res.set_content(*std::move(answer), kJson);
}

void DashboardServer::State::History(const std::string& study, httplib::Response& res) {
  absl::StatusOr<HistorySeries> series = HistoryOf(study);
  if (!series.ok()) return Fail(res, series.status());
  res.set_content(series->Json(), kJson);
}

void DashboardServer::State::WarmUp() {
  absl::StatusOr<std::vector<v1::Study>> studies = client.ListStudies();
  if (!studies.ok()) return;  // The pages will say why when they are opened.
  // The newest studies first: those are the ones people open.
  std::sort(studies->begin(), studies->end(), [](const v1::Study& a, const v1::Study& b) {
    return a.create_time().seconds() > b.create_time().seconds();
  });
  if (studies->size() > kHistoryCacheStudies) studies->resize(kHistoryCacheStudies);
  for (const v1::Study& study : *studies) {
    {
      absl::MutexLock lock(&mutex);
      if (stopping) return;
    }
    (void)HistoryOf(study.spec().name());
  }
}

void DashboardServer::State::Trials(const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<TableQuery> query = ParseTableQuery(Params(req));
  if (!query.ok()) return Fail(res, query.status());
  TrialTable table(*query);
  v1::ListTrialsRequest request;
  request.set_study(req.get_param_value("study"));
  request.set_state(query->state);
  // Number order needs only the rows up to the page; any other order sees every trial.
  request.set_page_size(query->NumberOrder()
                            ? std::min(kScanPageSize, (query->page + 1) * query->page_size)
                            : kScanPageSize);
  absl::Status status = client.EachTrialPage(request, [&](v1::ListTrialsResponse& page) {
    for (const v1::Trial& trial : page.trials()) table.Add(trial);
    return !table.Done();
  });
  if (!status.ok()) return Fail(res, status);
  res.set_content(table.Json(), kJson);
}

void DashboardServer::State::Trial(const std::string& study, const std::string& number_text,
                                   httplib::Response& res) {
  int64_t number = 0;
  if (!absl::SimpleAtoi(number_text, &number) || number < 0) {
    return Fail(res, absl::InvalidArgumentError("number: a trial number from 0"));
  }
  // Trials are listed in number order: skip pages until the one that holds it, then ask for
  // that page again, up to the trial, with the curves.
  v1::ListTrialsRequest request;
  request.set_study(study);
  request.set_page_size(kTrialSeekPageSize);
  std::string token;
  int index = -1;
  absl::Status status = client.EachTrialPage(request, [&](v1::ListTrialsResponse& page) {
    for (int i = 0; i < page.trials_size(); ++i) {
      if (page.trials(i).number() == number) {
        index = i;
        return false;
      }
    }
    token = page.next_page_token();
    return true;
  });
  if (!status.ok()) return Fail(res, status);
  if (index < 0) {
    return Fail(res, absl::NotFoundError(absl::StrCat("study ", study, " has no trial ", number)));
  }
  // Pages with curves are short (the scheduler's kMaxCurvePageSize, 100 trials): follow them
  // from the page that holds the trial up to it.
  request.set_page_token(token);
  request.set_page_size(index + 1);
  request.set_intermediate_values(true);
  v1::Trial trial;
  bool found = false;
  std::vector<v1::TrialCurve> curves;
  status = client.EachTrialPage(request, [&](v1::ListTrialsResponse& page) {
    for (const v1::Trial& t : page.trials()) {
      if (t.number() == number) {
        trial = t;
        found = true;
      }
    }
    for (const v1::TrialCurve& curve : page.curves()) {
      if (curve.number() == number) curves.push_back(curve);
    }
    return !found && page.trials_size() > 0 && page.trials(page.trials_size() - 1).number() < number;
  });
  if (!status.ok()) return Fail(res, status);
  if (!found) {
    return Fail(res, absl::UnavailableError("the study changed while the trial was looked up; reload"));
  }
  res.set_content(TrialJson(trial, curves), kJson);
}

void DashboardServer::State::Events(const httplib::Request& req, httplib::Response& res) {
  const std::string study = req.get_param_value("study");
  uint64_t after = 0;
  // EventSource sends the id of the last event it got when it reconnects: resume from there.
  const std::string last = req.get_header_value("Last-Event-ID");
  if (!last.empty() && !absl::SimpleAtoi(last, &after)) {
    return Fail(res, absl::InvalidArgumentError("Last-Event-ID: not an event id of this stream"));
  }
  {
    // A browser reconnecting over a kept-alive connection while the dashboard stops: a whole,
    // empty stream (it reconnects a second later, to whichever dashboard then listens), not
    // one cut off when the process exits.
    absl::MutexLock lock(&mutex);
    if (stopping) {
      res.set_header("Connection", "close");
      res.set_content("retry: 1000\n\n", "text/event-stream");
      return;
    }
  }
  absl::StatusOr<std::list<StreamSlot>::iterator> slot;
  {
    absl::MutexLock lock(&mutex);
    slot = TakeStreamSlotLocked(ClientGroup(req.remote_addr));
  }
  if (!slot.ok()) return Fail(res, slot.status());
  res.set_header("X-Accel-Buffering", "no");  // A proxy in front must not hold events back.
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, study, after, slot = *slot](size_t, httplib::DataSink& sink) {
        auto stream = std::make_unique<EventStream>(options, study, after);
        std::list<EventStream*>::iterator it;
        {
          absl::MutexLock lock(&mutex);
          if (stopping || slot->evicted) stream->Cancel();
          slot->running = stream.get();
          it = open_streams.insert(open_streams.end(), stream.get());
        }
        stream->Run(sink);
        // The answer's end is written before Stop may close the sockets (it waits for this).
        sink.done();
        {
          absl::MutexLock lock(&mutex);
          open_streams.erase(it);
          slot->running = nullptr;
        }
        stream.reset();  // Ends its watch (if still on) and joins its thread.
        return true;
      },
      [this, slot = *slot](bool) {
        absl::MutexLock lock(&mutex);
        stream_slots.erase(slot);
      });
}

// One address may hold its share of the live pages (--per_address_share of
// --max_event_streams). When they are all taken, the client holding the most gives up its
// oldest to one holding fewer, so that pages which are opened and never read, from one
// address or a few, cannot keep everyone else's pages from updating (hostile review: 32
// streams from one address held every live page for as long as they stayed open).
absl::StatusOr<std::list<DashboardServer::State::StreamSlot>::iterator>
DashboardServer::State::TakeStreamSlotLocked(const std::string& client) {
  std::map<std::string, int> held;
  int live = 0;
  for (const StreamSlot& slot : stream_slots) {
    if (slot.evicted) continue;
    ++held[slot.client];
    ++live;
  }
  const int mine = held[client];
  if (mine >= options.max_event_streams_per_client) {
    return absl::UnavailableError(absl::StrCat(
        "your address already holds ", mine, " live pages of the dashboard (its share of "
        "--max_event_streams); close one and try again"));
  }
  if (live >= options.max_event_streams) {
    auto most = std::max_element(held.begin(), held.end(), [](const auto& a, const auto& b) {
      return a.second < b.second;
    });
    if (most->second <= mine + 1) {
      return absl::UnavailableError(absl::StrCat(
          "the dashboard already serves ", options.max_event_streams,
          " live pages (--max_event_streams); close one or try again later"));
    }
    for (StreamSlot& slot : stream_slots) {
      if (slot.client != most->first || slot.evicted) continue;
      slot.evicted = true;
      if (slot.running != nullptr) slot.running->Cancel();
      break;
    }
  }
  return stream_slots.insert(stream_slots.end(), StreamSlot{client});
}

absl::StatusOr<std::unique_ptr<DashboardServer>> DashboardServer::Start(
    const DashboardOptions& options, const std::string& host, int port) {
  auto state = std::make_unique<State>(options);
  state->Routes();
  if (port == 0) {
    state->port = state->server.bind_to_any_port(host);
  } else if (state->server.bind_to_port(host, port)) {
    state->port = port;
  } else {
    state->port = -1;
  }
  if (state->port < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port,
                                               " (in use, or not an address of this machine)"));
  }
  state->server.WidenBacklog();
  State* raw = state.get();
  state->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  state->warm_up = std::thread([raw] { raw->WarmUp(); });
  return std::unique_ptr<DashboardServer>(new DashboardServer(std::move(state)));
}

DashboardServer::DashboardServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

DashboardServer::~DashboardServer() { Stop(); }

int DashboardServer::port() const { return state_->port; }

void DashboardServer::Stop() {
  {
    absl::MutexLock lock(&state_->mutex);
    state_->stopping = true;
    for (EventStream* stream : state_->open_streams) stream->Cancel();
    // Each stream ends its answer properly before the sockets close, so a browser sees a
    // stream that ended (and reconnects quietly), not a broken one.
    state_->mutex.AwaitWithTimeout(
        absl::Condition(
            +[](std::list<EventStream*>* streams) { return streams->empty(); },
            &state_->open_streams),
        kStopGrace);
  }
  state_->server.stop();
  if (state_->thread.joinable()) state_->thread.join();
  if (state_->warm_up.joinable()) state_->warm_up.join();
}

}  // namespace dhpt::dashboard
