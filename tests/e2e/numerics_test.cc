// Kernels agreed at the door (issue 63), with real processes: a worker on
// another OpenBLAS core type computes another numerics fingerprint, and a
// job resumed with it is refused under runtime.numerics STRICT, naming the
// worker, both kernels and the fix, with nothing committed by that world;
// under RELAXED it is admitted and the step from which the bits are not
// comparable is recorded. The job's fingerprint is kept in the
// coordinator's store across runs. And parameter agreement every step: a
// value one worker received bad (SHARDLINE_CORRUPT) is caught in the step
// that read it, the worker named, and the job ends with the uninterrupted
// run's bits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

// What `shardline numerics` prints for the test's job on this host, with
// `env`: "fingerprint 0x..." and the kernels.
struct Printed {
  std::string fingerprint;
  std::string kernels;
};
Printed Numerics(const std::vector<std::string>& env) {
  Subprocess p({BinPath("shardline"), "numerics", "--config", ConfigPath("fmnist_mlp"), "--workers", "2"}, env);
  EXPECT_EQ(p.Wait(absl::Seconds(120)), 0) << p.Output();
  const std::string out = p.Output();
  Printed printed;
  const size_t at = out.find("fingerprint 0x");
  if (at != std::string::npos) printed.fingerprint = out.substr(at, std::string("fingerprint 0x").size() + 16);
  const size_t k = out.find("kernels ");
  if (k != std::string::npos) printed.kernels = out.substr(k + 8, out.find('\n', k) - k - 8);
  return printed;
}

