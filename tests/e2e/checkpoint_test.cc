// Checkpoints as users rely on them: kill workers with SIGKILL mid-run and
// the job resumes from the last committed checkpoint and ends with exactly
// the parameters of an uninterrupted run; a checkpoint written by N workers
// restores onto M.
#include <signal.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "tests/corruption.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"
#include "common/checkpoint/shard_file.h"
#include "coordinator/job_store.h"
#include "proto/coordinator.pb.h"

namespace shardline {
namespace {

const std::string kConfig = DefaultConfig();


const std::vector<std::string> kRun = {"train.total_steps=1600", "checkpoint.every_steps=200",
                                       "train.log_every=200", "train.eval_every=800"};

// Issue 46: `shardline ckpt export` and `ckpt verify` beside a job that saves
// every 5 steps and keeps one checkpoint: retention deletes the step being
// read (5 of 486 reads failed with "No such file or directory" before). Each
// read now sees one committed checkpoint whole or moves on to the newer one
// by itself (the race itself is reproduced without processes in
// full_params_test); here every real read beside the real job succeeds.
TEST(CheckpointTest, ReadersBesideAJobWhoseRetentionDeletesWhatTheyReadAlwaysSucceed) {
  const std::string dir = FreshDir("ckpt_readers");
  Subprocess job(LaunchArgv(dir, 2, {"train.total_steps=100000", "checkpoint.every_steps=5", "checkpoint.keep_last=1",
                                     "train.log_every=500", "train.eval_every=0"}));
  // The first commit (the log's "latest committed checkpoint at step 0" at
  // start is not one).
  for (const absl::Time until = absl::Now() + absl::Seconds(120);
       CommittedSteps(Env::Default(), dir + "/checkpoints").value_or(std::vector<int64_t>{}).empty() &&
       absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(25));
  }
  ASSERT_FALSE(CommittedSteps(Env::Default(), dir + "/checkpoints").value_or(std::vector<int64_t>{}).empty())
      << job.Output();
  int exports = 0, verifies = 0;
  for (int i = 0; i < 30 && job.Poll() == -2; ++i) {
    Subprocess e({BinPath("shardline"), "ckpt", "export", dir, "--out", dir + "-export.safetensors"});
    ASSERT_EQ(e.Wait(absl::Seconds(60)), 0) << e.Output();
    EXPECT_TRUE(absl::StrContains(e.Output(), "exported step ")) << e.Output();
    ++exports;
    Subprocess v({BinPath("shardline"), "ckpt", "verify", dir});
    ASSERT_EQ(v.Wait(absl::Seconds(60)), 0) << v.Output();
    EXPECT_FALSE(absl::StrContains(v.Output(), "FAILED")) << v.Output();
    ++verifies;
  }
  EXPECT_EQ(exports, 30) << "the job ended before the reads: " << job.Output();
  job.Signal(SIGTERM);
  EXPECT_EQ(job.Wait(absl::Seconds(120)), 0) << job.Output();
  EXPECT_EQ(verifies, exports);
}

TEST(CheckpointTest, KilledWorkersAndCoordinatorResumeFromTheLastCommitAndEndBitForBit) {
  const std::string clean = FreshDir("ckpt_clean");
  Subprocess a(LaunchArgv(clean, 2, kRun));
  ASSERT_EQ(a.Wait(absl::Seconds(120)), 0) << a.Output();
  const std::vector<float> want = FinalState(clean, 1600, 2);
  ASSERT_FALSE(want.empty());

  const std::string dir = FreshDir("ckpt_killed");
  Subprocess b(LaunchArgv(dir, 2, kRun, /*max_restarts=*/4));
  const std::string coord_log = dir + "/logs/coordinator.log";
  // Kill rank 1 after the first commit, then rank 0 after a later one.
  for (const auto& [rank, commit] : std::vector<std::pair<int, std::string>>{{1, "step 400 "}, {0, "step 1000 "}}) {
    ASSERT_TRUE(WaitForText(coord_log, "committed checkpoint at " + commit, absl::Seconds(120))) << b.Output();
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(SignalLaunchedWorker(dir, rank, SIGKILL));
  }
  // And the coordinator: it comes back on the same address, recovers its
  // generation and catalog from RocksDB, and the workers reconnect.
  ASSERT_TRUE(WaitForText(coord_log, "committed checkpoint at step 1200 ", absl::Seconds(120))) << b.Output();
  const std::vector<pid_t> coordinator = LaunchedCoordinator(dir);
  ASSERT_EQ(coordinator.size(), 1u);
  // Its port is outside the host's ephemeral range: while it is down, no
  // bind(":0") or outgoing connection on the host can be given it.
  const std::string address = ReadAll(dir + "/coordinator.address");
  const int port = std::atoi(address.substr(address.rfind(':') + 1).c_str());
  int low = 0, high = 0;
  ASSERT_EQ(std::sscanf(ReadAll("/proc/sys/net/ipv4/ip_local_port_range").c_str(), "%d %d", &low, &high), 2);
  EXPECT_TRUE(port < low || port > high) << address << " is in the ephemeral range " << low << "-" << high;
  kill(coordinator[0], SIGKILL);
  ASSERT_EQ(b.Wait(absl::Seconds(180)), 0) << b.Output();
  const std::string log = ReadAll(coord_log);
  EXPECT_TRUE(absl::StrContains(log, "generation 3 formed")) << log;
  EXPECT_TRUE(absl::StrContains(log, "last generation 3, latest committed checkpoint at step 1")) << log;
  EXPECT_TRUE(absl::StrContains(log, "generation 4 formed")) << log;
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/worker-0.log"), "restored step")) << "survivors restore too";
  EXPECT_TRUE(SameBits(FinalState(dir, 1600, 2), want))
      << "parameters and optimizer state after kills differ from the uninterrupted run";

  // The goodput account spans both coordinators: two lost workers and a
  // restart, and the restores themselves. (Steps redone are few with the
  // in-memory snapshots every 100 steps, and the coordinator sees the
  // furthest step only every 100 ms: wasted_progress is tested in
  // tests/coordinator/goodput_test.cc.)
  auto store = JobStore::Open(Env::Default(), dir + "/coordinator_db");
  ASSERT_TRUE(store.ok()) << store.status();
  auto bytes = (*store)->Get("goodput");
  ASSERT_TRUE(bytes.ok() && bytes->has_value());
  coordinator::Goodput g;
  ASSERT_TRUE(g.ParseFromString(**bytes));
  EXPECT_GE(g.disruptions(), 3) << g.DebugString();
  EXPECT_EQ(g.high_water_step(), 1600) << g.DebugString();
  EXPECT_GT(g.goodput_seconds(), 0) << g.DebugString();
  for (const char* kind : {"startup", "recovery", "checkpoint_restore"}) {
    EXPECT_GT(g.badput_seconds().at(kind), 0) << kind << "\n" << g.DebugString();
  }
  EXPECT_TRUE(absl::StrContains(log, "goodput: resuming the account")) << log;
}

TEST(CheckpointTest, CheckpointOfTwoWorkersRestoresOntoThreeAndOntoOne) {
  const std::string two = FreshDir("ckpt_two");
  Subprocess a(LaunchArgv(two, 2, {"train.total_steps=300", "data.global_batch_size=96", "checkpoint.every_steps=300"}));
  ASSERT_EQ(a.Wait(absl::Seconds(120)), 0) << a.Output();
  const std::string three = FreshDir("ckpt_three");
  Subprocess b(LaunchArgv(three, 3, {"train.total_steps=400", "data.global_batch_size=96",
                                 "checkpoint.resume_from=" + two}));
  ASSERT_EQ(b.Wait(absl::Seconds(120)), 0) << b.Output();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(absl::StrContains(ReadAll(absl::StrCat(three, "/logs/worker-", r, ".log")), "joined generation 1"));
  }
  EXPECT_TRUE(absl::StrContains(ReadAll(three + "/logs/worker-0.log"), "restored step 300")) << b.Output();
  const std::vector<std::string> train = SplitLines(three + "/metrics.jsonl", "train");
  ASSERT_FALSE(train.empty());
  EXPECT_GT(JsonField(train.front(), "step"), 300);  // continued, did not start over
  EXPECT_LT(JsonField(train.front(), "loss"), 1.0);  // a fresh start's loss is ~2.3

