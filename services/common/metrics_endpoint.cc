#include "services/common/metrics_endpoint.h"

#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace dhpt {
namespace {

prometheus::MetricFamily Single(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily family{name, help, type, {}};
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

// Fields of /proc/self/stat after the command name, which may contain spaces.
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> fields;
  const size_t end_of_name = text.rfind(')');
  if (end_of_name == std::string::npos) return fields;
  std::istringstream rest(text.substr(end_of_name + 2));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;  // fields[0] is the state (field 3 of proc(5)).
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double seconds = 0;
      in >> seconds;
      return seconds;
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& host, int port, prometheus::Labels build_labels,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  build_labels["version"] = DHPT_VERSION;
  auto endpoint = std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint());
  auto build_info = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge()
      .Name("dhpt_build_info")
      .Help("1 for every DHPT process, labelled with its component (and a worker's kind and node) and version.")
      .Register(*build_info)
      .Add(build_labels)
      .Set(1);
  collectables.push_back(build_info);
  collectables.push_back(std::make_shared<ProcessCollector>());
  endpoint->collectables_ = std::move(collectables);
  try {
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(absl::StrCat(host, ":", port), 1);
  } catch (const std::exception& error) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", host, ":", port, ": ", error.what()));
  }
  for (const auto& collectable : endpoint->collectables_) endpoint->exposer_->RegisterCollectable(collectable);
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  endpoint->port_ = ports.empty() ? port : ports.front();
  return endpoint;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  const std::vector<std::string> stat = StatFields();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // proc(5) numbering: utime 14, stime 15, starttime 22, vsize 23, rss 24; stat[0] is field 3.
  if (stat.size() > 21) {
    families.push_back(Single("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                              MetricType::Counter, (std::stod(stat[11]) + std::stod(stat[12])) / ticks));
    families.push_back(Single("process_start_time_seconds",
                              "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
                              BootTimeSeconds() + std::stod(stat[19]) / ticks));
    families.push_back(Single("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              MetricType::Gauge, std::stod(stat[20])));
    families.push_back(Single("process_resident_memory_bytes", "Resident memory size in bytes.",
                              MetricType::Gauge, std::stod(stat[21]) * page));
  }
  std::error_code error;
  double open = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++open;
  }
  families.push_back(Single("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, open));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    families.push_back(Single("process_max_fds", "Maximum number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return families;
}

}  // namespace dhpt
