// Metrics against a real Prometheus (Debian's prometheus package): a short study with the
// scheduler and both kinds of worker, scraped every second; then every PromQL expression of
// every dashboard in charts/dhpt/dashboards must parse and return data, and `promtool check
// metrics` must find no problem in any service's /metrics.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "services/common/metrics_endpoint.h"
#include "services/scheduler/scheduler_metrics.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Struct;
using google::protobuf::Value;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

// A plain HTTP/1.0 GET on loopback; the body, or an error.
absl::StatusOr<std::string> HttpGet(int port, const std::string& target) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, " failed"));
  }
  const std::string request = absl::StrCat("GET ", target, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  write(fd, request.data(), request.size());
  std::string response;
  char buffer[8192];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) response.append(buffer, static_cast<size_t>(n));
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::UnavailableError("malformed HTTP response");
  }
  if (response.find(" 200 ") > response.find("\r\n")) {
    return absl::InternalError(absl::StrCat("HTTP error: ", response.substr(0, response.find("\r\n")),
                                            " ", response.substr(body + 4)));
  }
  return response.substr(body + 4);
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

Struct ParseJson(const std::string& json) {
  Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json.substr(0, 200);
  return parsed;
}

// Prometheus' instant query: the number of series it returns, or the error it gives.
absl::StatusOr<int> Query(int port, const std::string& promql) {
  absl::StatusOr<std::string> body = HttpGet(port, "/api/v1/query?query=" + UrlEncode(promql));
  if (!body.ok()) return body.status();
  const Struct response = ParseJson(*body);
  if (response.fields().at("status").string_value() != "success") {
    return absl::InvalidArgumentError(*body);
  }
  return response.fields().at("data").struct_value().fields().at("result").list_value().values_size();
}

// What Grafana would put in place of the dashboards' variables ("All" for study and node).
std::string Substitute(const std::string& expr) {
  return absl::StrReplaceAll(expr, {{"$__rate_interval", "30s"}, {"$__range", "5m"},
                                    {"$study", ".*"}, {"$node", ".*"}});
}

v1::StudySpec TextSpec(const std::string& text) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec));
  return spec;
}