  // And onto one process.
  const std::string one = FreshDir("ckpt_one");
  Subprocess c({BinPath("shardline"), "train", "--config", kConfig, "--workdir", one, "--set",
                "train.total_steps=350", "--set", "data.global_batch_size=96", "--set",
                "checkpoint.resume_from=" + two});
  ASSERT_EQ(c.Wait(absl::Seconds(120)), 0) << c.Output();
  EXPECT_TRUE(absl::StrContains(c.Output(), "restored step 300")) << c.Output();
}


TEST(CheckpointTest, CkptToolsListVerifyAndExport) {
  const std::string dir = FreshDir("ckpt_tools");
  Subprocess run(LaunchArgv(dir, 2, {"train.total_steps=400", "checkpoint.every_steps=200"}));
  ASSERT_EQ(run.Wait(absl::Seconds(120)), 0) << run.Output();

  Subprocess list({BinPath("shardline"), "ckpt", "list", dir});
  ASSERT_EQ(list.Wait(absl::Seconds(30)), 0) << list.Output();
  EXPECT_TRUE(absl::StrContains(list.Output(), "200                  committed   2/2")) << list.Output();
  EXPECT_TRUE(absl::StrContains(list.Output(), "400                  committed   2/2")) << list.Output();

  Subprocess verify({BinPath("shardline"), "ckpt", "verify", dir});
  ASSERT_EQ(verify.Wait(absl::Seconds(30)), 0) << verify.Output();
  EXPECT_TRUE(absl::StrContains(verify.Output(), "step 400: OK (2 shards)")) << verify.Output();

  // Export: the same parameters give the same bytes, laid out as safetensors.
  std::vector<std::string> exported;
  for (const char* name : {"/a.safetensors", "/b.safetensors"}) {
    Subprocess e({BinPath("shardline"), "ckpt", "export", dir, "--step", "latest", "--out", dir + name});
    ASSERT_EQ(e.Wait(absl::Seconds(30)), 0) << e.Output();
    exported.push_back(ReadAll(dir + name));
  }
  ASSERT_EQ(exported[0], exported[1]);
  const std::string& st = exported[0];
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(static_cast<unsigned char>(st[static_cast<size_t>(i)])) << (8 * i);
  const std::string header = st.substr(8, header_len);
  EXPECT_TRUE(absl::StrContains(header, "\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[784,256],\"data_offsets\":[0,802816]}"))
      << header;
  ASSERT_EQ(st.size(), 8 + header_len + 235146 * 4);
  // Its first weights are rank 0's shard of the final checkpoint.
  absl::StatusOr<ShardContents> shard0 =
      ReadShard(Env::Default(), StepDir(dir + "/checkpoints", 400) + "/" + ShardFileName(0, 2));
  ASSERT_TRUE(shard0.ok());
  EXPECT_EQ(std::memcmp(st.data() + 8 + header_len, shard0->buffers[0].values.data(), 1000 * sizeof(float)), 0);

  // init_from: a fresh run starts from the exported parameters.
  const std::string fresh = FreshDir("ckpt_init_from");
  Subprocess init({BinPath("shardline"), "train", "--config", kConfig, "--workdir", fresh, "--set",
                   "train.total_steps=1", "--set", "schedule.warmup_steps=0", "--set", "schedule.base_lr=0.0001",
                   "--set", "checkpoint.init_from=" + dir + "/a.safetensors"});
  ASSERT_EQ(init.Wait(absl::Seconds(60)), 0) << init.Output();
  EXPECT_TRUE(absl::StrContains(init.Output(), "initialised parameters from")) << init.Output();
  EXPECT_GT(JsonField(SplitLines(fresh + "/metrics.jsonl", "eval").back(), "accuracy"), 0.8);
  Subprocess wrong({BinPath("shardline"), "train", "--config", kConfig, "--workdir", FreshDir("ckpt_init_bad"),
                    "--set", "model.mlp.hidden_sizes=64", "--set", "checkpoint.init_from=" + dir + "/a.safetensors"});
  EXPECT_EQ(wrong.Wait(absl::Seconds(60)), 1);
  EXPECT_TRUE(absl::StrContains(wrong.Output(), "a.safetensors")) << wrong.Output();

  // A flipped byte fails verification, naming the step and the file.
  const std::string victim = StepDir(dir + "/checkpoints", 200) + "/" + ShardFileName(1, 2);
  ASSERT_TRUE(FlipByte(victim, *Env::Default()->GetFileSize(victim) / 2, 0x04).ok());
  Subprocess bad({BinPath("shardline"), "ckpt", "verify", dir});
  EXPECT_EQ(bad.Wait(absl::Seconds(30)), 1) << bad.Output();
  EXPECT_TRUE(absl::StrContains(bad.Output(), "step 200: FAILED")) << bad.Output();
  EXPECT_TRUE(absl::StrContains(bad.Output(), victim)) << bad.Output();
  EXPECT_TRUE(absl::StrContains(bad.Output(), "step 400: OK")) << bad.Output();
}


