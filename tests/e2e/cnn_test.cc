// The convolutional family end to end, as a user runs it: the shipped
// deploy/configs/fmnist_cnn.textproto on two workers learns, a SIGKILLed
// worker resumes bit for bit, its two-worker checkpoint restores onto one
// process, and the export has PyTorch's names and shapes. (The full
// schedule's 0.92+ is in bench/RESULTS.md: bench/drivers/cnn_vs_torch.sh.)
#include <signal.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"
#include "worker/checkpoint/safetensors.h"

namespace shardline {
namespace {

// 300 steps, about 0.6 epochs: the shipped schedule's warmup and cosine
// squeezed into them; still enough to show learning.
const std::vector<std::string> kRun = {"train.total_steps=300", "checkpoint.every_steps=100", "train.log_every=100",
                                       "train.eval_every=0", "schedule.warmup_steps=50"};

TEST(CnnTest, LearnsOnTwoWorkersResumesBitForBitReshardsAndExports) {
  const std::string config = ConfigPath("fmnist_cnn");
  const std::string clean = FreshDir("cnn_clean");
  Subprocess a(LaunchArgv(clean, 2, kRun, 0, config));
  ASSERT_EQ(a.Wait(absl::Seconds(300)), 0) << a.Output();
  const std::vector<std::string> evals = SplitLines(clean + "/metrics.jsonl", "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_GE(JsonField(evals.back(), "accuracy"), 0.85) << evals.back();  // chance is 0.1
  const std::vector<float> want = FinalState(clean, 300, 2);
  ASSERT_FALSE(want.empty());

  // Kill a worker after the first commit: the world restores and ends with
  // the uninterrupted run's bits.
  const std::string killed = FreshDir("cnn_killed");
  Subprocess b(LaunchArgv(killed, 2, kRun, /*max_restarts=*/2, config));
  ASSERT_TRUE(WaitForText(killed + "/logs/coordinator.log", "committed checkpoint at step 100 ", absl::Seconds(300)))
      << b.Output();
  ASSERT_TRUE(SignalLaunchedWorker(killed, 1, SIGKILL));
  ASSERT_EQ(b.Wait(absl::Seconds(300)), 0) << b.Output();
  EXPECT_TRUE(absl::StrContains(ReadAll(killed + "/logs/worker-0.log"), "restored step")) << b.Output();
  EXPECT_TRUE(SameBits(FinalState(killed, 300, 2), want)) << "a killed CNN run ends with other bits";

  // The two-worker checkpoint onto one process (2 -> 1 reshard).
  const std::string one = FreshDir("cnn_one");
  Subprocess c({BinPath("shardline"), "train", "--config", config, "--workdir", one, "--set", "runtime.num_workers=1",
                "--set", "train.total_steps=320", "--set", "train.eval_every=0", "--set",
                "checkpoint.resume_from=" + clean});
  ASSERT_EQ(c.Wait(absl::Seconds(300)), 0) << c.Output();
  EXPECT_TRUE(absl::StrContains(c.Output(), "restored step 300")) << c.Output();
  const std::vector<std::string> resumed = SplitLines(one + "/metrics.jsonl", "eval");
  ASSERT_FALSE(resumed.empty());
  EXPECT_GE(JsonField(resumed.back(), "accuracy"), 0.85) << resumed.back();

  // Export: PyTorch's names and layouts (docs/models.md).
  const std::string out = clean + "/cnn.safetensors";
  Subprocess e({BinPath("shardline"), "ckpt", "export", clean, "--step", "latest", "--out", out});
  ASSERT_EQ(e.Wait(absl::Seconds(60)), 0) << e.Output();
  const std::string bytes = ReadAll(out);
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensors(bytes, out);
  ASSERT_TRUE(header.ok()) << header.status();
  const std::map<std::string, std::vector<int64_t>> shapes = {
      {"conv0/w", {32, 1, 3, 3}}, {"conv0/b", {32}},   {"conv1/w", {64, 32, 3, 3}}, {"conv1/b", {64}},
      {"dense0/w", {128, 3136}},  {"dense0/b", {128}}, {"dense1/w", {10, 128}},     {"dense1/b", {10}}};
  ASSERT_EQ(header->tensors.size(), shapes.size());
  for (const auto& [name, shape] : shapes) {
    ASSERT_TRUE(header->tensors.count(name)) << name;
    EXPECT_EQ(header->tensors.at(name).shape, shape) << name;
    EXPECT_EQ(header->tensors.at(name).dtype, "F32") << name;
  }
}

}  // namespace
}  // namespace shardline
