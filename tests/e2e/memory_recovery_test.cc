// Recovery from peer memory (issue 15): a killed worker's replacement gets
// its shard from its neighbour's in-memory replica and the world resumes
// from the newest snapshot with no checkpoint read; when a shard's every
// holder is gone the world falls back to the last committed checkpoint.
// Either way the final state is bit for bit an uninterrupted run's.
#include <signal.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/env.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

// The step the coordinator's log says a world restored from memory (-1: none).
int64_t MemoryRestoreStep(const std::string& coord_log) {
  const std::string log = ReadAll(coord_log);
  const std::string mark = " restores step ";
  for (size_t at = log.find(mark); at != std::string::npos; at = log.find(mark, at + 1)) {
    const size_t end = log.find(' ', at + mark.size());
    if (log.compare(end, 25, " from the workers' memory") != 0) continue;
    int64_t step = 0;
    if (absl::SimpleAtoi(log.substr(at + mark.size(), end - at - mark.size()), &step)) return step;
  }
  return -1;
}

TEST(MemoryRecoveryTest, AKilledWorkerRestoresFromItsNeighboursMemoryWithNoCheckpointReadBitForBit) {
  // Disk checkpoints only at the end: anything before it can only come
  // from memory (a disk restore would start over at step 0).
  const std::vector<std::string> run = {"train.total_steps=2000", "train.log_every=100", "train.eval_every=0",
                                        "checkpoint.every_steps=0", "checkpoint.memory_every_steps=100"};
  const std::string clean = FreshDir("mem_clean");
  Subprocess a(LaunchArgv(clean, 2, run));
  ASSERT_EQ(a.Wait(absl::Seconds(120)), 0) << a.Output();
  const std::vector<float> want = FinalState(clean, 2000, 2);
  ASSERT_FALSE(want.empty());

  const std::string dir = FreshDir("mem_killed");
  Subprocess b(LaunchArgv(dir, 2, run, /*max_restarts=*/2));
  ASSERT_TRUE(WaitForStep(dir, 700, absl::Seconds(120))) << b.Output();
  const int64_t killed_after = LoggedStep(dir);
  ASSERT_TRUE(SignalLaunchedWorker(dir, 1, SIGKILL));
  ASSERT_EQ(b.Wait(absl::Seconds(180)), 0) << b.Output();

  const int64_t restored = MemoryRestoreStep(dir + "/logs/coordinator.log");
  EXPECT_GE(restored, killed_after - 100) << ReadAll(dir + "/logs/coordinator.log");
  EXPECT_EQ(restored % 100, 0);
  for (int r = 0; r < 2; ++r) {
    const std::string log = ReadAll(absl::StrCat(dir, "/logs/worker-", r, ".log"));
    EXPECT_FALSE(absl::StrContains(log, " from " + dir + "/checkpoints")) << "rank " << r << " read a checkpoint";
  }
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/worker-0.log"),
                                absl::StrCat("restored step ", restored, " from memory")));
  // At most one snapshot interval is redone (as the coordinator saw the
  // furthest step: up to a heartbeat behind).
  const std::string coord = ReadAll(dir + "/logs/coordinator.log");
  const size_t at = coord.find("generation 2 redoes ");
  if (at != std::string::npos) {
    int64_t redone = -1;
    const size_t from = at + std::string("generation 2 redoes ").size();
    ASSERT_TRUE(absl::SimpleAtoi(coord.substr(from, coord.find(' ', from) - from), &redone)) << coord;
    EXPECT_LE(redone, 100) << coord;
  }
  EXPECT_TRUE(SameBits(FinalState(dir, 2000, 2), want))
      << "parameters and optimizer state after a memory recovery differ from the uninterrupted run";
}

TEST(MemoryRecoveryTest, TwoNeighboursLostFallBackToDiskAndStillEndBitForBit) {
  // Three ranks, two copies: shard 1 lives on ranks 1 and 2 only.
  const std::vector<std::string> run = {"train.total_steps=1600", "train.log_every=100", "train.eval_every=0",
                                        "checkpoint.every_steps=400", "checkpoint.memory_every_steps=100"};
  const std::string clean = FreshDir("mem_clean3");
  Subprocess a(LaunchArgv(clean, 3, run));
  ASSERT_EQ(a.Wait(absl::Seconds(180)), 0) << a.Output();
  const std::vector<float> want = FinalState(clean, 1600, 3);
  ASSERT_FALSE(want.empty());

  const std::string dir = FreshDir("mem_neighbours");
  Subprocess b(LaunchArgv(dir, 3, run, /*max_restarts=*/4));
  const std::string coord_log = dir + "/logs/coordinator.log";
  ASSERT_TRUE(WaitForText(coord_log, "committed checkpoint at step 400 ", absl::Seconds(120))) << b.Output();
  ASSERT_TRUE(WaitForStep(dir, 700, absl::Seconds(120))) << b.Output();
  const std::vector<pid_t> rank1 = LaunchedWorker(dir, 1), rank2 = LaunchedWorker(dir, 2);
  ASSERT_EQ(rank1.size(), 1u);
  ASSERT_EQ(rank2.size(), 1u);
  kill(rank1[0], SIGKILL);
  kill(rank2[0], SIGKILL);
  ASSERT_EQ(b.Wait(absl::Seconds(240)), 0) << b.Output();
  const std::string log = ReadAll(coord_log);
  EXPECT_TRUE(absl::StrContains(log, "restores step 400 from disk")) << log;
  EXPECT_EQ(MemoryRestoreStep(coord_log), -1) << log;
  EXPECT_TRUE(SameBits(FinalState(dir, 1600, 3), want))
      << "parameters and optimizer state after a disk fallback differ from the uninterrupted run";
}

}  // namespace
}  // namespace shardline