TEST(CheckpointTest, CorruptLatestCheckpointIsMarkedBadAndTheJobFallsBack) {
  const std::string dir = FreshDir("ckpt_fallback");
  Subprocess first(LaunchArgv(dir, 2, {"train.total_steps=400", "checkpoint.every_steps=200"}));
  ASSERT_EQ(first.Wait(absl::Seconds(120)), 0) << first.Output();
  const std::string victim = StepDir(dir + "/checkpoints", 400) + "/" + ShardFileName(1, 2);
  ASSERT_TRUE(FlipByte(victim, -100, 0x20).ok());

  // Run longer in the same workdir: it resumes from 400, finds it corrupt,
  // falls back to 200 and finishes.
  Subprocess second(LaunchArgv(dir, 2, {"train.total_steps=600", "checkpoint.every_steps=200"}));
  ASSERT_EQ(second.Wait(absl::Seconds(120)), 0) << second.Output();
  const std::string log = ReadAll(dir + "/logs/coordinator.log");
  EXPECT_TRUE(absl::StrContains(log, "checkpoint at step 400 failed verification")) << log;
  EXPECT_TRUE(absl::StrContains(log, "falling back to step 200")) << log;
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/worker-0.log"), "restored step 200")) << second.Output();
  EXPECT_EQ(JsonField(SplitLines(dir + "/metrics.jsonl", "eval").back(), "step"), 600);
  // Step 400 was saved again, good this time.
  Subprocess verify({BinPath("shardline"), "ckpt", "verify", dir});
  EXPECT_EQ(verify.Wait(absl::Seconds(30)), 0) << verify.Output();
}


