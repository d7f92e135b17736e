#include "coordinator/goodput.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace shardline {
namespace {

using coordinator::JobStatus;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/goodput_" + name;
  std::system(("rm -rf '" + dir + "'").c_str());
  return dir;
}

// A status of `state` in `generation`, the world at `step`, every worker's
// account `time`.
JobStatus Status(JobStatus::State state, uint64_t generation, int64_t step, coordinator::TimeAccount time = {},
                 int64_t losses = 0, int64_t start_step = 0) {
  JobStatus s;
  s.set_start_step(start_step);
  s.set_state(state);
  s.set_generation(generation);
  s.set_global_step(step);
  s.set_worker_losses(losses);
  for (int r = 0; r < 2; ++r) {
    coordinator::WorkerStatus* w = s.add_workers();
    w->set_rank(r);
    *w->mutable_time() = time;
  }
  return s;
}

double Bad(const coordinator::Goodput& g, const std::string& kind) { return g.badput_seconds().at(kind); }

TEST(GoodputTest, EverySecondGoesToExactlyOneKind) {
  auto store = JobStore::Open(Env::Default(), FreshDir("kinds"));
  ASSERT_TRUE(store.ok());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  auto ledger = GoodputLedger::Load(store->get(), t0);
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  GoodputLedger& l = **ledger;
  l.Advance(Status(JobStatus::FORMING, 0, 0), t0 + absl::Seconds(2));             // startup 2
  l.Advance(Status(JobStatus::RUNNING, 1, 0), t0 + absl::Seconds(3));             // startup 1 (no step yet)
  coordinator::TimeAccount t;
  t.set_data_seconds(0.5);
  t.set_eval_seconds(1);
  l.Advance(Status(JobStatus::RUNNING, 1, 100, t), t0 + absl::Seconds(8));        // 1.5 reported, goodput 3.5
  l.Advance(Status(JobStatus::FORMING, 1, 100, t, /*losses=*/1), t0 + absl::Seconds(10));  // recovery 2
  coordinator::TimeAccount restored;
  restored.set_restore_seconds(0.25);
  // Restored from step 50: steps 51..100 are done again.
  l.Advance(Status(JobStatus::RUNNING, 2, 0, restored, 1, 50), t0 + absl::Seconds(11));   // restore .25, recovery .75
  l.Advance(Status(JobStatus::RUNNING, 2, 80, restored, 1, 50), t0 + absl::Seconds(13));  // 51..80 redone: wasted 2
  l.Advance(Status(JobStatus::RUNNING, 2, 150, restored, 1, 50), t0 + absl::Seconds(14)); // 81..100 of 81..150: 2/7 wasted
  l.Advance(Status(JobStatus::DONE, 2, 150, restored), t0 + absl::Seconds(20));    // nothing runs

  const coordinator::Goodput g = l.Snapshot();
  EXPECT_DOUBLE_EQ(Bad(g, "startup"), 3);
  EXPECT_DOUBLE_EQ(Bad(g, "data_loading"), 0.5);
  EXPECT_DOUBLE_EQ(Bad(g, "evaluation"), 1);
  EXPECT_DOUBLE_EQ(Bad(g, "recovery"), 2.75);
  EXPECT_DOUBLE_EQ(Bad(g, "checkpoint_restore"), 0.25);
  EXPECT_DOUBLE_EQ(Bad(g, "wasted_progress"), 2 + 2.0 / 7);
  EXPECT_DOUBLE_EQ(Bad(g, "checkpoint_save"), 0);
  EXPECT_DOUBLE_EQ(g.goodput_seconds(), 3.5 + 5.0 / 7);
  EXPECT_EQ(g.disruptions(), 1);
  EXPECT_EQ(g.high_water_step(), 150);
  EXPECT_NEAR(GoodputRatio(g), (3.5 + 5.0 / 7) / 14, 1e-12);  // 14 s accounted while the job was not over
}

