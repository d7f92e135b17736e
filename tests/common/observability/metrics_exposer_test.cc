#include "common/observability/metrics_exposer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>

#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "tests/util/http.h"

namespace shardline {
namespace {

TEST(MetricsExposerTest, ServesTheRegistryAndReflectsUpdates) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& family = prometheus::BuildCounter().Name("shardline_test_events_total").Help("events").Register(*registry);
  prometheus::Counter& counter = family.Add({});
  auto exposer = MetricsExposer::Start(Env::Default(), "127.0.0.1:0", registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  ASSERT_GT((*exposer)->port(), 0);

  counter.Increment(3);
  absl::StatusOr<std::string> body = HttpGet((*exposer)->port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_TRUE(absl::StrContains(*body, "shardline_test_events_total 3")) << *body;

  counter.Increment(2);
  body = HttpGet((*exposer)->port(), "/metrics");
  ASSERT_TRUE(body.ok());
  EXPECT_TRUE(absl::StrContains(*body, "shardline_test_events_total 5")) << *body;
}

TEST(MetricsExposerTest, HealthzAnswersWhatTheCheckSays) {
  std::atomic<bool> ok{false};
  auto exposer = MetricsExposer::Start(Env::Default(), "127.0.0.1:0", std::make_shared<prometheus::Registry>(), [&ok] {
    return ok.load() ? Health{true, "training"} : Health{false, "registering"};
  });
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  absl::StatusOr<HttpResponse> r = HttpFetch((*exposer)->port(), "/healthz");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 503);
  EXPECT_EQ(r->body, "registering\n");
  ok = true;
  r = HttpFetch((*exposer)->port(), "/healthz");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->body, "ok: training\n");

  auto plain = MetricsExposer::Start(Env::Default(), "127.0.0.1:0", std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(plain.ok()) << plain.status();
  r = HttpFetch((*plain)->port(), "/healthz");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
}

TEST(MetricsExposerTest, ThreeHundredStuckClientsDoNotBlockScrapes) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("shardline_test_events_total").Help("events").Register(*registry).Add({});
  auto exposer = MetricsExposer::Start(Env::Default(), "127.0.0.1:0", registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  // With civetweb's 4 threads, 300 of these timed every scrape out for 60 s.
  std::vector<int> held;
  for (int i = 0; i < 300; ++i) held.push_back(HoldUnfinishedHttpRequest((*exposer)->port()));
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<std::string> body = HttpGet((*exposer)->port(), "/metrics");
    ASSERT_TRUE(body.ok()) << "scrape " << i << ": " << body.status();
    EXPECT_TRUE(absl::StrContains(*body, "shardline_test_events_total 0")) << *body;
  }
  for (int fd : held) close(fd);
}

TEST(MetricsExposerTest, EveryRequestGetsAStatusCodeAndServingGoesOn) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto exposer = MetricsExposer::Start(Env::Default(), "127.0.0.1:0", registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  (*exposer)->AddPage("/status", "text/html; charset=utf-8", [] { return std::string("<p>ok</p>"); });
  for (const auto& [name, request] : HostileHttpRequests()) {
    absl::StatusOr<HttpResponse> r = HttpExchange((*exposer)->port(), request);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_GE(r->code, 200) << name;
    EXPECT_LT(r->code, 600) << name;
    if (name == "browser favicon") {
      EXPECT_EQ(r->code, 404);
    }
    if (name == "POST /metrics") {
      EXPECT_EQ(r->code, 405);
    }
    if (name == "TLS ClientHello" || name == "HTTP/0.9") {
      EXPECT_EQ(r->code, 400);
    }
    if (name == "64 KiB header") {
      EXPECT_EQ(r->code, 431);
    }
    if (name == "Prometheus scrape") {
      EXPECT_EQ(r->code, 200);
    }
    absl::StatusOr<std::string> page = HttpGet((*exposer)->port(), "/status");
    ASSERT_TRUE(page.ok()) << "after " << name << ": " << page.status();
    EXPECT_EQ(*page, "<p>ok</p>");
  }
  absl::StatusOr<HttpResponse> head = HttpExchange((*exposer)->port(), "HEAD /healthz HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->code, 200);
  EXPECT_TRUE(head->body.empty()) << head->body;
}

TEST(MetricsExposerTest, PortInUseIsAClearError) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto first = MetricsExposer::Start(Env::Default(), "127.0.0.1:0", registry);
  ASSERT_TRUE(first.ok());
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MetricsExposer::Start(Env::Default(), taken, registry);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), taken)) << second.status();
}

}  // namespace
}  // namespace shardline