TEST(CheckpointTest, EverySecondsPolicyIsDecidedByTheCoordinatorAndCommitted) {
  const std::string dir = FreshDir("ckpt_seconds");
  Subprocess run(LaunchArgv(dir, 2, {"train.total_steps=4000", "checkpoint.every_seconds=0.5",
                                 "checkpoint.keep_last=0", "checkpoint.save_final=false"}));
  ASSERT_EQ(run.Wait(absl::Seconds(120)), 0) << run.Output();
  const std::string log = ReadAll(dir + "/logs/coordinator.log");
  EXPECT_TRUE(absl::StrContains(log, "checkpoint.every_seconds: every worker saves after step")) << log;
  const std::vector<int64_t> steps = *CommittedSteps(Env::Default(), dir + "/checkpoints");
  EXPECT_GE(steps.size(), 1u) << log;
  Subprocess verify({BinPath("shardline"), "ckpt", "verify", dir});
  EXPECT_EQ(verify.Wait(absl::Seconds(30)), 0) << verify.Output();
}


TEST(CheckpointTest, BestSeriesKeepsTheBestEvalCheckpointPastKeepLast) {
  const std::string dir = FreshDir("ckpt_best");
  // "Best" = highest eval loss, so the best is an early step that only the
  // series keeps (keep_last is 1).
  Subprocess run(LaunchArgv(dir, 2, {"train.total_steps=1200", "train.eval_every=100", "checkpoint.every_steps=300",
                                 "checkpoint.keep_last=1", "checkpoint.best_metric=loss", "checkpoint.best_mode=max"}));
  ASSERT_EQ(run.Wait(absl::Seconds(120)), 0) << run.Output();
  int64_t want = -1;
  double top = -1;
  for (const std::string& l : SplitLines(dir + "/metrics.jsonl", "eval")) {
    if (JsonField(l, "loss") > top) {
      top = JsonField(l, "loss");
      want = static_cast<int64_t>(JsonField(l, "step"));
    }
  }
  EXPECT_LT(want, 1200);
  const std::string root = dir + "/checkpoints";
  EXPECT_EQ(ReadBestStep(Env::Default(), root), want);
  const std::vector<int64_t> steps = *CommittedSteps(Env::Default(), root);
  EXPECT_NE(std::find(steps.begin(), steps.end(), want), steps.end()) << "the best is kept";
  EXPECT_NE(std::find(steps.begin(), steps.end(), 1200), steps.end()) << "and the last one";
  EXPECT_LE(steps.size(), 2u);
  Subprocess list({BinPath("shardline"), "ckpt", "list", dir});
  ASSERT_EQ(list.Wait(absl::Seconds(30)), 0);
  EXPECT_TRUE(absl::StrContains(list.Output(), "best (")) << list.Output();
}


