// ZeRO stage 3 (collective.zero_stage=3) and remat (train.remat) end to
// end, with real processes and checkpoints on disk, against stage 2's bits:
// for the same world size and bucket plan every run below ends with the
// same parameters and optimizer state as stage 2 - the MLP with overlap on
// and off; the GPT (Austen, shrunk to seconds) with overlap on and off, with
// remat, without resharding after forward and without prefetch; a stage-3
// GPT worker killed (SIGKILL, by its crash points: saving a checkpoint, and
// in the middle of a backward's gathers) restored from the survivors'
// memory, whose export is stage 2's; a checkpoint resharded from
// 2 workers onto 3 at stage 3 and at stage 2; and an
// elastic stage-3 world of three that loses a worker, which ends with the
// bits of a stage-2 two-worker resume of its step 200. Each stage-3 worker
// reports what it held (the memory gauges' numbers) in its final log line.
#include <cstdlib>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/platform/env.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"
#include "tests/util/require_bf16.h"

namespace shardline {
namespace {

// Runs `sets` on `workers` and returns the final state at `steps`.
std::vector<float> RunJob(const std::string& name, int workers, std::vector<std::string> sets, int64_t steps,
                       const std::string& config = "", std::vector<std::string> env = {}, int max_restarts = 0) {
  const std::string dir = FreshDir(name);
  Subprocess job(LaunchArgv(dir, workers, sets, max_restarts, config), env);
  EXPECT_EQ(job.Wait(absl::Seconds(300)), 0) << name << "\n" << job.Output();
  return FinalState(dir, steps, workers);
}

// The parameters a worker's final log line says it held after its last step.
double HeldParameterMiB(const std::string& log) {
  const std::string mark = "held after the last step: parameters ";
  const size_t at = log.rfind(mark);
  return at == std::string::npos ? -1 : std::strtod(log.c_str() + at + mark.size(), nullptr);
}

// The parameters a worker's final log line says it held at a step's peak
// and at an evaluation's: "(X MiB at the step's peak, Y MiB at an
// evaluation's)".
std::pair<double, double> HeldPeaksMiB(const std::string& log) {
  const size_t at = log.rfind("held after the last step: parameters ");
  const size_t open = at == std::string::npos ? at : log.find('(', at);
  if (open == std::string::npos) return {-1, -1};
  char* end = nullptr;
  const double step = std::strtod(log.c_str() + open + 1, &end);
  const size_t comma = log.find("at the step's peak, ", open);
  if (comma == std::string::npos) return {-1, -1};
  const double eval = std::strtod(log.c_str() + comma + std::string("at the step's peak, ").size(), nullptr);
  return {step, eval};
}

// The lines of `log` that report an evaluation ("eval at step ...").
std::string EvalLines(const std::string& log) {
  std::string out;
  size_t at = 0;
  while ((at = log.find("eval at step ", at)) != std::string::npos) {
    const size_t end = log.find('\n', at);
    out += log.substr(at, end - at) + "\n";
    at = end;
  }
  return out;
}

// Where FreshDir(name) put a run.
std::string FreshDirPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::vector<std::string> With(std::vector<std::string> sets, std::initializer_list<std::string> more) {
  sets.insert(sets.end(), more);
  return sets;
}

TEST(Zero3Test, TheMlpAtStageThreeHasStageTwosBitsWithOverlapOnAndOff) {
  // Three buckets of the default MLP (0.1 MiB: one per layer), two workers.
  const std::vector<std::string> run = {"train.total_steps=200", "checkpoint.every_steps=100", "train.log_every=100",
                                        "train.eval_every=100", "collective.bucket_cap_mb=0.1"};
  const std::vector<float> want = RunJob("zero3_mlp_stage2", 2, run, 200);
  ASSERT_FALSE(want.empty());
  const double stage2_held = HeldParameterMiB(ReadAll(FreshDirPath("zero3_mlp_stage2") + "/logs/worker-1.log"));
  ASSERT_GT(stage2_held, 0.8);  // 235,146 floats: 0.9 MiB
  for (const char* overlap : {"true", "false"}) {
    const std::string dir = FreshDir(absl::StrCat("zero3_mlp_overlap_", overlap));
    Subprocess job(LaunchArgv(dir, 2, With(run, {"collective.zero_stage=3", absl::StrCat("collective.overlap=", overlap)})));
    ASSERT_EQ(job.Wait(absl::Seconds(300)), 0) << job.Output();
    EXPECT_TRUE(SameBits(FinalState(dir, 200, 2), want)) << dir << ": stage 3 changed the bits";
    const std::string log = ReadAll(dir + "/logs/worker-1.log");
    EXPECT_TRUE(absl::StrContains(log, "ZeRO stage 3")) << log;
    EXPECT_TRUE(absl::StrContains(log, "memory predicted ")) << log;
    // Half the parameters given back between steps (to the page: 0.45 of 0.9 MiB).
    EXPECT_LT(HeldParameterMiB(log), 0.6 * stage2_held) << log;
    // The evaluations gathered layer by layer (three buckets, the first
    // prefetched): never more at once than a step.
    const auto [step_peak, eval_peak] = HeldPeaksMiB(log);
    EXPECT_GT(eval_peak, 0.4) << log;
    EXPECT_LE(eval_peak, step_peak) << log;
  }
}

std::vector<std::string> SmallGpt(const std::string& text_dir) {
  // About 35,000 parameters; 0.02 MiB buckets cut them into several.
  return {"data.text.train_path=" + text_dir + "/train.txt", "data.text.val_path=" + text_dir + "/val.txt",
          "model.gpt.context=32", "model.gpt.layers=2", "model.gpt.d_model=32", "model.gpt.heads=2",
          "model.gpt.mlp_ratio=2", "data.global_batch_size=16", "train.total_steps=120",
          "checkpoint.every_steps=40", "train.log_every=40", "train.eval_every=60", "schedule.warmup_steps=20",
          "collective.bucket_cap_mb=0.02"};
}

// Each GPT test below runs in both precisions (train.precision): every
// guarantee float32 keeps, bfloat16's products keep too.
class Zero3GptTest : public testing::TestWithParam<const char*> {
 protected:
  // A run's directory name, per precision.
  static std::string Name(const std::string& base) { return absl::StrCat(base, "_", GetParam()); }
  // The run's settings in this test's precision.
  static std::vector<std::string> InPrecision(std::vector<std::string> sets) {
    return With(std::move(sets), {absl::StrCat("train.precision=", GetParam())});
  }
  void SetUp() override {
    if (std::string(GetParam()) == "BF16") SHARDLINE_REQUIRE_BF16();
  }
};

TEST_P(Zero3GptTest, TheGptAtStageThreeWithRematHasStageTwosBitsAndResumesReshardsAndShrinks) {
  const std::string text = FreshDir(Name("zero3_text"));
  Subprocess data({BinPath("shardline"), "data", "austen", "--out", text});
  ASSERT_EQ(data.Wait(absl::Seconds(60)), 0) << data.Output();
  const std::string config = ConfigPath("austen_gpt");
  const std::vector<std::string> run = InPrecision(SmallGpt(text));
  const std::string stage2 = FreshDir(Name("zero3_gpt_stage2"));
  {
    Subprocess job(LaunchArgv(stage2, 2, run, 0, config));
    ASSERT_EQ(job.Wait(absl::Seconds(300)), 0) << job.Output();
  }
  const std::vector<float> want = FinalState(stage2, 120, 2);
  ASSERT_FALSE(want.empty());
  const std::string log = ReadAll(stage2 + "/logs/worker-0.log");
  ASSERT_TRUE(absl::StrContains(log, absl::StrCat("matrix products in ", GetParam()))) << log;

  const std::vector<std::string> stage3 = With(run, {"collective.zero_stage=3"});
  EXPECT_TRUE(SameBits(RunJob(Name("zero3_gpt"), 2, stage3, 120, config), want)) << "stage 3 changed the GPT's bits";
  {
    // Its evaluations (steps 60 and 120) ran layer by layer, each no larger
    // than a step at its peak, and said what stage 2's said.
    const std::string log3 = ReadAll(FreshDirPath(Name("zero3_gpt")) + "/logs/worker-0.log");
    const auto [step_peak, eval_peak] = HeldPeaksMiB(log3);
    const double whole = HeldParameterMiB(log);
    EXPECT_GT(eval_peak, 0) << log3;
    EXPECT_LE(eval_peak, step_peak) << log3;
    EXPECT_LT(eval_peak, 0.9 * whole) << log3;
    EXPECT_EQ(HeldPeaksMiB(log).second, whole) << "at stage 2 an evaluation reads every parameter\n" << log;
    EXPECT_NE(EvalLines(log3), "");
    EXPECT_EQ(EvalLines(log3), EvalLines(log));
  }
  EXPECT_TRUE(SameBits(RunJob(Name("zero3_gpt_remat_sequential"), 2,
                           With(stage3, {"train.remat=true", "collective.overlap=false"}), 120, config),
                       want))
      << "stage 3 with remat, on the training thread, changed the bits";
  EXPECT_TRUE(SameBits(RunJob(Name("zero3_gpt_keep"), 2,
                           With(stage3, {"collective.reshard_after_forward=false", "collective.prefetch_buckets=0",
                                         "train.remat=true"}),
                           120, config),
                       want))
      << "stage 3 without resharding after forward or prefetch changed the bits";

  // A stage-3 run of 2 workers with snapshots every 20 steps, one worker
  // SIGKILLed at `crash` ("<point>:<step>"): restored from the survivor's
  // memory at `restored` and ends with stage 2's bits. Returns its dir.
  auto killed_at = [&](const std::string& name, const std::string& crash, int restored) {
    const std::string dir = FreshDir(name);
    {
      Subprocess job(LaunchArgv(dir, 2, With(stage3, {"checkpoint.memory_every_steps=20"}), 2, config),
                     {"SHARDLINE_CRASH_AT=" + crash + ":" + dir + "/crashed"});
      EXPECT_EQ(job.Wait(absl::Seconds(300)), 0) << job.Output();
    }
    EXPECT_TRUE(Env::Default()->FileExists(dir + "/crashed")) << crash << ": the crash point never fired";
    const std::string log = ReadAll(dir + "/logs/worker-0.log");
    EXPECT_TRUE(absl::StrContains(log, absl::StrCat("restored step ", restored, " from memory"))) << crash << log;
    EXPECT_TRUE(SameBits(FinalState(dir, 120, 2), want)) << crash << ": a killed stage-3 run ends with other bits";
    return dir;
  };
  // Killed while saving step 80: restored from step 60.
  const std::string killed = killed_at(Name("zero3_gpt_killed"), "before_shard_rename:80", 60);
  // Killed in the middle of step 90's backward, as it is about to gather a
  // layer's parameters with reduce-scatters and gathers in flight: the
  // survivor's waits fail at once (its peer's connection breaks; none
  // waits for a timeout), and both resume from the snapshot of step 80.
  killed_at(Name("zero3_gpt_killed_mid_backward"), "backward_gather:90", 80);
  // Its export is stage 2's, byte for byte.
  std::vector<std::string> exported;
  for (const std::string& dir : {stage2, killed}) {
    Subprocess e({BinPath("shardline"), "ckpt", "export", dir, "--step", "latest", "--out", dir + "/gpt.safetensors"});
    ASSERT_EQ(e.Wait(absl::Seconds(60)), 0) << e.Output();
    exported.push_back(ReadAll(dir + "/gpt.safetensors"));
  }
  EXPECT_FALSE(exported[0].empty());
  EXPECT_EQ(exported[0], exported[1]) << "the stage-3 export differs from stage 2's";

  // 2 -> 3 from the stage-2 run's step 80, at stage 3 and at stage 2: the
  // same bits.
  const std::vector<std::string> resume = With(run, {"checkpoint.resume_from=" + stage2, "checkpoint.resume_step=80"});
  const std::vector<float> three = RunJob(Name("zero3_gpt_three_stage2"), 3, resume, 120, config);
  ASSERT_FALSE(three.empty());
  EXPECT_TRUE(SameBits(RunJob(Name("zero3_gpt_three"), 3, With(resume, {"collective.zero_stage=3"}), 120, config), three))
      << "a stage-3 resume onto 3 workers differs from stage 2's";
}

// The elastic run of gpt_e2e_test at stage 3 with remat: three workers, one
// dies as the snapshot of step 300 replicates, the two survivors re-form
// from memory at step 200, resharded; the result has the bits of a stage-2
// two-worker resume of that step.
TEST_P(Zero3GptTest, AnElasticStageThreeWorldShrinksWithStageTwosBits) {
  const std::string text = FreshDir(Name("zero3_elastic_text"));
  Subprocess data({BinPath("shardline"), "data", "austen", "--out", text});
  ASSERT_EQ(data.Wait(absl::Seconds(60)), 0) << data.Output();
  const std::string config = ConfigPath("austen_gpt");
  constexpr int kSteps = 600;
  std::vector<std::string> run = With(InPrecision(SmallGpt(text)), {absl::StrCat("train.total_steps=", kSteps),
                                                       "checkpoint.every_steps=100", "checkpoint.keep_last=0",
                                                       "checkpoint.memory_every_steps=100", "train.log_every=50",
                                                       "train.eval_every=0"});
  const std::string dir = FreshDir(Name("zero3_elastic"));
  Subprocess job(LaunchArgv(dir, 3,
                            With(run, {"runtime.min_workers=2", "runtime.replace_timeout_seconds=1",
                                       "collective.zero_stage=3", "train.remat=true"}),
                            /*max_restarts=*/0, config),
                 {"SHARDLINE_CRASH_AT=snapshot_replication:300:" + dir + "/crashed"});
  ASSERT_EQ(job.Wait(absl::Seconds(300)), 0) << job.Output();
  EXPECT_TRUE(Env::Default()->FileExists(dir + "/crashed")) << "the crash point never fired";
  const std::string coord = ReadAll(dir + "/logs/coordinator.log");
  ASSERT_EQ(WorldChangeStep(coord, 3, 2), 200) << coord;
  const std::vector<float> got = FinalState(dir, kSteps, 2);
  ASSERT_FALSE(got.empty());
  const std::vector<float> want =
      RunJob(Name("zero3_elastic_ref"), 2, With(run, {"checkpoint.resume_from=" + dir, "checkpoint.resume_step=200"}), kSteps,
          config);
  EXPECT_TRUE(SameBits(got, want)) << "the elastic stage-3 run differs from a stage-2 two-worker resume of step 200";
}

INSTANTIATE_TEST_SUITE_P(Precisions, Zero3GptTest, testing::Values("FP32", "BF16"),
                         [](const testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace shardline
