// Serves a prometheus::Registry at http://<listen>/metrics and the process's
// health at /healthz, on one civetweb server, turning its exceptions into a
// Status.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   ASSIGN_OR_RETURN(auto exposer, MetricsExposer::Start("127.0.0.1:0", registry,
//                                                        [&] { return Health{ready(), "training"}; }));
//   SLOG(INFO) << "metrics on port " << exposer->port();
//
// /healthz answers 200 "ok: <detail>" while the health check says ok and 503
// "<detail>" otherwise: what Kubernetes probes, load balancers and
// scripts (curl -f) read.
#ifndef SHARDLINE_COMMON_METRICS_EXPOSER_H_
#define SHARDLINE_COMMON_METRICS_EXPOSER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

class CivetServer;
namespace prometheus {
class Registry;
}  // namespace prometheus

namespace shardline {

// Serving threads, and how long one waits for a client's request before
// dropping the connection: a client that never finishes its request delays
// scrapes only once kMetricsThreads of them are open, and then by at most
// the timeout.
inline constexpr int kMetricsThreads = 4;
inline constexpr int kMetricsRequestTimeoutMs = 2000;

struct Health {
  bool ok = true;
  std::string detail;  // what the process is doing, or why it is not ok
};
// Called on a serving thread for every /healthz request; must be thread-safe
// and quick.
using HealthCheck = std::function<Health()>;

class MetricsExposer {
 public:
  // Binds `listen` ("HOST:PORT"; port 0 picks a free one). An address in
  // use is kUnavailable naming the address. Without `health`, /healthz is
  // always ok ("serving").
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(const std::string& listen,
                                                               std::shared_ptr<prometheus::Registry> registry,
                                                               HealthCheck health = nullptr);
  ~MetricsExposer();

  // The bound port.
  int port() const { return port_; }

  // Serves GET `path` (exactly; e.g. "/status") with `render()`'s body as
  // `content_type`, 200. `render` runs on a serving thread for every
  // request: thread-safe, and quick. Call before handing the port out.
  void AddPage(const std::string& path, const std::string& content_type, std::function<std::string()> render);

 private:
  class MetricsHandler;
  class HealthHandler;
  class PageHandler;
  MetricsExposer() = default;
  // Declared first, destroyed last: the server stops before its handlers go.
  std::unique_ptr<MetricsHandler> metrics_;
  std::unique_ptr<HealthHandler> health_;
  std::vector<std::unique_ptr<PageHandler>> pages_;
  std::unique_ptr<CivetServer> server_;
  int port_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_METRICS_EXPOSER_H_