// A coordinator and two workers on `dir`, rank 1 with `env1`; returns the
// coordinator's exit code and output, and rank 1's output (in `*worker1`).
std::pair<int, std::string> RunJob(const std::string& dir, int64_t steps, const std::vector<std::string>& sets,
                                   const std::vector<std::string>& env1, std::string* worker1 = nullptr) {
  const std::string addr = absl::StrCat("127.0.0.1:", FreePort());
  std::vector<std::string> argv = {BinPath("shardline-coordinator"), "--config", ConfigPath("fmnist_mlp"),
                                   "--listen", addr, "--workdir", dir, "--set", "runtime.num_workers=2",
                                   "--set", absl::StrCat("train.total_steps=", steps), "--set",
                                   "checkpoint.every_steps=30", "--set", "train.eval_every=0"};
  for (const std::string& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  Subprocess c(argv);
  // Workers left without a coordinator (a refused job) give up registering
  // again after their connect timeout.
  Subprocess w0({BinPath("shardline-worker"), "--coordinator", addr, "--rank", "0", "--connect_timeout_seconds", "5"});
  Subprocess w1({BinPath("shardline-worker"), "--coordinator", addr, "--rank", "1", "--connect_timeout_seconds", "5"},
                env1);
  const int code = c.Wait(absl::Seconds(180));
  EXPECT_NE(w0.Wait(absl::Seconds(60)), -1) << w0.Output();
  EXPECT_NE(w1.Wait(absl::Seconds(60)), -1) << w1.Output();
  if (worker1 != nullptr) *worker1 = w1.Output();
  return {code, c.Output()};
}

TEST(NumericsE2eTest, AWorkerOnOtherKernelsIsRefusedUnderStrictAndRecordedUnderRelaxed) {
  // Another core type whose bits differ here (FMA or not, vector width).
  const Printed here = Numerics({});
  const std::string mine = here.fingerprint;
  ASSERT_FALSE(mine.empty());
  EXPECT_EQ(Numerics({}).fingerprint, mine) << "the fingerprint is not a pure function of the job and the kernels";
  std::string other_core, theirs, their_kernels;
  for (const char* core : {"SandyBridge", "Haswell", "Prescott"}) {
    const Printed p = Numerics({absl::StrCat("OPENBLAS_CORETYPE=", core)});
    if (!p.fingerprint.empty() && p.fingerprint != mine) {
      other_core = core;
      theirs = p.fingerprint;
      their_kernels = p.kernels;
      break;
    }
  }
  ASSERT_FALSE(other_core.empty()) << "no OpenBLAS core type computes differently from the default here";
  const std::string other_env = absl::StrCat("OPENBLAS_CORETYPE=", other_core);

  const std::string dir = FreshDir("numerics_strict");
  const auto [first, first_log] = RunJob(dir, 60, {}, {});
  ASSERT_EQ(first, 0) << first_log;
  EXPECT_TRUE(absl::StrContains(first_log, "the job's numerics: " + mine)) << first_log;
  // Every shard carries its fingerprint, and `ckpt list` shows the one.
  const std::string hex = mine.substr(std::string("fingerprint ").size());
  {
    Subprocess list({BinPath("shardline"), "ckpt", "list", dir});
    EXPECT_EQ(list.Wait(absl::Seconds(60)), 0) << list.Output();
    EXPECT_TRUE(absl::StrContains(list.Output(), "committed   2/2     ")) << list.Output();
    EXPECT_TRUE(absl::StrContains(list.Output(), hex)) << list.Output();
  }

  // Resumed with rank 1 on the other kernels: refused, naming it.
  const auto [refused, refused_log] = RunJob(dir, 120, {}, {other_env});
  EXPECT_EQ(refused, 1) << refused_log;
  for (const std::string& part :
       {std::string("worker rank 1 on host 127.0.0.1 computes ") + theirs, "kernels [" + their_kernels + "]",
        std::string("where the job's is ") + mine, "kernels [" + here.kernels + "]", std::string("at step 0"),
        std::string("OPENBLAS_CORETYPE"),
        std::string("runtime.numerics STRICT")}) {
    EXPECT_TRUE(absl::StrContains(refused_log, part)) << part << " in:\n" << refused_log;
  }
  Subprocess list({BinPath("shardline"), "ckpt", "list", dir});
  EXPECT_EQ(list.Wait(absl::Seconds(60)), 0) << list.Output();
  EXPECT_FALSE(absl::StrContains(list.Output(), "step_90")) << "the refused world committed a checkpoint\n"
                                                            << list.Output();

  // RELAXED: admitted, and recorded from the step it started at.
  std::string relaxed_worker1;
  const auto [relaxed, relaxed_log] = RunJob(dir, 120, {"runtime.numerics=RELAXED"}, {other_env}, &relaxed_worker1);
  EXPECT_EQ(relaxed, 0) << relaxed_log;
  // The worker on other kernels says its restore crosses kernels; the
  // checkpoints that world saved are listed as mixed.
  EXPECT_TRUE(absl::StrContains(relaxed_worker1, "rank 1 restored step 60 from a checkpoint saved by a worker whose "
                                                 "numerics fingerprint is " + hex))
      << relaxed_worker1;
  {
    Subprocess list({BinPath("shardline"), "ckpt", "list", dir});
    EXPECT_EQ(list.Wait(absl::Seconds(60)), 0) << list.Output();
    EXPECT_TRUE(absl::StrContains(list.Output(), "mixed (2)")) << list.Output();
  }
  EXPECT_TRUE(absl::StrContains(relaxed_log, "admitted (runtime.numerics RELAXED): from step 60")) << relaxed_log;
  EXPECT_TRUE(absl::StrContains(relaxed_log, theirs)) << relaxed_log;
  // metrics.jsonl: the job's fingerprint when first reported, then the one
  // admitted, from the step its world started at.
  const std::vector<std::string> lines = SplitLines(dir + "/metrics.jsonl", "numerics");
  ASSERT_EQ(lines.size(), 2u) << ReadAll(dir + "/metrics.jsonl");
  EXPECT_TRUE(absl::StrContains(lines[0], "\"step\":0")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], mine.substr(std::string("fingerprint ").size()))) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[1], "\"step\":60")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[1], theirs.substr(std::string("fingerprint ").size()))) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[1], "\"admitted\":true")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[1], "\"rank\":1")) << lines[1];
}

