// The launcher's decisions, driven by hand-made exits and times: no
// processes, no sleeps. The e2e tests (launch through real processes) cover
// the same rules end to end; these pin every branch.
#include "worker/launch/supervisor.h"

#include <signal.h>

#include "gtest/gtest.h"

namespace shardline {
namespace {

const absl::Time t0 = absl::FromUnixSeconds(1000);

ChildExit Exit(int code) {
  ChildExit e;
  e.ok = code == 0;
  e.own_error = code == 1;
  e.how = "exit code " + std::to_string(code);
  return e;
}

ChildExit Killed() {
  ChildExit e;
  e.signaled = true;
  e.how = "signal 9";
  return e;
}

SupervisorOptions Options(int workers, int max_restarts, int max_coordinator_restarts = 0, int min_workers = 0) {
  SupervisorOptions o;
  o.workers = workers;
  o.max_restarts = max_restarts;
  o.max_coordinator_restarts = max_coordinator_restarts;
  o.min_workers = min_workers;
  o.workdir = "/w";
  return o;
}

TEST(SupervisorTest, ExitOfReadsWaitStatuses) {
  EXPECT_TRUE(ExitOf(0).ok);
  EXPECT_TRUE(ExitOf(1 << 8).own_error);
  const ChildExit three = ExitOf(3 << 8);
  EXPECT_FALSE(three.ok || three.own_error || three.signaled);
  EXPECT_EQ(three.how, "exit code 3");
  const ChildExit nine = ExitOf(SIGKILL);
  EXPECT_TRUE(nine.signaled);
  EXPECT_EQ(nine.how, "signal 9");
}

TEST(SupervisorTest, DeadWorkersAreRestartedWithinTheBudgetThenTheJobFails) {
  Supervisor s(Options(2, 1));
  Actions a = s.OnWorkerExit(1, Killed(), t0);
  ASSERT_EQ(a.restart_workers, std::vector<int>{1});
  EXPECT_TRUE(s.outcome().ok());
  a = s.OnWorkerExit(0, Exit(3), t0);
  EXPECT_TRUE(a.restart_workers.empty());
  EXPECT_EQ(a.signal_coordinator, SIGTERM);
  EXPECT_TRUE(absl::IsInternal(s.outcome()));
  EXPECT_NE(s.outcome().message().find("worker 0 failed (exit code 3); no restarts left"), std::string::npos);
}

TEST(SupervisorTest, AWorkersOwnErrorIsNotRestarted) {
  Supervisor s(Options(2, 5));
  const Actions a = s.OnWorkerExit(1, Exit(1), t0);
  EXPECT_TRUE(a.restart_workers.empty());
  EXPECT_TRUE(absl::IsFailedPrecondition(s.outcome()));
  EXPECT_NE(s.outcome().message().find("/w/logs/"), std::string::npos);
}

TEST(SupervisorTest, AnElasticJobGoesOnWithoutAWorkerWhileEnoughRemain) {
  Supervisor s(Options(3, 0, 0, /*min_workers=*/2));
  Actions a = s.OnWorkerExit(2, Killed(), t0);
  EXPECT_TRUE(a.restart_workers.empty());
  EXPECT_TRUE(s.outcome().ok());
  EXPECT_EQ(s.workers_gone(), 1);
  a = s.OnWorkerExit(1, Killed(), t0);  // one left: below min_workers
  EXPECT_FALSE(s.outcome().ok());
  // The two that remain finishing is the end of the job, counting the gone.
}

// runtime.min_islands: 3 islands of 2 go on while 2 have lost no worker.
TEST(SupervisorTest, AJobOfIslandsGoesOnWhileEnoughIslandsAreWhole) {
  SupervisorOptions o = Options(6, 0);
  o.islands = 3;
  o.min_islands = 2;
  Supervisor s(o);
  Actions a = s.OnWorkerExit(1, Killed(), t0);
  EXPECT_TRUE(s.outcome().ok());
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("2 of 3 islands"), std::string::npos) << a.warnings[0];
  s.OnWorkerExit(0, Killed(), t0);  // the same island: still two whole
  EXPECT_TRUE(s.outcome().ok());
  EXPECT_EQ(s.workers_gone(), 2);
  s.OnWorkerExit(5, Killed(), t0);  // another island: one whole, below 2
  EXPECT_FALSE(s.outcome().ok());
}

TEST(SupervisorTest, EveryWorkerFinishedBoundsTheCoordinator) {
  Supervisor s(Options(2, 0, 0, 1));
  s.OnWorkerExit(1, Killed(), t0);  // gone (elastic)
  s.OnWorkerExit(0, Exit(0), t0);   // the only one counted: done
  EXPECT_EQ(s.OnTick(true, false, t0 + absl::Seconds(9)).signal_coordinator, 0);
  EXPECT_EQ(s.OnTick(true, false, t0 + absl::Seconds(11)).signal_coordinator, SIGTERM);
  EXPECT_EQ(s.OnTick(true, false, t0 + absl::Seconds(12)).signal_coordinator, 0);  // once
  EXPECT_EQ(s.OnTick(true, false, t0 + absl::Seconds(16)).signal_coordinator, SIGKILL);
  // A coordinator that then fails does not fail a finished job.
  const Actions a = s.OnCoordinatorExit(Killed(), t0 + absl::Seconds(16));
  EXPECT_FALSE(a.restart_coordinator);
  EXPECT_TRUE(s.outcome().ok());
}

TEST(SupervisorTest, AKilledCoordinatorIsRestartedWithinItsOwnBudget) {
  Supervisor s(Options(2, /*max_restarts=*/0, /*max_coordinator_restarts=*/1));
  Actions a = s.OnCoordinatorExit(Killed(), t0);
  EXPECT_TRUE(a.restart_coordinator);
  EXPECT_FALSE(a.coordinator_stop_requested);
  a = s.OnCoordinatorExit(Killed(), t0);
  EXPECT_FALSE(a.restart_coordinator);
  EXPECT_EQ(a.signal_workers, SIGTERM);
  EXPECT_NE(s.outcome().message().find("no coordinator restarts left"), std::string::npos);
  // A failed end: workers get 5 s, then are killed.
  EXPECT_EQ(s.OnTick(false, true, t0 + absl::Seconds(4)).signal_workers, 0);
  EXPECT_EQ(s.OnTick(false, true, t0 + absl::Seconds(6)).signal_workers, SIGKILL);
}

TEST(SupervisorTest, ACoordinatorRestartedDuringAGracefulStopIsToldSo) {
  Supervisor s(Options(1, 0, 1));
  EXPECT_EQ(s.OnSignal().signal_coordinator, SIGTERM);
  const Actions a = s.OnCoordinatorExit(Killed(), t0);
  EXPECT_TRUE(a.restart_coordinator);
  EXPECT_TRUE(a.coordinator_stop_requested);
}

TEST(SupervisorTest, ASecondSignalKillsEverything) {
  Supervisor s(Options(2, 0));
  s.OnSignal();
  const Actions a = s.OnSignal();
  EXPECT_EQ(a.signal_coordinator, SIGKILL);
  EXPECT_EQ(a.signal_workers, SIGKILL);
  EXPECT_TRUE(absl::IsAborted(s.outcome()));
}

TEST(SupervisorTest, WorkersThatOutstayACleanEndAreKilledWithoutFailingTheJob) {
  Supervisor s(Options(2, 3));
  s.OnCoordinatorExit(Exit(0), t0);
  EXPECT_EQ(s.OnTick(false, true, t0 + absl::Seconds(29)).signal_workers, 0);
  EXPECT_EQ(s.OnTick(false, true, t0 + absl::Seconds(31)).signal_workers, SIGKILL);
  const Actions a = s.OnWorkerExit(0, Killed(), t0 + absl::Seconds(31));
  EXPECT_TRUE(a.restart_workers.empty());  // not restarted, not a failure
  EXPECT_TRUE(s.outcome().ok());
}

TEST(SupervisorTest, NoWorkerIsRestartedAfterTheCoordinatorEnded) {
  Supervisor s(Options(2, 3));
  s.OnCoordinatorExit(Exit(0), t0);
  const Actions a = s.OnWorkerExit(1, Killed(), t0 + absl::Seconds(1));
  EXPECT_TRUE(a.restart_workers.empty());
  EXPECT_FALSE(s.outcome().ok());
}

TEST(SupervisorTest, AFailedJobIsKilledAfterItsGrace) {
  Supervisor s(Options(2, 0));
  s.OnWorkerExit(0, Exit(3), t0);
  EXPECT_EQ(s.OnTick(true, true, t0).signal_coordinator, 0);  // starts the 30 s
  EXPECT_EQ(s.OnTick(true, true, t0 + absl::Seconds(29)).signal_coordinator, 0);
  const Actions a = s.OnTick(true, true, t0 + absl::Seconds(31));
  EXPECT_EQ(a.signal_coordinator, SIGKILL);
  EXPECT_EQ(a.signal_workers, SIGKILL);
}

}  // namespace
}  // namespace shardline
