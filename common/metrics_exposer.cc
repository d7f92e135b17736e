#include "common/metrics_exposer.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace shardline {

MetricsExposer::MetricsExposer(std::unique_ptr<prometheus::Exposer> exposer, int port)
    : exposer_(std::move(exposer)), port_(port) {}

MetricsExposer::~MetricsExposer() = default;

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // Scrapes are rare and cheap, but a client that opens a connection and
    // never finishes its request holds a civetweb thread: a few threads, and
    // a request timeout that frees them, keep /metrics readable for
    // Prometheus meanwhile.
    exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen, "num_threads", std::to_string(kMetricsThreads), "request_timeout_ms",
        std::to_string(kMetricsRequestTimeoutMs)});
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, " (address in use or invalid): ", e.what()));
  }
  exposer->RegisterCollectable(registry);
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics exposer on ", listen, " has no port"));
  return std::unique_ptr<MetricsExposer>(new MetricsExposer(std::move(exposer), ports[0]));
}

}  // namespace shardline