TEST(NumericsE2eTest, ABitFlippedInAGatheredParameterIsCaughtTheWorkerNamedAndTheJobEndsBitForBit) {
  const std::vector<std::string> run = {"train.total_steps=300", "train.log_every=50", "train.eval_every=0",
                                        "checkpoint.every_steps=0", "checkpoint.memory_every_steps=50"};
  for (const char* stage : {"collective.zero_stage=2", "collective.zero_stage=3"}) {
    std::vector<std::string> sets = run;
    sets.push_back(stage);
    const std::string clean = FreshDir("agreement_clean");
    Subprocess a(LaunchArgv(clean, 3, sets));
    ASSERT_EQ(a.Wait(absl::Seconds(180)), 0) << a.Output();
    const std::vector<float> want = FinalState(clean, 300, 3);
    ASSERT_FALSE(want.empty());

    // Rank 1 receives one parameter of step 170 with its exponent's top bit
    // flipped: every later result of that rank would differ.
    const std::string dir = FreshDir("agreement_flipped");
    Subprocess b(LaunchArgv(dir, 3, sets), {"SHARDLINE_CORRUPT=1:170:gathered:30"});
    ASSERT_EQ(b.Wait(absl::Seconds(180)), 0) << b.Output();
    const std::string worker1 = ReadAll(dir + "/logs/worker-1.log");
    EXPECT_TRUE(absl::StrContains(worker1, "SHARDLINE_CORRUPT: rank 1 flipped bit 30 of the gathered value"))
        << stage << "\n" << worker1;
    bool named = false;
    for (int r = 0; r < 3; ++r) {
      const std::string log = ReadAll(absl::StrCat(dir, "/logs/worker-", r, ".log"));
      named = named || absl::StrContains(log, "parameter agreement failed at step 170: rank 1 held other bits");
    }
    EXPECT_TRUE(named) << stage << ": no worker's log names rank 1 at step 170\n" << worker1;
    EXPECT_TRUE(SameBits(FinalState(dir, 300, 3), want))
        << stage << ": the job that caught the flip did not end with the uninterrupted run's bits";
  }
}

// Islands: the outer state every island holds alike, one island's copy
// flipped by its outer update, is caught in that outer step, before a
// snapshot keeps it or anything is computed from it.
TEST(NumericsE2eTest, ABitFlippedInOneIslandsOuterUpdateIsCaughtInThatOuterStepAndTheJobEndsBitForBit) {
  const std::vector<std::string> run = {"train.total_steps=300", "train.log_every=50", "train.eval_every=0",
                                        "checkpoint.every_steps=0", "checkpoint.memory_every_steps=20",
                                        "collective.diloco.inner_steps=20", "optimizer.adamw={}",
                                        "schedule.base_lr=0.003"};
  auto with_islands = [](std::vector<std::string> argv) {
    argv.insert(argv.end(), {"--islands", "3"});
    return argv;
  };
  const std::string clean = FreshDir("outer_agreement_clean");
  // Two workers an island: an island's snapshots live in its neighbour's
  // memory, so the world restores one rather than starting over.
  Subprocess a(with_islands(LaunchArgv(clean, 6, run)));
  ASSERT_EQ(a.Wait(absl::Seconds(180)), 0) << a.Output();
  const std::vector<float> want = FinalState(clean, 300, 6);
  ASSERT_FALSE(want.empty());

  const std::string dir = FreshDir("outer_agreement_flipped");
  Subprocess b(with_islands(LaunchArgv(dir, 6, run)), {"SHARDLINE_CORRUPT=2:120:outer:27"});
  ASSERT_EQ(b.Wait(absl::Seconds(180)), 0) << b.Output();
  const std::string worker2 = ReadAll(dir + "/logs/worker-2.log");
  EXPECT_TRUE(absl::StrContains(worker2, "SHARDLINE_CORRUPT: rank 2 flipped bit 27 of the outer value")) << worker2;
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/coordinator.log"),
                                "parameter agreement failed at step 120: rank 2 held other bits of the outer "
                                "parameters and momentum after the outer update"))
      << ReadAll(dir + "/logs/coordinator.log");
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/coordinator.log"), "from the workers' memory"))
      << ReadAll(dir + "/logs/coordinator.log");
  EXPECT_TRUE(SameBits(FinalState(dir, 300, 6), want))
      << "the job that caught the flip did not end with the uninterrupted run's bits";
}

