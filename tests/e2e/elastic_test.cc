// Elastic worlds (issue 15): a worker of a 4-worker job that never returns
// leaves a 3-worker world, resharded from the survivors' memory, that
// finishes the job with the usual accuracy - and with the same bits as a
// 3-worker run resumed from the 4-worker checkpoint of the same step (the
// same schedule of world sizes gives the same result).
#include <signal.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/env.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"
#include "tests/util/require_bf16.h"

namespace shardline {
namespace {

constexpr int kSteps = 1500;

// Both kinds of run: disk checkpoints and in-memory snapshots every 100
// steps, every checkpoint kept (the reference resumes from one), in
// `precision` (train.precision).
std::vector<std::string> Run(const std::string& precision = "FP32") {
  return {absl::StrCat("train.total_steps=", kSteps), "train.log_every=50", "train.eval_every=0",
          "checkpoint.every_steps=100", "checkpoint.keep_last=0", "checkpoint.memory_every_steps=100",
          "train.precision=" + precision};
}

std::vector<std::string> Elastic(int min_workers, int replace_timeout_seconds, const std::string& precision = "FP32") {
  std::vector<std::string> sets = Run(precision);
  sets.push_back(absl::StrCat("runtime.min_workers=", min_workers));
  sets.push_back(absl::StrCat("runtime.replace_timeout_seconds=", replace_timeout_seconds));
  return sets;
}

// The last eval is the final step's, with the usual accuracy.
void ExpectUsualAccuracy(const std::string& dir) {
  const std::vector<std::string> evals = SplitLines(dir + "/metrics.jsonl", "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_EQ(JsonField(evals.back(), "step"), kSteps);
  EXPECT_GE(JsonField(evals.back(), "accuracy"), 0.85) << evals.back();
}

// `workers` workers resumed from DIR's checkpoint of `step` end with the
// bits `got` (DIR's final state).
void ExpectSameAsResumeOf(const std::string& dir, int64_t step, int workers, const std::vector<float>& got,
                          const std::string& ref_name, const std::string& precision = "FP32") {
  ASSERT_TRUE(Env::Default()->FileExists(StepDir(dir + "/checkpoints", step) + "/COMMITTED"));
  std::vector<std::string> resumed = Run(precision);
  resumed.push_back("checkpoint.resume_from=" + dir);
  resumed.push_back(absl::StrCat("checkpoint.resume_step=", step));
  const std::string ref = FreshDir(ref_name);
  Subprocess again(LaunchArgv(ref, workers, resumed));
  ASSERT_EQ(again.Wait(absl::Seconds(300)), 0) << again.Output();
  EXPECT_TRUE(absl::StrContains(ReadAll(ref + "/logs/coordinator.log"), absl::StrCat("restores step ", step)))
      << ReadAll(ref + "/logs/coordinator.log");
  EXPECT_TRUE(SameBits(got, FinalState(ref, kSteps, workers)))
      << "the elastic run's final state differs from a " << workers << "-worker resume of its step " << step;
}

TEST(ElasticTest, AWorkerThatNeverReturnsLeavesThreeThatFinishWithTheUsualAccuracyBitForBit) {
  const std::vector<std::string> elastic = Elastic(/*min_workers=*/3, /*replace_timeout_seconds=*/2);
  const std::string dir = FreshDir("elastic_4to3");
  Subprocess job(LaunchArgv(dir, 4, elastic, /*max_restarts=*/0));
  ASSERT_TRUE(WaitForStep(dir, 750, absl::Seconds(180))) << job.Output();
  // Slot 1, so that the survivors' ranks close a gap (slots 0, 2, 3 -> ranks 0, 1, 2).
  ASSERT_TRUE(SignalLaunchedWorker(dir, 1, SIGKILL));
  ASSERT_EQ(job.Wait(absl::Seconds(300)), 0) << job.Output();

  const std::string coord = ReadAll(dir + "/logs/coordinator.log");
  const int64_t shrunk_at = WorldChangeStep(coord, 4, 3);
  ASSERT_GT(shrunk_at, 0) << coord;
  EXPECT_EQ(shrunk_at % 100, 0);
  EXPECT_TRUE(absl::StrContains(coord, absl::StrCat("restores step ", shrunk_at,
                                                    " from the workers' memory (resharded from a world of 4")))
      << coord;
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/worker-0.log"),
                                absl::StrCat("restored step ", shrunk_at, " from memory")));
  // The change is in metrics.jsonl, and the last world was three.
  const std::vector<std::string> changes = SplitLines(dir + "/metrics.jsonl", "world");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(JsonField(changes[0], "step"), shrunk_at);
  EXPECT_EQ(JsonField(changes[0], "world_size"), 3);
  EXPECT_EQ(JsonField(changes[0], "previous_world_size"), 4);
  ExpectUsualAccuracy(dir);
  const std::vector<float> got = FinalState(dir, kSteps, 3);
  ASSERT_FALSE(got.empty());
  // The same schedule from disk: 4 workers to step S (this run's own
  // checkpoint of it), then 3.
  ExpectSameAsResumeOf(dir, shrunk_at, 3, got, "elastic_ref3");
}

// A smaller world grows back when a worker returns: at the next committed
// checkpoint it re-forms with three, resharding the two survivors' memory
// onto three ranks, and ends with the bits of a 3-worker run resumed from
// the 2-worker checkpoint of that step.
// In both precisions (train.precision): the growth keeps its bits in BF16
// too (BF16's shrink: zero3_test.cc).
class ElasticGrowTest : public testing::TestWithParam<const char*> {};

TEST_P(ElasticGrowTest, AReturningWorkerJoinsAtTheNextCheckpointAndTheWorldGrowsBack) {
  const std::string precision = GetParam();
  if (precision == "BF16") SHARDLINE_REQUIRE_BF16();
  const std::vector<std::string> elastic = Elastic(/*min_workers=*/2, /*replace_timeout_seconds=*/1, precision);
  const std::string dir = FreshDir("elastic_grow_" + precision);
  Subprocess job(LaunchArgv(dir, 3, elastic, /*max_restarts=*/0));
  ASSERT_TRUE(WaitForStep(dir, 350, absl::Seconds(180))) << job.Output();
  ASSERT_TRUE(SignalLaunchedWorker(dir, 1, SIGKILL));
  const std::string coord_log = dir + "/logs/coordinator.log";
  ASSERT_TRUE(WaitForText(coord_log, "the world changed size: 3 -> 2", absl::Seconds(60))) << job.Output();
  // The same slot comes back, as a scheduler would bring it.
  Subprocess back({BinPath("shardline-worker"), "--coordinator", ReadAll(dir + "/coordinator.address"), "--listen",
                   "127.0.0.1:0", "--rank", "1", "--token_file", dir + "/token"});
  ASSERT_EQ(job.Wait(absl::Seconds(300)), 0) << job.Output();
  EXPECT_EQ(back.Wait(absl::Seconds(60)), 0) << back.Output();

  const std::string coord = ReadAll(coord_log);
  const int64_t grown_at = WorldChangeStep(coord, 2, 3);
  ASSERT_GT(grown_at, WorldChangeStep(coord, 3, 2)) << coord;
  EXPECT_EQ(grown_at % 100, 0);
  EXPECT_TRUE(absl::StrContains(coord, "it joins the world of 2 at the next committed checkpoint")) << coord;
  EXPECT_EQ(SplitLines(dir + "/metrics.jsonl", "world").size(), 2u);
  ExpectUsualAccuracy(dir);
  const std::vector<float> got = FinalState(dir, kSteps, 3);
  ASSERT_FALSE(got.empty());
  ExpectSameAsResumeOf(dir, grown_at, 3, got, "elastic_grow_ref_" + precision, precision);
}

INSTANTIATE_TEST_SUITE_P(Precisions, ElasticGrowTest, testing::Values("FP32", "BF16"),
                         [](const testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace shardline
