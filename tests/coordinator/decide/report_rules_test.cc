#include "coordinator/decide/report_rules.h"

#include <gtest/gtest.h>

namespace shardline {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(ReportRulesTest, TheStepRateMovesOnlyOnWindowsOfASecondOrMore) {
  StepRate rate = StartStepRate(0, kT0);
  EXPECT_EQ(rate.per_second, 0);
  rate = NextStepRate(rate, 30, kT0 + absl::Milliseconds(500));  // a burst: no window closed yet
  EXPECT_EQ(rate.per_second, 0);
  EXPECT_EQ(rate.window_steps, 0);
  rate = NextStepRate(rate, 40, kT0 + absl::Seconds(2));
  EXPECT_DOUBLE_EQ(rate.per_second, 20.0);
  EXPECT_EQ(rate.window_steps, 40);
  EXPECT_EQ(rate.window_start, kT0 + absl::Seconds(2));
  rate = NextStepRate(rate, 50, kT0 + absl::Seconds(2.5));
  EXPECT_DOUBLE_EQ(rate.per_second, 20.0) << "kept until the next window closes";
  rate = NextStepRate(rate, 60, kT0 + absl::Seconds(6));
  EXPECT_DOUBLE_EQ(rate.per_second, 5.0);
}

metrics::MetricRecord Record(metrics::MetricRecord::Split split, int64_t step, double loss, double accuracy) {
  metrics::MetricRecord r;
  r.set_split(split);
  r.set_step(step);
  r.set_loss(loss);
  r.set_accuracy(accuracy);
  return r;
}

TEST(ReportRulesTest, TheBestEvalFollowsTheCheckpointPolicy) {
  google::protobuf::RepeatedPtrField<metrics::MetricRecord> records;
  *records.Add() = Record(metrics::MetricRecord::train, 10, 2.0, 0);
  *records.Add() = Record(metrics::MetricRecord::eval, 10, 1.5, 0.60);
  *records.Add() = Record(metrics::MetricRecord::eval, 20, 1.0, 0.55);  // lower loss, lower accuracy
  *records.Add() = Record(metrics::MetricRecord::train, 20, 1.8, 0);

  config::CheckpointConfig by_accuracy;  // no metric set: accuracy, higher is better
  const EvalsSeen a = NoteEvals({}, records, by_accuracy);
  EXPECT_EQ(a.last_train.step(), 20);
  EXPECT_EQ(a.last_eval.step(), 20);
  EXPECT_EQ(a.best_eval.step(), 10);

  config::CheckpointConfig by_loss;
  by_loss.set_best_metric("loss");
  by_loss.set_best_mode(config::MIN);
  const EvalsSeen l = NoteEvals({}, records, by_loss);
  EXPECT_EQ(l.best_eval.step(), 20);

  // A later report's tie does not replace the best.
  google::protobuf::RepeatedPtrField<metrics::MetricRecord> tie;
  *tie.Add() = Record(metrics::MetricRecord::eval, 30, 1.0, 0.60);
  EXPECT_EQ(NoteEvals(a, tie, by_accuracy).best_eval.step(), 10);
  EXPECT_EQ(NoteEvals(a, tie, by_accuracy).last_eval.step(), 30);
}

TEST(ReportRulesTest, OnlyTheFirstReportOfTheSnapshotBeingRestoredBreaksTheWorld) {
  EXPECT_FALSE(JudgeBadSnapshot(1, 0, 200, {}).break_world) << "no bad snapshot reported";
  EXPECT_FALSE(JudgeBadSnapshot(1, 100, 200, {}).break_world) << "not the snapshot this world restores";
  EXPECT_FALSE(JudgeBadSnapshot(1, 200, 200, {200}).break_world) << "already judged";
  const BadSnapshotVerdict v = JudgeBadSnapshot(1, 200, 200, {100});
  EXPECT_TRUE(v.break_world);
  EXPECT_NE(v.why.find("step 200"), std::string::npos) << v.why;
  EXPECT_NE(v.why.find("rank 1"), std::string::npos) << v.why;
}

}  // namespace
}  // namespace shardline
