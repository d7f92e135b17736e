#include "coordinator/status_page.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "coordinator/metrics_history.h"
#include "common/status/status_report.h"

namespace shardline {
namespace {

coordinator::JobStatus TwoWorkers() {
  coordinator::JobStatus s;
  s.set_job_id("abc123");
  s.set_state(coordinator::JobStatus::RUNNING);
  s.set_generation(2);
  s.set_global_step(250);
  s.set_total_steps(1000);
  s.set_world_size(2);
  s.set_eta_seconds(75);
  s.set_last_checkpoint_step(200);
  s.set_last_checkpoint_unix_seconds(990);
  s.mutable_best_eval()->set_step(200);
  s.mutable_best_eval()->set_accuracy(0.875f);
  for (int r = 0; r < 2; ++r) {
    coordinator::WorkerStatus* w = s.add_workers();
    w->set_rank(r);
    w->set_address(r == 0 ? "10.0.0.1:5000" : "<b>evil</b>:1");
    w->set_alive(true);
    w->set_steps_done(250 + r);
    w->set_busy_seconds_per_step(r == 0 ? 0.001 : 0.002);
    w->set_straggler_score(r == 0 ? 1.0 : 0.5);
  }
  return s;
}

std::vector<metrics::MetricRecord> Curve(metrics::MetricRecord::Split split, int n) {
  std::vector<metrics::MetricRecord> out;
  for (int i = 1; i <= n; ++i) {
    metrics::MetricRecord r;
    r.set_step(i * 10);
    r.set_split(split);
    r.set_loss(1.0f / i);
    if (split == metrics::MetricRecord::eval) r.set_accuracy(0.5f + 0.01f * i);
    out.push_back(r);
  }
  return out;
}

TEST(StatusPageTest, HasARowPerWorkerBothCurvesAndNothingUnescaped) {
  const std::string html = StatusPageHtml(TwoWorkers(), Curve(metrics::MetricRecord::train, 5),
                                          Curve(metrics::MetricRecord::eval, 3), absl::FromUnixSeconds(1000));
  EXPECT_TRUE(absl::StrContains(html, "data-rank=\"0\""));
  EXPECT_TRUE(absl::StrContains(html, "data-rank=\"1\""));
  EXPECT_TRUE(absl::StrContains(html, "data-series=\"train-loss\""));
  EXPECT_TRUE(absl::StrContains(html, "data-series=\"eval-accuracy\""));
  EXPECT_TRUE(absl::StrContains(html, "&lt;b&gt;evil&lt;/b&gt;:1"));
  EXPECT_FALSE(absl::StrContains(html, "<b>evil"));
  EXPECT_TRUE(absl::StrContains(html, "class=\"slow\""));  // rank 1 at 0.5
  EXPECT_TRUE(absl::StrContains(html, "http-equiv=\"refresh\""));
  // Self-contained: nothing is fetched from elsewhere.
  EXPECT_FALSE(absl::StrContains(html, "<script"));
  EXPECT_FALSE(absl::StrContains(html, "http://"));
  EXPECT_FALSE(absl::StrContains(html, "https://"));
}

TEST(StatusPageTest, ChartPlotsEveryFinitePointInsideItsBox) {
  const std::string svg = LineChartSvg("x", "t", {{0, 1}, {10, 3}, {20, std::nan("")}, {30, 2}});
  const size_t at = svg.find("points=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string points = svg.substr(at + 8, svg.find('"', at + 8) - at - 8);
  int n = 0;
  for (char c : points) n += c == ',';
  EXPECT_EQ(n, 3);
  EXPECT_TRUE(absl::StrContains(LineChartSvg("x", "t", {}), "no data yet"));
}

TEST(StatusReportTest, NamesTheFactsAndEachWorker) {
  const std::string text = StatusReport(TwoWorkers(), absl::FromUnixSeconds(1000));
  EXPECT_TRUE(absl::StrContains(text, "job abc123  running  generation 2  step 250/1000 (25.0%)  ETA 1:15"));
  EXPECT_TRUE(absl::StrContains(text, "best eval: accuracy 0.8750"));
  EXPECT_TRUE(absl::StrContains(text, "last committed checkpoint: step 200, 10 s ago"));
  EXPECT_TRUE(absl::StrContains(text, "10.0.0.1:5000"));
  EXPECT_TRUE(absl::StrContains(text, "0.50"));
  EXPECT_FALSE(absl::StrContains(text, "checkpoints:")) << "no decision yet, no line";
  coordinator::JobStatus noted = TwoWorkers();
  noted.set_checkpoint_note("saving the checkpoint at step 600 failed on rank 1 (disk full); attempt 1 of 3");
  EXPECT_TRUE(absl::StrContains(StatusReport(noted, absl::FromUnixSeconds(1000)),
                                "checkpoints: saving the checkpoint at step 600 failed on rank 1"));
  EXPECT_TRUE(absl::StrContains(StatusPageHtml(noted, {}, {}, absl::FromUnixSeconds(1000)),
                                "id=\"checkpoint-note\">checkpoints: saving the checkpoint at step 600"));
  // Islands: the outer steps, in both views; none without them.
  EXPECT_FALSE(absl::StrContains(text, "outer steps"));
  coordinator::JobStatus islands = TwoWorkers();
  coordinator::OuterStepStatus* o = islands.mutable_outer();
  o->set_islands(2);
  o->set_outer_steps(12);
  o->set_step(240);
  o->set_divergence(0.0123);
  o->set_seconds(0.15);
  o->set_total_seconds(1.8);
  o->set_bytes_sent(123456);
  const std::string want =
      "islands: 2; 12 outer steps, the last at step 240: islands 0.0123 apart (pseudo-gradient RMS norm), 0.15 s "
      "(1.8 s in all), 123456 bytes sent across islands by rank 0";
  EXPECT_TRUE(absl::StrContains(StatusReport(islands, absl::FromUnixSeconds(1000)), want));
  EXPECT_TRUE(absl::StrContains(StatusPageHtml(islands, {}, {}, absl::FromUnixSeconds(1000)),
                                "id=\"outer-steps\">" + want));
  EXPECT_EQ(FormatEta(-1), "-");
  EXPECT_EQ(FormatEta(7509), "2:05:09");
}

TEST(MetricsHistoryTest, ThinsToItsBoundKeepingTheNewestAndLoadsAFile) {
  MetricsHistory history(10);
  for (const auto& r : Curve(metrics::MetricRecord::train, 101)) ASSERT_TRUE(history.Write(r).ok());
  const auto train = history.Train();
  EXPECT_LE(train.size(), 10u);
  EXPECT_GE(train.size(), 5u);
  EXPECT_EQ(train.back().step(), 1010);
  for (size_t i = 1; i < train.size(); ++i) EXPECT_LT(train[i - 1].step(), train[i].step());

  const std::string path = ::testing::TempDir() + "/history_metrics.jsonl";
  std::ofstream(path) << "{\"step\":10,\"split\":\"train\",\"loss\":0.5}\n"
                         "{\"step\":20,\"split\":\"eval\",\"loss\":0.4,\"accuracy\":0.8}\n";
  MetricsHistory loaded;
  ASSERT_TRUE(loaded.Load(Env::Default(), path).ok());
  ASSERT_EQ(loaded.Train().size(), 1u);
  ASSERT_EQ(loaded.Eval().size(), 1u);
  EXPECT_FLOAT_EQ(loaded.Eval()[0].accuracy(), 0.8f);
  EXPECT_TRUE(loaded.Load(Env::Default(), path + ".absent").ok());
}

}  // namespace
}  // namespace shardline