TEST(MetricsTest, EveryDashboardQueryReturnsDataFromARealPrometheus) {
  ASSERT_TRUE(fs::exists("/usr/bin/prometheus") && fs::exists("/usr/bin/promtool"))
      << "Debian's prometheus package is needed (scripts/install-deps.sh installs it)";
  scheduler::SchedulerMetrics metrics;
  TestCluster cluster(/*workers=*/0, /*slots=*/1, &metrics);
  auto endpoint = MetricsEndpoint::Start(
      "127.0.0.1", 0, {{"component", "scheduler"}},
      {metrics.registry(), std::make_shared<scheduler::SchedulerStateCollector>(&cluster.core())});
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int scheduler_port = (*endpoint)->port();
  const int cpu_port = FreePort(), gpu_port = FreePort(), prometheus_port = FreePort();
  cluster.SpawnWorkerProcess("cpu-1", 1, "dhpt-cpu-worker",
                             {absl::StrCat("--metrics-port=", cpu_port), "--node_name=node-a"});
  cluster.SpawnWorkerProcess("gpu-1", 1, "dhpt-gpu-worker",
                             {absl::StrCat("--metrics-port=", gpu_port), "--node_name=node-b"});

  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("prometheus-", getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "prometheus.yml") << absl::StrCat(R"(global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: dhpt-scheduler
    static_configs: [{targets: ["127.0.0.1:)", scheduler_port, R"("]}]
  - job_name: dhpt-workers
    static_configs: [{targets: ["127.0.0.1:)", cpu_port, R"(", "127.0.0.1:)", gpu_port, R"("]}]
)");
  const std::unique_ptr<cli::ChildProcess> prometheus = StartProcess(
      {"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir / "data").string(),
       absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port), "--log.level=warn"});
  ASSERT_TRUE(WaitFor([&] { return HttpGet(prometheus_port, "/-/ready").ok(); }, absl::Seconds(60)));
  ASSERT_TRUE(WaitFor([&] { return cluster.core().connected_workers() == 2; }));

  ASSERT_TRUE(cluster.client().CreateStudy(TextSpec(R"pb(
    name: "branin-tpe" model { kind: FUNCTION function: "branin" }
    algorithm { name: TPE seed: 1 }
    parameters { name: "x1" double_range { min: -5 max: 10 } }
    parameters { name: "x2" double_range { min: 0 max: 15 } }
    max_trials: 40)pb")).ok());
  ASSERT_TRUE(cluster.client().CreateStudy(TextSpec(R"pb(
    name: "sensors-ae" model { kind: AUTOENCODER fixed { key: "epochs" value { number_value: 2 } } }
    dataset { sensors { samples: 400 } }
    parameters { name: "bottleneck" int_range { min: 3 max: 6 } }
    max_trials: 3 allow_cpu_fallback: true)pb")).ok());
  // Pruned trials and their steps saved, for the early-stopping panels: learning rates down
  // to 1e-4 make some trials hopeless from their first report.
  ASSERT_TRUE(cluster.client().CreateStudy(TextSpec(R"pb(
    name: "xgb-pruned"
    model { kind: XGBOOST fixed { key: "num_boost_round" value { number_value: 300 } } }
    dataset { friedman1 { samples: 1000 features: 10 noise: 1 } }
    objective { metric: "r2" goal: MAXIMIZE }
    algorithm { name: RANDOM seed: 5 }
    parameters { name: "eta" double_range { min: 0.0001 max: 0.3 log: true } }
    early_stopping { median { n_startup_trials: 1 } }
    max_trials: 8 parallel_trials: 1)pb")).ok());
  // The multi-objective panels: a front and its hypervolume.
  ASSERT_TRUE(cluster.client().CreateStudy(TextSpec(R"pb(
    name: "zdt1-nsga2" model { kind: FUNCTION function: "zdt1" }
    algorithm { name: NSGA2 seed: 2 nsga2 { population_size: 6 } }
    parameters { name: "x1" double_range { min: 0 max: 1 } }
    parameters { name: "x2" double_range { min: 0 max: 1 } }
    max_trials: 20)pb")).ok());
  EXPECT_EQ(cluster.WaitForEnd("branin-tpe").trials_completed(), 40);
  EXPECT_GT(cluster.WaitForEnd("zdt1-nsga2").pareto_front_size(), 0);
  EXPECT_EQ(cluster.WaitForEnd("sensors-ae").trials_completed(), 3);
  EXPECT_GE(cluster.WaitForEnd("xgb-pruned").trials_pruned(), 1);
  // Two more scrapes of every target once the last trial is seen, so that every rate() has two
  // samples after it: each target has two samples in a window that starts after that moment.
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<int> series = Query(prometheus_port, R"(dhpt_study_trials{study="sensors-ae", state="completed"} == 3)");
    return series.ok() && *series == 1;
  }));
  const absl::Time last_trial_seen = absl::Now();
  ASSERT_TRUE(WaitFor([&] {
    const int64_t window_ms = absl::ToInt64Milliseconds(absl::Now() - last_trial_seen);
    absl::StatusOr<int> scraped_twice = Query(
        prometheus_port, absl::StrCat("count(count_over_time(up[", window_ms, "ms]) >= 2) == 3"));
    return window_ms > 0 && scraped_twice.ok() && *scraped_twice == 1;
  }, absl::Seconds(30)));
  absl::StatusOr<int> up = Query(prometheus_port, "up == 1");
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(*up, 3) << "every target scraped";

  const absl::StatusOr<int> gpu_series = Query(prometheus_port, "dhpt_worker_gpu_utilization_ratio");
  ASSERT_TRUE(gpu_series.ok());
  int expressions = 0;
  for (const auto& file : fs::directory_iterator(fs::path(DHPT_SOURCE_DIR) / "charts/dhpt/dashboards")) {
    std::ifstream in(file.path());
    const Struct dashboard =
        ParseJson(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    const std::string name = file.path().filename().string();
    EXPECT_FALSE(dashboard.fields().contains("__inputs")) << name;
    EXPECT_THAT(dashboard.fields().at("uid").string_value(), ::testing::StartsWith("dhpt-")) << name;
    bool has_datasource_variable = false;
    for (const Value& variable : dashboard.fields().at("templating").struct_value().fields().at("list").list_value().values()) {
      const auto& fields = variable.struct_value().fields();
      if (fields.at("type").string_value() == "datasource") has_datasource_variable = true;
      if (fields.at("type").string_value() != "query") continue;
      // label_values(METRIC, LABEL), as Grafana's Prometheus data source runs it.
      const std::string query = fields.at("definition").string_value();
      const size_t comma = query.find(',');
      const std::string metric = query.substr(13, comma - 13);
      const std::string label(absl::StripAsciiWhitespace(query.substr(comma + 1, query.size() - comma - 2)));
      absl::StatusOr<int> values = Query(prometheus_port, absl::StrCat("count by (", label, ") (", metric, ")"));
      ASSERT_TRUE(values.ok()) << name << " " << query << ": " << values.status();
      EXPECT_GT(*values, 0) << name << " variable " << query;
    }
    EXPECT_TRUE(has_datasource_variable) << name;
    for (const Value& panel : dashboard.fields().at("panels").list_value().values()) {
      const std::string title = panel.struct_value().fields().at("title").string_value();
      EXPECT_EQ(panel.struct_value().fields().at("datasource").struct_value().fields().at("uid").string_value(),
                "${datasource}") << name << ": " << title;
      for (const Value& target : panel.struct_value().fields().at("targets").list_value().values()) {
        const std::string expr = Substitute(target.struct_value().fields().at("expr").string_value());
        absl::StatusOr<int> series = Query(prometheus_port, expr);
        ++expressions;
        ASSERT_TRUE(series.ok()) << name << ": " << title << ": " << series.status();
        // GPU panels have data only where a GPU is observed ("absent, not zero").
        if (expr.find("dhpt_worker_gpu_") != std::string::npos && *gpu_series == 0) continue;
        EXPECT_GT(*series, 0) << name << ": " << title << ": no data for " << expr;
      }
    }
  }
  EXPECT_GE(expressions, 20);

  // promtool's lint of each service's exposition.
  for (int port : {scheduler_port, cpu_port, gpu_port}) {
    absl::StatusOr<std::string> exposition = HttpGet(port, "/metrics");
    ASSERT_TRUE(exposition.ok()) << port;
    const fs::path file = dir / absl::StrCat("metrics-", port, ".txt");
    std::ofstream(file) << *exposition;
    auto [code, output] = RunCommandLine(absl::StrCat("/usr/bin/promtool check metrics < ", file.string()));
    EXPECT_EQ(code, 0) << output;
    EXPECT_EQ(output, "") << "promtool on port " << port;
    EXPECT_THAT(*exposition, ::testing::HasSubstr("process_resident_memory_bytes"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dhpt::testing
