#include "common/metrics_exposer.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
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
