// Faults an operator's bad day brings, each ending in bounded time with
// nothing committed lost (issue 12): a launcher killed outright, ...
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

// Waits (bounded) for each of `pids` - descendants this process reaps, as
// their subreaper - and returns how each ended: the signal that killed it,
// 0 for an exit, or -1 if it was still running at the deadline.
std::vector<int> ReapDescendants(const std::vector<pid_t>& pids, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<int> how(pids.size(), -1);
  size_t left = pids.size();
  while (left > 0 && absl::Now() < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (how[i] != -1) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        how[i] = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        --left;
      }
    }
    if (left > 0) absl::SleepFor(absl::Milliseconds(50));
  }
  return how;
}

const std::vector<std::string> kRun = {"train.total_steps=1200", "checkpoint.every_steps=200",
                                       "train.log_every=200", "train.eval_every=600"};

// Finding 7: `shardline launch` killed with SIGKILL used to leave its
// coordinator and workers running unsupervised.
TEST(LaunchFaultTest, KillingTheLauncherKillsItsChildrenAndLaunchingAgainResumes) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string dir = FreshDir("fault_launcher_killed");
  Subprocess first(LaunchArgv(dir, 2, kRun));
  const std::string coord_log = dir + "/logs/coordinator.log";
  ASSERT_TRUE(WaitForText(coord_log, "committed checkpoint at step 400 ", absl::Seconds(120))) << first.Output();
  std::vector<pid_t> children = LaunchedCoordinator(dir);
  for (int r = 0; r < 2; ++r) {
    for (pid_t p : LaunchedWorker(dir, r)) children.push_back(p);
  }
  ASSERT_EQ(children.size(), 3u);
  // Stopped, the children cannot die of anything but a signal sent to them
  // (a write into the dead launcher's log pipe would kill them with
  // SIGPIPE): only the launcher's death signal can end them. As their
  // subreaper this test reaps them and sees how they ended.
  for (pid_t p : children) kill(p, SIGSTOP);
  first.Signal(SIGKILL);
  EXPECT_EQ(first.Wait(absl::Seconds(10)), 128 + SIGKILL);
  const std::vector<int> how = ReapDescendants(children, absl::Seconds(10));
  for (size_t i = 0; i < children.size(); ++i) {
    EXPECT_EQ(how[i], SIGKILL) << "child " << children[i] << " (-1: still running after the launcher died)";
    if (how[i] == -1) {
      kill(children[i], SIGKILL);  // leave nothing behind either way
      waitpid(children[i], nullptr, 0);
    }
  }

  Subprocess again(LaunchArgv(dir, 2, kRun));
  ASSERT_EQ(again.Wait(absl::Seconds(120)), 0) << again.Output();
  const std::string worker_log = ReadAll(dir + "/logs/worker-0.log");
  EXPECT_TRUE(absl::StrContains(worker_log, "restored step")) << worker_log;
}

}  // namespace
}  // namespace shardline
