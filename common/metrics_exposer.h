// Serves a prometheus::Registry at http://<listen>/metrics (prometheus-cpp's
// civetweb exposer), turning its exceptions into a Status.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   ASSIGN_OR_RETURN(auto exposer, MetricsExposer::Start("127.0.0.1:0", registry));
//   SLOG(INFO) << "metrics on port " << exposer->port();
#ifndef SHARDLINE_COMMON_METRICS_EXPOSER_H_
#define SHARDLINE_COMMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace shardline {

// Serving threads, and how long one waits for a client's request before
// dropping the connection: a client that never finishes its request delays
// scrapes only once kMetricsThreads of them are open, and then by at most
// the timeout.
inline constexpr int kMetricsThreads = 4;
inline constexpr int kMetricsRequestTimeoutMs = 2000;

class MetricsExposer {
 public:
  // Binds `listen` ("HOST:PORT"; port 0 picks a free one). An address in
  // use is kUnavailable naming the address.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      const std::string& listen, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsExposer();

  // The bound port.
  int port() const { return port_; }

 private:
  MetricsExposer(std::unique_ptr<prometheus::Exposer> exposer, int port);
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_METRICS_EXPOSER_H_