// Crashes at the two windows where a half-done save or commit could leak:
// a worker dies with its shard written but not renamed (the step is never
// committed; the world resumes from the previous commit), and the
// coordinator dies between its RocksDB commit record and the COMMITTED file
// (the restarted coordinator finishes the commit). Either way the job ends
// with exactly the uninterrupted run's parameters.
TEST(CheckpointTest, CrashesInsideASaveAndInsideACommitLoseNothing) {
  const std::vector<std::string> run = {"train.total_steps=1000", "checkpoint.every_steps=200"};
  const std::string clean = FreshDir("ckpt_crash_clean");
  Subprocess a(LaunchArgv(clean, 2, run));
  ASSERT_EQ(a.Wait(absl::Seconds(120)), 0) << a.Output();
  const std::vector<float> want = FinalState(clean, 1000, 2);

  struct Case {
    std::string point;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{{"before_shard_rename:400", "killing myself at before_shard_rename"},
                                         {"after_commit_record:600", "finishing the interrupted commit of step 600"}}) {
    SCOPED_TRACE(c.point);
    const std::string dir = FreshDir("ckpt_crash_" + c.point.substr(0, c.point.find(':')));
    Subprocess b(LaunchArgv(dir, 2, run, /*max_restarts=*/2),
                 {"SHARDLINE_CRASH_AT=" + c.point + ":" + dir + "/crash-marker"});
    ASSERT_EQ(b.Wait(absl::Seconds(120)), 0) << b.Output();
    EXPECT_TRUE(absl::StrContains(b.Output(), c.expect)) << b.Output();
    EXPECT_TRUE(SameBits(FinalState(dir, 1000, 2), want)) << c.point;
    Subprocess verify({BinPath("shardline"), "ckpt", "verify", dir});
    EXPECT_EQ(verify.Wait(absl::Seconds(30)), 0) << verify.Output();
  }
}

}  // namespace
}  // namespace shardline