TEST(GoodputTest, ReportsAheadOfTheClockAreNotCountedTwice) {
  auto store = JobStore::Open(Env::Default(), FreshDir("ahead"));
  ASSERT_TRUE(store.ok());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  auto l = GoodputLedger::Load(store->get(), t0);
  ASSERT_TRUE(l.ok());
  coordinator::TimeAccount t;
  t.set_eval_seconds(3);  // reported within one 1 s tick
  (*l)->Advance(Status(JobStatus::RUNNING, 1, 10, t), t0 + absl::Seconds(1));
  (*l)->Advance(Status(JobStatus::RUNNING, 1, 20, t), t0 + absl::Seconds(4));
  const coordinator::Goodput g = (*l)->Snapshot();
  EXPECT_DOUBLE_EQ(Bad(g, "evaluation"), 3);
  EXPECT_DOUBLE_EQ(g.goodput_seconds(), 1);  // 4 s in all
}

TEST(GoodputTest, ARestartedCoordinatorContinuesTheAccountAndCountsItsDowntime) {
  const std::string dir = FreshDir("restart");
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  {
    auto store = JobStore::Open(Env::Default(), dir);
    ASSERT_TRUE(store.ok());
    auto l = GoodputLedger::Load(store->get(), t0);
    ASSERT_TRUE(l.ok());
    (*l)->Advance(Status(JobStatus::RUNNING, 1, 50), t0 + absl::Seconds(10));
    ASSERT_TRUE((*l)->MaybePersist(t0 + absl::Seconds(10), /*force=*/true).ok());
  }
  auto store = JobStore::Open(Env::Default(), dir);
  ASSERT_TRUE(store.ok());
  auto l = GoodputLedger::Load(store->get(), t0 + absl::Seconds(17));  // down for 7 s
  ASSERT_TRUE(l.ok());
  const coordinator::Goodput g = (*l)->Snapshot();
  EXPECT_DOUBLE_EQ(g.goodput_seconds(), 10);
  EXPECT_DOUBLE_EQ(Bad(g, "recovery"), 7);
  EXPECT_EQ(g.disruptions(), 1);
  EXPECT_EQ(g.high_water_step(), 50);
  // The new coordinator's first world redoes nothing it counts as new.
  (*l)->Advance(Status(JobStatus::RUNNING, 2, 40), t0 + absl::Seconds(19));
  EXPECT_DOUBLE_EQ(Bad((*l)->Snapshot(), "wasted_progress"), 2);
}

TEST(GoodputTest, AWorldPausedPastEveryEarlierStepWastesNothing) {
  auto store = JobStore::Open(Env::Default(), FreshDir("paused"));
  ASSERT_TRUE(store.ok());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  auto l = GoodputLedger::Load(store->get(), t0);
  ASSERT_TRUE(l.ok());
  (*l)->Advance(Status(JobStatus::RUNNING, 1, 10), t0 + absl::Seconds(1));
  (*l)->Advance(Status(JobStatus::RUNNING, 1, 10), t0 + absl::Seconds(2));  // no step this tick: still first-time work
  (*l)->Advance(Status(JobStatus::RUNNING, 1, 20), t0 + absl::Seconds(3));
  const coordinator::Goodput g = (*l)->Snapshot();
  EXPECT_DOUBLE_EQ(Bad(g, "wasted_progress"), 0);
  EXPECT_DOUBLE_EQ(g.goodput_seconds(), 3);
}

TEST(GoodputTest, AnUnparsableAccountIsDataLoss) {
  auto store = JobStore::Open(Env::Default(), FreshDir("bad"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("goodput", "\xff\xff\xff", true).ok());
  auto l = GoodputLedger::Load(store->get(), absl::Now());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kDataLoss);
}

TEST(GoodputTest, LineNamesTheKindsWithTime) {
  coordinator::Goodput g;
  g.set_goodput_seconds(90);
  (*g.mutable_badput_seconds())["recovery"] = 10;
  g.set_disruptions(1);
  EXPECT_EQ(GoodputLine(g), "goodput 90.0% (90.0 s of first-time training); lost: recovery 10.0 s; 1 disruption");
}

}  // namespace
}  // namespace shardline
