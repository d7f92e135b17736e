#include "common/metrics_exposer.h"

#include <exception>
#include <vector>

#include "CivetServer.h"
#include "absl/strings/str_cat.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace shardline {
namespace {

void Respond(mg_connection* conn, int code, const char* reason, const char* type, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
            "Connection: close\r\n\r\n",
            code, reason, type, body.size());
  mg_write(conn, body.data(), body.size());
}

}  // namespace

class MetricsExposer::MetricsHandler : public CivetHandler {
 public:
  explicit MetricsHandler(std::shared_ptr<prometheus::Registry> registry) : registry_(std::move(registry)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    const std::string body = prometheus::TextSerializer().Serialize(registry_->Collect());
    Respond(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
    return true;
  }

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
};

class MetricsExposer::HealthHandler : public CivetHandler {
 public:
  explicit HealthHandler(HealthCheck check) : check_(std::move(check)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    const Health h = check_ ? check_() : Health{true, "serving"};
    if (h.ok) {
      Respond(conn, 200, "OK", "text/plain; charset=utf-8", absl::StrCat("ok: ", h.detail, "\n"));
    } else {
      Respond(conn, 503, "Service Unavailable", "text/plain; charset=utf-8", absl::StrCat(h.detail, "\n"));
    }
    return true;
  }

 private:
  const HealthCheck check_;
};

class MetricsExposer::PageHandler : public CivetHandler {
 public:
  PageHandler(std::string path, std::string type, std::function<std::string()> render)
      : path_(std::move(path)), type_(std::move(type)), render_(std::move(render)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    // civetweb also hands us "<path>/anything": only the page itself is served.
    const mg_request_info* info = mg_get_request_info(conn);
    if (info == nullptr || info->local_uri == nullptr || path_ != info->local_uri) {
      Respond(conn, 404, "Not Found", "text/plain; charset=utf-8", "not found\n");
      return true;
    }
    Respond(conn, 200, "OK", type_.c_str(), render_());
    return true;
  }

 private:
  const std::string path_;
  const std::string type_;
  const std::function<std::string()> render_;
};

void MetricsExposer::AddPage(const std::string& path, const std::string& content_type,
                             std::function<std::string()> render) {
  pages_.push_back(std::make_unique<PageHandler>(path, content_type, std::move(render)));
  server_->addHandler(path, pages_.back().get());
}

MetricsExposer::~MetricsExposer() {
  if (server_ != nullptr) server_->close();
}

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(const std::string& listen,
                                                                      std::shared_ptr<prometheus::Registry> registry,
                                                                      HealthCheck health) {
  std::unique_ptr<MetricsExposer> e(new MetricsExposer());
  e->metrics_ = std::make_unique<MetricsHandler>(std::move(registry));
  e->health_ = std::make_unique<HealthHandler>(std::move(health));
  try {
    // Scrapes are rare and cheap, but a client that opens a connection and
    // never finishes its request holds a civetweb thread: a few threads, and
    // a request timeout that frees them, keep /metrics readable meanwhile.
    e->server_ = std::make_unique<CivetServer>(std::vector<std::string>{
        "listening_ports", listen, "num_threads", std::to_string(kMetricsThreads), "request_timeout_ms",
        std::to_string(kMetricsRequestTimeoutMs)});
  } catch (const std::exception& ex) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, " (address in use or invalid): ", ex.what()));
  }
  e->server_->addHandler("/metrics", e->metrics_.get());
  e->server_->addHandler("/healthz", e->health_.get());
  const std::vector<int> ports = e->server_->getListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics server on ", listen, " has no port"));
  e->port_ = ports[0];
  return e;
}

}  // namespace shardline
