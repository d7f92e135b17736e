// Losing an island (runtime.min_islands, docs/collectives.md "Losing an
// island"): a worker of a 4-worker job in 2 islands dies for good; after
// the replace timeout the other island goes on alone, restored from its
// in-memory snapshot, its outer steps on one island; its lost worker
// returns, the island is whole again, and the world grows back to two
// islands at the next committed checkpoint, the returning island sent the
// other's snapshot. Each part has the bits of a run resumed from the same
// step's checkpoint on disk in the world it changed to (the same schedule
// of island counts gives the same bits, from memory or disk).
#include <signal.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/env.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

constexpr int kSteps = 1500;

// An outer step every 20 steps, a checkpoint and an in-memory snapshot
// every 100 (every checkpoint kept: the references resume from them).
std::vector<std::string> Sets() {
  return {absl::StrCat("train.total_steps=", kSteps), "train.log_every=50", "train.eval_every=0",
          "checkpoint.every_steps=100", "checkpoint.keep_last=0", "checkpoint.memory_every_steps=100",
          "collective.diloco.inner_steps=20", "optimizer.adamw={}", "schedule.base_lr=0.003"};
}

std::vector<std::string> WithIslands(std::vector<std::string> argv) {
  argv.insert(argv.end(), {"--islands", "2"});
  return argv;
}

TEST(IslandsElasticTest, AnIslandThatLosesAWorkerIsLeftOutThenGrowsBackBitForBit) {
  std::vector<std::string> elastic = Sets();
  elastic.insert(elastic.end(), {"runtime.min_islands=1", "runtime.replace_timeout_seconds=2"});
  const std::string dir = FreshDir("islands_elastic");
  Subprocess job(WithIslands(LaunchArgv(dir, 4, elastic, /*max_restarts=*/0)));
  const std::string coord_log = dir + "/logs/coordinator.log";
  // Right after the commit of step 500, every worker held still for the
  // kill, so the newest snapshot the survivors hold is that step's, whose
  // checkpoint the reference resumes from (the next is 100 steps away).
  ASSERT_TRUE(WaitForText(coord_log, "committed checkpoint at step 500 ", absl::Seconds(180))) << job.Output();
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(SignalLaunchedWorker(dir, r, SIGSTOP));
  ASSERT_TRUE(SignalLaunchedWorker(dir, 3, SIGKILL));  // island 1
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(SignalLaunchedWorker(dir, r, SIGCONT));
  ASSERT_TRUE(WaitForText(coord_log, "the world changed size: 4 -> 2", absl::Seconds(60))) << job.Output();
  // The lost worker comes back, as a scheduler would bring it to its site.
  Subprocess back({BinPath("shardline-worker"), "--coordinator", ReadAll(dir + "/coordinator.address"), "--listen",
                   "127.0.0.1:0", "--rank", "3", "--island", "1", "--token_file", dir + "/token"});
  // Two islands again: `shardline status` shows their outer steps.
  ASSERT_TRUE(WaitForText(coord_log, "the world changed size: 2 -> 4", absl::Seconds(60))) << job.Output();
  std::string status;
  for (int i = 0; i < 100 && !absl::StrContains(status, "islands: 2; "); ++i) {
    Subprocess ask({BinPath("shardline"), "status", "--workdir", dir});
    ask.Wait(absl::Seconds(10));
    status = ask.Output();
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(absl::StrContains(status, "islands: 2; ")) << status;
  EXPECT_TRUE(absl::StrContains(status, "apart (pseudo-gradient RMS norm)")) << status;
  ASSERT_EQ(job.Wait(absl::Seconds(300)), 0) << job.Output();
  EXPECT_EQ(back.Wait(absl::Seconds(60)), 0) << back.Output();

  const std::string coord = ReadAll(coord_log);
  const int64_t shrunk_at = WorldChangeStep(coord, 4, 2);
  const int64_t grown_at = WorldChangeStep(coord, 2, 4);
  ASSERT_GT(shrunk_at, 0) << coord;
  ASSERT_GT(grown_at, shrunk_at) << coord;
  EXPECT_EQ(shrunk_at, 500);
  EXPECT_EQ(grown_at % 100, 0);
  EXPECT_TRUE(absl::StrContains(coord, "islands 2 -> 1): 1 of 4 workers not back")) << coord;
  EXPECT_TRUE(absl::StrContains(coord, "island 1 left out")) << coord;
  EXPECT_TRUE(absl::StrContains(coord, "islands 1 -> 2)")) << coord;
  // Both from memory: island 0's own snapshot (island 1's shards unread),
  // then island 0's sent to the returning island.
  EXPECT_TRUE(absl::StrContains(coord, absl::StrCat("restores step ", shrunk_at,
                                                    " from the workers' memory (resharded from a world of 4: ")))
      << coord;
  EXPECT_TRUE(absl::StrContains(coord, "shard 2 unread, shard 3 unread")) << coord;
  EXPECT_TRUE(absl::StrContains(coord, absl::StrCat("restores step ", grown_at,
                                                    " from the workers' memory (resharded from a world of 2: ")))
      << coord;
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/worker-0.log"), absl::StrCat("restored step ", shrunk_at, " from memory")));
  // While island 1 was out, island 0's workers were the world's ranks 0, 1.
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/worker-1.log"), "as rank 1 of 2")) << ReadAll(dir + "/logs/worker-1.log");
  // Both changes are in metrics.jsonl, with their islands.
  const std::vector<std::string> changes = SplitLines(dir + "/metrics.jsonl", "world");
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(JsonField(changes[0], "step"), shrunk_at);
  EXPECT_EQ(JsonField(changes[0], "islands"), 1);
  EXPECT_EQ(JsonField(changes[0], "previous_islands"), 2);
  EXPECT_EQ(JsonField(changes[1], "step"), grown_at);
  EXPECT_EQ(JsonField(changes[1], "islands"), 2);
  const std::vector<float> got = FinalState(dir, kSteps, 4);
  ASSERT_FALSE(got.empty());

  // One island of two from the 4-worker checkpoint of shrunk_at, compared
  // at its checkpoint of grown_at (collective.diloco on one island: what
  // the shrunk world ran; the same total_steps, so the same schedule).
  std::vector<std::string> alone = Sets();
  alone.insert(alone.end(), {"checkpoint.resume_from=" + dir, absl::StrCat("checkpoint.resume_step=", shrunk_at)});
  const std::string ref1 = FreshDir("islands_elastic_ref1");
  Subprocess one(LaunchArgv(ref1, 2, alone));
  ASSERT_EQ(one.Wait(absl::Seconds(300)), 0) << one.Output();
  EXPECT_TRUE(SameBits(FinalState(dir, grown_at, 2), FinalState(ref1, grown_at, 2)))
      << "the shrunk world's state at step " << grown_at << " differs from one island resumed from step " << shrunk_at;

  // Two islands from the elastic run's 2-worker checkpoint of grown_at:
  // the returning island restores the other's (the outer parameters; here
  // from disk, there from memory).
  std::vector<std::string> both = Sets();
  both.insert(both.end(), {"checkpoint.resume_from=" + dir, absl::StrCat("checkpoint.resume_step=", grown_at)});
  const std::string ref2 = FreshDir("islands_elastic_ref2");
  Subprocess two(WithIslands(LaunchArgv(ref2, 4, both)));
  ASSERT_EQ(two.Wait(absl::Seconds(300)), 0) << two.Output();
  EXPECT_TRUE(SameBits(got, FinalState(ref2, kSteps, 4)))
      << "the regrown world's final state differs from two islands resumed from step " << grown_at;
}

}  // namespace
}  // namespace shardline
