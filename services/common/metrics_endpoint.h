#pragma once

// The /metrics endpoint every DHPT service serves (prometheus-cpp's exposer), and the standard
// process_* metrics Prometheus' own clients export: CPU seconds, resident and virtual memory,
// open and maximum file descriptors, start time.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/labels.h"

namespace dhpt {

class MetricsEndpoint {
 public:
  // Serves `collectables`, the process metrics and dhpt_build_info (always 1, labelled with
  // `build_labels` such as component, kind and node, and the version; the dashboards join
  // process metrics to a component or node through it) on http://HOST:PORT/metrics; port 0
  // takes a free port. UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& host, int port, prometheus::Labels build_labels,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);

  int port() const { return port_; }

 private:
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds and process_start_time_seconds, read from /proc at every
// scrape.
class ProcessCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace dhpt