// Replay audits: a gradient one worker computed wrong (flipped in its
// backward of an audited step, 99) is caught in that step by the rank that
// recomputed it; with 3 workers a third rank's recomputation names it, with
// 2 the replay does (its result changes). The job then ends with the
// uninterrupted run's bits.
TEST(NumericsE2eTest, AGradientComputedWrongIsCaughtByTheReplayAuditTheWorkerNamedAndTheJobEndsBitForBit) {
  const std::vector<std::string> run = {"train.total_steps=300", "train.log_every=50", "train.eval_every=0",
                                        "checkpoint.every_steps=0", "checkpoint.memory_every_steps=50",
                                        "audit.every_steps=50"};
  for (int workers : {3, 2}) {
    const std::string clean = FreshDir("audit_clean");
    Subprocess a(LaunchArgv(clean, workers, run));
    ASSERT_EQ(a.Wait(absl::Seconds(180)), 0) << a.Output();
    const std::vector<float> want = FinalState(clean, 300, workers);
    ASSERT_FALSE(want.empty());

    const std::string dir = FreshDir("audit_flipped");
    Subprocess b(LaunchArgv(dir, workers, run), {"SHARDLINE_CORRUPT=1:99:gradient:30"});
    ASSERT_EQ(b.Wait(absl::Seconds(180)), 0) << b.Output();
    const std::string coordinator = ReadAll(dir + "/logs/coordinator.log");
    EXPECT_TRUE(absl::StrContains(coordinator, "replay audit of step 99 names rank 1: ")) << workers << "\n"
                                                                                         << coordinator;
    EXPECT_TRUE(absl::StrContains(coordinator, workers == 3 ? "differs from what rank 0 and the arbiter rank 2"
                                                            : "computed the same micro-batch twice"))
        << coordinator;
    EXPECT_TRUE(SameBits(FinalState(dir, 300, workers), want))
        << workers << " workers: the job that caught the wrong gradient did not end with the uninterrupted bits";
  }
}

// A core that keeps computing wrong (every step's gradient on rank 1, a
// mantissa bit: the run does not diverge) is named at every audit; the
// third time the worker leaves the job with a fatal error naming why, so
// the world does not restore and fail without end.
TEST(NumericsE2eTest, AWorkerNamedThreeTimesLeavesTheJobInsteadOfFailingWithoutEnd) {
  const std::string dir = FreshDir("audit_named_thrice");
  Subprocess job(LaunchArgv(dir, 3, {"train.total_steps=300", "train.eval_every=0", "checkpoint.every_steps=0",
                                     "checkpoint.memory_every_steps=0", "audit.every_steps=10"}),
                 {"SHARDLINE_CORRUPT=1:*:gradient:12"});
  EXPECT_EQ(job.Wait(absl::Seconds(180)), 1) << job.Output();
  const std::string coordinator = ReadAll(dir + "/logs/coordinator.log");
  EXPECT_TRUE(absl::StrContains(coordinator, "worker rank 1: this worker was named 3 times as the one that held or "
                                             "computed other bits than its peers"))
      << coordinator;
  EXPECT_TRUE(absl::StrContains(coordinator, "replay audit of step 9 names rank 1")) << coordinator;
}

}  // namespace
}  // namespace shardline
