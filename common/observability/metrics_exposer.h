// Serves a prometheus::Registry at http://<listen>/metrics and the process's
// health at /healthz, on an HttpServer (common/net/http_server.h).
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   ASSIGN_OR_RETURN(auto exposer, MetricsExposer::Start("127.0.0.1:0", registry,
//                                                        [&] { return Health{ready(), "training"}; }));
//   SLOG(INFO) << "metrics on port " << exposer->port();
//
// /healthz answers 200 "ok: <detail>" while the health check says ok and 503
// "<detail>" otherwise: what Kubernetes probes, load balancers and
// scripts (curl -f) read.
#ifndef SHARDLINE_COMMON_OBSERVABILITY_METRICS_EXPOSER_H_
#define SHARDLINE_COMMON_OBSERVABILITY_METRICS_EXPOSER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/net/http_server.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace shardline {

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
  // always ok ("serving"). Every other path is 404, every method but GET
  // and HEAD 405, a malformed request 400; clients that never finish
  // their requests do not delay anyone else's (HttpServerOptions).
  // `env` (the server's clock) must outlive the exposer.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(Env* env, const std::string& listen,
                                                               std::shared_ptr<prometheus::Registry> registry,
                                                               HealthCheck health = nullptr);
  ~MetricsExposer() = default;

  // The bound port.
  int port() const { return server_->port(); }

  // Serves GET `path` (exactly; e.g. "/status") with `render()`'s body as
  // `content_type`, 200. `render` runs on the serving thread for every
  // request: thread-safe, and quick.
  void AddPage(const std::string& path, const std::string& content_type, std::function<std::string()> render);

 private:
  explicit MetricsExposer(std::unique_ptr<HttpServer> server) : server_(std::move(server)) {}
  std::unique_ptr<HttpServer> server_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_OBSERVABILITY_METRICS_EXPOSER_H_
