#include "coordinator/decide/schedule.h"

#include <gtest/gtest.h>

namespace shardline {
namespace {

TEST(ScheduleTest, AStepAheadOfEveryWorkerByHalfASecondCappedAtTheEnd) {
  EXPECT_EQ(StepAhead(100, 0, 0), 102);        // no rate yet: 2 steps
  EXPECT_EQ(StepAhead(100, 3, 0), 102);        // ceil(1.5) = 2
  EXPECT_EQ(StepAhead(100, 1000, 0), 600);     // half a second of steps
  EXPECT_EQ(StepAhead(100, 1000, 400), 400);   // never past the last step
  EXPECT_EQ(StepAhead(399, 0, 400), 400);
}

TEST(ScheduleTest, APeriodicSaveIsDueOnceItsPeriodPassed) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(PeriodicSaveDue(t0 + absl::Seconds(59), t0, 60));
  EXPECT_TRUE(PeriodicSaveDue(t0 + absl::Seconds(60), t0, 60));
  EXPECT_FALSE(PeriodicSaveDue(t0 + absl::Hours(1), t0, 0));  // off
}

}  // namespace
}  // namespace shardline
