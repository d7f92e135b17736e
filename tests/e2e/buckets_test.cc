// Gradient buckets end to end (collective.bucket_cap_mb): on the default MLP
// a cap of 0.1 MiB cuts three buckets, one per layer, and every worker owns
// a piece of each. Checked with real processes and checkpoints on disk:
// the checkpoint records the pieces; a bucketed run at N=2 ends with the
// same bits as one bucket (two-term sums commute, and the default job does
// not clip); at N=3 the overlapped collectives (the default) end with the
// same bits as collective.overlap=false, with float32 and with bf16
// gradients on the wire, and a SIGKILLed worker resumes bit for bit; and the 3-worker bucketed checkpoint restores onto one process
// with one bucket.
#include <signal.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

std::vector<std::string> RunWithCap(const std::string& cap) {
  return {"train.total_steps=300", "checkpoint.every_steps=100", "train.log_every=100", "train.eval_every=0",
          "collective.bucket_cap_mb=" + cap};
}

// `shardline ckpt export` of the latest checkpoint in `dir`: the file's bytes.
std::string Export(const std::string& dir) {
  const std::string out = dir + "/export.safetensors";
  Subprocess e({BinPath("shardline"), "ckpt", "export", dir, "--step", "latest", "--out", out});
  EXPECT_EQ(e.Wait(absl::Seconds(60)), 0) << e.Output();
  return ReadAll(out);
}

TEST(BucketsTest, PiecesCheckpointResumeAndReshardAcrossPlans) {
  // N=2: one bucket and three give the same bits.
  const std::string one = FreshDir("buckets_one");
  Subprocess a(LaunchArgv(one, 2, RunWithCap("0")));
  ASSERT_EQ(a.Wait(absl::Seconds(300)), 0) << a.Output();
  // One bucket has nothing to overlap: collective.overlap (on) leaves its
  // collectives on the training thread, and says so.
  const std::string one_log = ReadAll(one + "/logs/worker-0.log");
  EXPECT_TRUE(absl::StrContains(one_log, "one bucket")) << one_log;
  EXPECT_FALSE(absl::StrContains(one_log, "in the background")) << "one bucket ran in the background";
  const std::string three = FreshDir("buckets_three");
  Subprocess b(LaunchArgv(three, 2, RunWithCap("0.1")));
  ASSERT_EQ(b.Wait(absl::Seconds(300)), 0) << b.Output();
  const std::string shard = StepDir(three + "/checkpoints", 300) + "/" + ShardFileName(1, 2);
  absl::StatusOr<ShardContents> c = ReadShard(Env::Default(), shard);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ShardPieces(c->header).size(), 3u) << shard;
  const std::string exported = Export(three);
  ASSERT_FALSE(exported.empty());
  EXPECT_EQ(exported, Export(one)) << "three buckets end with other parameters than one at N=2";

  // N=3, three buckets: a SIGKILLed worker resumes bit for bit.
  const std::string clean = FreshDir("buckets_clean3");
  Subprocess d(LaunchArgv(clean, 3, RunWithCap("0.1")));
  ASSERT_EQ(d.Wait(absl::Seconds(300)), 0) << d.Output();
  const std::vector<float> want = FinalState(clean, 300, 3);
  ASSERT_FALSE(want.empty());
  // The same ops run one after the other on the training thread
  // (collective.overlap=false) give the same bits as in the background.
  const std::string sequential = FreshDir("buckets_sequential3");
  std::vector<std::string> sets = RunWithCap("0.1");
  sets.push_back("collective.overlap=false");
  Subprocess g(LaunchArgv(sequential, 3, sets));
  ASSERT_EQ(g.Wait(absl::Seconds(300)), 0) << g.Output();
  EXPECT_TRUE(SameBits(FinalState(sequential, 300, 3), want)) << "overlap changed the bits";
  EXPECT_TRUE(absl::StrContains(ReadAll(clean + "/logs/worker-0.log"), "in the background")) << "no overlap ran";
  // bf16 gradients on the wire (collective.bf16_gradients): other low bits
  // than float32, but deterministic: overlapped and sequential runs agree.
  std::vector<std::vector<float>> bf16_states;
  for (const char* overlap : {"true", "false"}) {
    const std::string dir = FreshDir(std::string("buckets_bf16_overlap_") + overlap);
    std::vector<std::string> bf16_sets = RunWithCap("0.1");
    bf16_sets.push_back("collective.bf16_gradients=true");
    bf16_sets.push_back(std::string("collective.overlap=") + overlap);
    Subprocess h(LaunchArgv(dir, 3, bf16_sets));
    ASSERT_EQ(h.Wait(absl::Seconds(300)), 0) << h.Output();
    bf16_states.push_back(FinalState(dir, 300, 3));
    ASSERT_FALSE(bf16_states.back().empty());
  }
  EXPECT_TRUE(SameBits(bf16_states[0], bf16_states[1])) << "bf16 gradients are not deterministic";
  EXPECT_FALSE(SameBits(bf16_states[0], want)) << "bf16 gradients changed nothing: were they sent as float32?";
  const std::string killed = FreshDir("buckets_killed3");
  Subprocess e(LaunchArgv(killed, 3, RunWithCap("0.1"), /*max_restarts=*/2));
  ASSERT_TRUE(WaitForText(killed + "/logs/coordinator.log", "committed checkpoint at step 100 ", absl::Seconds(300)))
      << e.Output();
  ASSERT_TRUE(SignalLaunchedWorker(killed, 1, SIGKILL));
  ASSERT_EQ(e.Wait(absl::Seconds(300)), 0) << e.Output();
  EXPECT_TRUE(absl::StrContains(ReadAll(killed + "/logs/worker-0.log"), "restored step")) << e.Output();
  EXPECT_TRUE(SameBits(FinalState(killed, 300, 3), want)) << "a killed bucketed run ends with other bits";

  // The 3-worker, three-bucket checkpoint onto one process and one bucket.
  const std::string single = FreshDir("buckets_single");
  Subprocess f(TrainArgv(single, {"train.total_steps=320", "train.eval_every=0", "collective.bucket_cap_mb=0",
                                  "checkpoint.resume_from=" + clean}));
  ASSERT_EQ(f.Wait(absl::Seconds(300)), 0) << f.Output();
  EXPECT_TRUE(absl::StrContains(f.Output(), "restored step 300")) << f.Output();
  const std::vector<std::string> evals = SplitLines(single + "/metrics.jsonl", "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_GE(JsonField(evals.back(), "accuracy"), 0.75) << evals.back();  // chance is 0.1
}

}  // namespace
}  // namespace shardline
