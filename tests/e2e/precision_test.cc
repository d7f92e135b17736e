// train.precision BF16 end to end, for every model family, as a user runs
// it: the MLP, the CNN, the ViT (Fashion-MNIST) and the GPT (Austen) train
// in bfloat16 products on two workers and learn; a worker killed (SIGKILL,
// by its crash point while saving) resumes from disk and the run ends with
// the uninterrupted run's bits; bfloat16's bits are not float32's; the
// export holds float32 tensors (the master copy); and `shardline sample`
// runs in the job's precision with the same bytes for the same arguments.
// (Stage 2 = 3, remat, overlap, recovery from memory, resharding and the
// elastic shrink in BF16: zero3_test.cc's Precisions/ twins.)
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/platform/env.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"
#include "tests/util/require_bf16.h"
#include "worker/checkpoint/safetensors.h"

namespace shardline {
namespace {

struct Family {
  const char* name;
  const char* config;
  std::vector<std::string> sets;  // a few seconds' run
  int64_t steps;
  int64_t crash_step;     // a checkpoint step after the first, killed while it is saved
  const char* metric;     // of the final eval
  double at_least;        // BF16 reaches this (chance: 0.1 for images; 8 bits per byte for text)
  bool higher_is_better;
};

std::vector<Family> Families(const std::string& text) {
  const std::vector<std::string> common = {"checkpoint.every_steps=50", "train.log_every=50", "train.eval_every=0",
                                           "train.precision=BF16"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), common.begin(), common.end());
    return more;
  };
  return {
      {"mlp", "fmnist_mlp", with({"train.total_steps=150"}), 150, 100, "accuracy", 0.75, true},
      {"cnn", "fmnist_cnn", with({"train.total_steps=100", "schedule.warmup_steps=20"}), 100, 100, "accuracy", 0.65,
       true},
      {"vit", "fmnist_vit",
       with({"train.total_steps=100", "schedule.warmup_steps=20", "model.vit.layers=2", "model.vit.d_model=32"}), 100,
       100, "accuracy", 0.35, true},
      {"gpt", "austen_gpt",
       with({"data.text.train_path=" + text + "/train.txt", "data.text.val_path=" + text + "/val.txt",
             "model.gpt.context=32", "model.gpt.layers=2", "model.gpt.d_model=32", "model.gpt.heads=2",
             "model.gpt.mlp_ratio=2", "data.global_batch_size=16", "train.total_steps=100",
             "schedule.warmup_steps=20"}),
       100, 100, "bits_per_byte", 4.8, false},
  };
}

TEST(PrecisionTest, EveryFamilyLearnsInBf16AndAKilledRunResumesWithTheSameBits) {
  SHARDLINE_REQUIRE_BF16();
  const std::string text = FreshDir("precision_text");
  Subprocess data({BinPath("shardline"), "data", "austen", "--out", text});
  ASSERT_EQ(data.Wait(absl::Seconds(60)), 0) << data.Output();
  for (const Family& f : Families(text)) {
    SCOPED_TRACE(f.name);
    const std::string config = ConfigPath(f.config);
    const std::string clean = FreshDir(absl::StrCat("precision_", f.name));
    Subprocess a(LaunchArgv(clean, 2, f.sets, 0, config));
    ASSERT_EQ(a.Wait(absl::Seconds(300)), 0) << a.Output();
    const std::string log = ReadAll(clean + "/logs/worker-0.log");
    EXPECT_TRUE(absl::StrContains(log, "matrix products in BF16")) << log;
    const std::vector<std::string> evals = SplitLines(clean + "/metrics.jsonl", "eval");
    ASSERT_FALSE(evals.empty());
    const double got = JsonField(evals.back(), f.metric);
    if (f.higher_is_better) {
      EXPECT_GE(got, f.at_least) << evals.back();
    } else {
      EXPECT_LE(got, f.at_least) << evals.back();
    }
    const std::vector<float> want = FinalState(clean, f.steps, 2);
    ASSERT_FALSE(want.empty());

    const std::string killed = FreshDir(absl::StrCat("precision_", f.name, "_killed"));
    Subprocess b(LaunchArgv(killed, 2, f.sets, /*max_restarts=*/2, config),
                 {absl::StrCat("SHARDLINE_CRASH_AT=before_shard_rename:", f.crash_step, ":", killed, "/crashed")});
    ASSERT_EQ(b.Wait(absl::Seconds(300)), 0) << b.Output();
    EXPECT_TRUE(Env::Default()->FileExists(killed + "/crashed")) << "the crash point never fired";
    EXPECT_TRUE(absl::StrContains(ReadAll(killed + "/logs/worker-0.log"), "restored step")) << b.Output();
    EXPECT_TRUE(SameBits(FinalState(killed, f.steps, 2), want)) << "a killed BF16 run ends with other bits";

    // The same run in float32: other bits (the products really were bfloat16).
    std::vector<std::string> fp32 = f.sets;
    fp32.push_back("train.precision=FP32");
    const std::string other = FreshDir(absl::StrCat("precision_", f.name, "_fp32"));
    Subprocess c(LaunchArgv(other, 2, fp32, 0, config));
    ASSERT_EQ(c.Wait(absl::Seconds(300)), 0) << c.Output();
    EXPECT_FALSE(SameBits(FinalState(other, f.steps, 2), want)) << "BF16 ended with float32's bits";

    // The export is the float32 master copy.
    const std::string out = clean + "/model.safetensors";
    Subprocess e({BinPath("shardline"), "ckpt", "export", clean, "--step", "latest", "--out", out});
    ASSERT_EQ(e.Wait(absl::Seconds(60)), 0) << e.Output();
    absl::StatusOr<SafetensorsHeader> header = ParseSafetensors(ReadAll(out), out);
    ASSERT_TRUE(header.ok()) << header.status();
    for (const auto& [name, tensor] : header->tensors) EXPECT_EQ(tensor.dtype, "F32") << name;

    if (std::string(f.name) == "gpt") {
      // Sampling in the job's precision: the same arguments, the same bytes.
      auto sample = [&](const std::string& dir) {
        Subprocess s({BinPath("shardline"), "sample", "--workdir", dir, "--prompt", "It is a truth", "--tokens", "40",
                      "--seed", "3"});
        EXPECT_EQ(s.Wait(absl::Seconds(60)), 0) << s.Output();
        return s.Output();
      };
      const std::string s1 = sample(clean);
      EXPECT_TRUE(absl::StartsWith(s1, "It is a truth")) << s1;
      EXPECT_EQ(s1, sample(clean));
      EXPECT_EQ(s1, sample(killed));
    }
  }
}

}  // namespace
}  // namespace shardline
