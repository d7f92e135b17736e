#include "common/observability/metrics_exposer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace shardline {

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(Env* env, const std::string& listen,
                                                                      std::shared_ptr<prometheus::Registry> registry,
                                                                      HealthCheck health) {
  HttpRoutes routes;
  routes["/metrics"] = [registry = std::move(registry)](const HttpRequest&) {
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = prometheus::TextSerializer().Serialize(registry->Collect());
    return r;
  };
  routes["/healthz"] = [health = std::move(health)](const HttpRequest&) {
    const Health h = health ? health() : Health{true, "serving"};
    HttpReply r;
    r.code = h.ok ? 200 : 503;
    r.body = h.ok ? absl::StrCat("ok: ", h.detail, "\n") : absl::StrCat(h.detail, "\n");
    return r;
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(env, listen, std::move(routes));
  if (!server.ok()) return server.status();
  return std::unique_ptr<MetricsExposer>(new MetricsExposer(*std::move(server)));
}

void MetricsExposer::AddPage(const std::string& path, const std::string& content_type,
                             std::function<std::string()> render) {
  server_->Handle(path, [content_type, render = std::move(render)](const HttpRequest&) {
    HttpReply r;
    r.content_type = content_type;
    r.body = render();
    return r;
  });
}

}  // namespace shardline
