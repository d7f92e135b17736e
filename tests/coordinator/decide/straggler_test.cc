#include "coordinator/decide/straggler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardline {
namespace {

coordinator::JobStatus World(std::vector<double> busy) {
  coordinator::JobStatus s;
  s.set_state(coordinator::JobStatus::RUNNING);
  s.set_generation(1);
  for (size_t r = 0; r < busy.size(); ++r) {
    coordinator::WorkerStatus* w = s.add_workers();
    w->set_rank(static_cast<int>(r));
    w->set_busy_seconds_per_step(busy[r]);
  }
  ScoreStragglers(s.mutable_workers());
  return s;
}

TEST(StragglerTest, ScoreIsTheFastestRanksBusyTimeOverEachRanks) {
  const coordinator::JobStatus s = World({0.010, 0.020, 0.0125, 0});
  EXPECT_DOUBLE_EQ(s.workers(0).straggler_score(), 1.0);
  EXPECT_DOUBLE_EQ(s.workers(1).straggler_score(), 0.5);
  EXPECT_DOUBLE_EQ(s.workers(2).straggler_score(), 0.8);
  EXPECT_DOUBLE_EQ(s.workers(3).straggler_score(), 0.0);  // not reported yet
}

TEST(StragglerTest, FlaggedOnlyAfterStayingBelowTheThresholdAndClearedWhenBack) {
  StragglerWatch watch(StragglerOptions{0.7, absl::Seconds(10)});
  const absl::Time t0 = absl::FromUnixSeconds(100);
  const coordinator::JobStatus slow = World({0.010, 0.020});
  watch.Observe(slow, t0);
  watch.Observe(slow, t0 + absl::Seconds(9));
  EXPECT_EQ(watch.flagged(), 0);
  watch.Observe(World({0.010, 0.011}), t0 + absl::Seconds(9.5));  // a dip back up restarts the clock
  watch.Observe(slow, t0 + absl::Seconds(10));
  watch.Observe(slow, t0 + absl::Seconds(19));
  EXPECT_EQ(watch.flagged(), 0);
  const std::vector<StragglerChange> flagged = watch.Observe(slow, t0 + absl::Seconds(20));
  EXPECT_EQ(watch.flagged(), 1);
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_EQ(flagged[0].rank, 1);
  EXPECT_TRUE(flagged[0].straggler);
  EXPECT_THAT(flagged[0].line, testing::HasSubstr("rank 1"));
  EXPECT_TRUE(watch.Observe(slow, t0 + absl::Seconds(25)).empty());  // said once, not at every tick
  const std::vector<StragglerChange> cleared = watch.Observe(World({0.010, 0.0105}), t0 + absl::Seconds(26));
  EXPECT_EQ(watch.flagged(), 0);
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_FALSE(cleared[0].straggler);
}

}  // namespace
}  // namespace shardline
