#include "coordinator/coordinator_metrics.h"

#include <memory>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace shardline {
namespace {

// The ranks that have a series in `family`, and their values.
std::map<std::string, double> RankSeries(prometheus::Registry& registry, const std::string& family) {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "rank") out[l.value] = m.gauge.value;
      }
    }
  }
  return out;
}

coordinator::JobStatus WithWorkers(std::initializer_list<std::pair<int, double>> ranks) {
  coordinator::JobStatus s;
  for (const auto& [rank, age] : ranks) {
    coordinator::WorkerStatus* w = s.add_workers();
    w->set_rank(rank);
    w->set_seconds_since_heartbeat(age);
  }
  return s;
}

TEST(CoordinatorMetricsTest, PerRankSeriesFollowTheWorldAndTheirValues) {
  prometheus::Registry registry;
  CoordinatorMetrics metrics(registry);
  const std::string age = "shardline_rank_heartbeat_age_seconds";
  metrics.Update(WithWorkers({{0, 0.1}, {1, 0.2}, {2, 0.3}}));
  EXPECT_EQ(RankSeries(registry, age), (std::map<std::string, double>{{"0", 0.1}, {"1", 0.2}, {"2", 0.3}}));
  metrics.Update(WithWorkers({{0, 0.5}, {1, 0.6}}));  // rank 2 left the world
  EXPECT_EQ(RankSeries(registry, age), (std::map<std::string, double>{{"0", 0.5}, {"1", 0.6}}));
  metrics.Update(WithWorkers({{0, 0.7}, {1, 0.8}, {2, 0.9}}));  // and came back
  EXPECT_EQ(RankSeries(registry, age), (std::map<std::string, double>{{"0", 0.7}, {"1", 0.8}, {"2", 0.9}}));
}

// shardline_numerics_info: the job's fingerprint, then each one RELAXED
// admitted, with its kernels and role; none before a worker reports one.
TEST(CoordinatorMetricsTest, TheNumericsInfoNamesTheJobsFingerprintAndEachAdmitted) {
  prometheus::Registry registry;
  CoordinatorMetrics metrics(registry);
  auto series = [&registry] {
    std::set<std::string> out;
    for (const prometheus::MetricFamily& f : registry.Collect()) {
      if (f.name != "shardline_numerics_info") continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        std::string labels;
        for (const prometheus::ClientMetric::Label& l : m.label) labels += l.name + "=" + l.value + ";";
        if (m.gauge.value == 1) out.insert(labels);
      }
    }
    return out;
  };
  coordinator::JobStatus s;
  metrics.Update(s);
  EXPECT_TRUE(series().empty());
  s.mutable_numerics()->mutable_numerics()->set_fingerprint(0xabc);
  s.mutable_numerics()->mutable_numerics()->set_kernels("OpenBLAS Haswell kernels");
  metrics.Update(s);
  EXPECT_EQ(series(), (std::set<std::string>{"fingerprint=0x0000000000000abc;kernels=OpenBLAS Haswell kernels;role=job;"}));
  coordinator::NumericsRecord* other = s.add_numerics_changes();
  other->mutable_numerics()->set_fingerprint(0xdef);
  other->mutable_numerics()->set_kernels("OpenBLAS Sandybridge kernels");
  metrics.Update(s);
  EXPECT_EQ(series(), (std::set<std::string>{"fingerprint=0x0000000000000abc;kernels=OpenBLAS Haswell kernels;role=job;",
                                             "fingerprint=0x0000000000000def;kernels=OpenBLAS Sandybridge kernels;"
                                             "role=admitted;"}));
}

}  // namespace
}  // namespace shardline
