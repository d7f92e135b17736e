#include "common/metrics_exposer.h"

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
  auto exposer = MetricsExposer::Start("127.0.0.1:0", registry);
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
  auto exposer = MetricsExposer::Start("127.0.0.1:0", std::make_shared<prometheus::Registry>(), [&ok] {
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

  auto plain = MetricsExposer::Start("127.0.0.1:0", std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(plain.ok()) << plain.status();
  r = HttpFetch((*plain)->port(), "/healthz");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
}

// A client that opens a connection, starts a request and never finishes it.
int HoldUnfinishedRequest(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string partial = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";  // no blank line: unfinished
  EXPECT_EQ(write(fd, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  return fd;
}

TEST(MetricsExposerTest, StuckClientsDoNotBlockScrapes) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("shardline_test_events_total").Help("events").Register(*registry).Add({});
  auto exposer = MetricsExposer::Start("127.0.0.1:0", registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  // Fewer stuck clients than serving threads: scrapes go on at once.
  std::vector<int> held;
  for (int i = 0; i < kMetricsThreads - 1; ++i) held.push_back(HoldUnfinishedRequest((*exposer)->port()));
  absl::SleepFor(absl::Milliseconds(200));  // let the server take them on
  absl::StatusOr<std::string> body = HttpGet((*exposer)->port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_TRUE(absl::StrContains(*body, "shardline_test_events_total 0")) << *body;
  for (int fd : held) close(fd);
  held.clear();
  // As many as the threads: the request timeout frees one for the scrape
  // (HttpGet waits up to 5 s; one thread, with civetweb's 30 s default,
  // failed here).
  for (int i = 0; i < kMetricsThreads; ++i) held.push_back(HoldUnfinishedRequest((*exposer)->port()));
  absl::SleepFor(absl::Milliseconds(200));
  body = HttpGet((*exposer)->port(), "/metrics");
  EXPECT_TRUE(body.ok()) << body.status();
  for (int fd : held) close(fd);
}

TEST(MetricsExposerTest, PortInUseIsAClearError) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto first = MetricsExposer::Start("127.0.0.1:0", registry);
  ASSERT_TRUE(first.ok());
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MetricsExposer::Start(taken, registry);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), taken)) << second.status();
}

}  // namespace
}  // namespace shardline
