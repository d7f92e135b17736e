#include "coordinator/job.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "common/job/config.h"
#include "common/platform/env_wrapper.h"
#include "common/platform/mutex.h"
#include "tests/coordinator/register_request.h"
#include "common/topology/peer_set.h"
#include "common/net/rpc_auth.h"
#include "tests/util/fault_env.h"
#include "tests/util/metric_lines.h"

namespace shardline {
namespace {

using Lines = MetricLines;

class JobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.UseManualClock();
    // ctest runs test cases in parallel processes: one database each.
    dir_ = ::testing::TempDir() + "/job_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf '" + dir_ + "'").c_str());
    store_ = *JobStore::Open(Env::Default(), dir_);
    config_ = *ParseConfigText("model { mlp { hidden_sizes: 8 } } train { total_steps: 100 }", "test");
    Restart("");
  }

  // A new Job on the same store, as a restarted coordinator would have.
  void Restart(const std::string& checkpoint_root, bool stop_requested = false, bool disk_thread = false) {
    job_.reset();
    CoordinatorOptions o;
    o.stop_requested = stop_requested;
    o.disk_thread = disk_thread;
    o.world_size = 2;
    o.heartbeat_timeout = absl::Milliseconds(300);
    o.env = &env_;
    o.checkpoint_root = checkpoint_root;
    job_ = std::make_unique<Job>(config_, store_.get(), &lines_, o);
    ASSERT_TRUE(job_->Init().ok());
  }

  // Registers both ranks concurrently; returns their responses. held[r]:
  // the snapshot shards rank r says it holds, as (step, shard) of a world of 2.
  std::vector<coordinator::RegisterResponse> FormWorld(
      uint64_t inc0, uint64_t inc1, uint64_t previous = 0,
      std::vector<std::vector<std::pair<int64_t, int>>> held = {{}, {}}) {
    std::vector<coordinator::RegisterRequest> reqs = {RegisterReq(0, inc0, previous), RegisterReq(1, inc1, previous)};
    for (int r = 0; r < 2; ++r) {
      for (const auto& [step, shard] : held[static_cast<size_t>(r)]) {
        AddHeld(&reqs[static_cast<size_t>(r)], step, 2, shard);
      }
    }
    std::vector<coordinator::RegisterResponse> out(2);
    std::thread t([&] { out[1] = *job_->Register(reqs[1], [] { return false; }); });
    out[0] = *job_->Register(reqs[0], [] { return false; });
    t.join();
    for (int r = 0; r < 2; ++r) secrets_[r] = out[r].member_secret();
    return out;
  }

  // A report as rank `rank` of the last world formed would send it.
  coordinator::WorkerReport Report(int rank, uint64_t gen, int64_t steps) {
    coordinator::WorkerReport r;
    r.set_member_secret(secrets_[rank]);
    r.set_rank(rank);
    r.set_generation(gen);
    r.set_steps_done(steps);
    r.set_total_steps(100);
    return r;
  }

  // Rank `rank`'s shard of `step` (of a world of 2), written under `root`
  // as the worker would have, and the report of it.
  coordinator::SavedShard WrittenShard(const std::string& root, int64_t step, int rank) {
    EXPECT_TRUE(env_.CreateDirs(StepDir(root, step)).ok());
    coordinator::SavedShard s;
    s.set_step(step);
    s.set_world_size(2);
    s.set_file(ShardFileName(rank, 2));
    s.set_size(4);
    EXPECT_TRUE(WriteFileAtomically(&env_, StepDir(root, step) + "/" + s.file(), "abcd").ok());
    return s;
  }

  FaultEnv env_;  // a clock that moves only by Advance (SetUp), a disk that can stall
  std::string dir_;
  std::unique_ptr<JobStore> store_;
  config::JobConfig config_;
  Lines lines_;
  std::unique_ptr<Job> job_;
  std::map<int, std::string> secrets_;
};

TEST_F(JobTest, EachAnswerListsItsDataPlanePeersWithTheirTagsAndNoOthers) {
  const int n = 12;
  job_.reset();
  CoordinatorOptions o;
  o.world_size = n;
  o.env = &env_;
  job_ = std::make_unique<Job>(config_, store_.get(), &lines_, o);
  ASSERT_TRUE(job_->Init().ok());
  std::vector<coordinator::RegisterResponse> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = *job_->Register(RegisterReq(r, 100 + r), [] { return false; }); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    const coordinator::RegisterResponse& w = out[static_cast<size_t>(r)];
    ASSERT_EQ(w.rank(), r);
    std::vector<int> want = DataPlanePeers(r, n);
    want.insert(std::lower_bound(want.begin(), want.end(), r), r);
    EXPECT_EQ(std::vector<int>(w.peer_ranks().begin(), w.peer_ranks().end()), want) << "rank " << r;
    EXPECT_LT(w.peer_ranks_size(), n) << "at N=12 a rank talks to fewer than all";
    ASSERT_EQ(w.peers_size(), w.peer_ranks_size());
    ASSERT_EQ(w.peer_tags_size(), w.peer_ranks_size());
    for (int i = 0; i < w.peer_ranks_size(); ++i) {
      const int s = w.peer_ranks(i);
      EXPECT_EQ(w.peers(i), absl::StrCat("127.0.0.1:", 1100 + s));
      EXPECT_EQ(w.peer_tags(i), MemberTag(out[static_cast<size_t>(s)].member_secret(), w.generation(), r));
    }
  }
}

TEST_F(JobTest, CheckpointNowNeedsACheckpointDirectoryAndARunningWorld) {
  EXPECT_TRUE(absl::IsFailedPrecondition(job_->RequestCheckpoint())) << "no checkpoint directory";
  Restart(dir_ + "/ckpt");
  EXPECT_TRUE(absl::IsFailedPrecondition(job_->RequestCheckpoint())) << "no world yet";
  FormWorld(1, 2);
  ASSERT_TRUE(job_->RequestCheckpoint().ok());
  coordinator::CoordinatorCommand none;
  bool end = false;
  const std::optional<coordinator::CoordinatorCommand> c = job_->NextCommand(0, 1, none, absl::ZeroDuration(), &end);
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(c->checkpoint_at(), 0) << "every worker is told the step";
}

TEST_F(JobTest, WorldFormsWhenAllRanksRegisterAndGetsTheConfig) {
  const auto world = FormWorld(1, 2);
  EXPECT_EQ(world[0].generation(), 1u);
  EXPECT_EQ(world[0].world_size(), 2);
  EXPECT_EQ(world[1].rank(), 1);
  ASSERT_EQ(world[0].peers_size(), 2);
  EXPECT_EQ(world[0].peers(1), "127.0.0.1:1002");
  EXPECT_TRUE(absl::StrContains(world[1].config_text(), "hidden_sizes: 8"));
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::RUNNING);
  // The generation is durable.
  EXPECT_EQ(**store_->Get("generation"), "1");
}

TEST_F(JobTest, LiveRankCannotBeClaimedTwice) {
  FormWorld(1, 2);
  absl::StatusOr<coordinator::RegisterResponse> r = job_->Register(RegisterReq(1, 99), [] { return false; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "rank 1 is held by a live worker")) << r.status();
  // The refusal reveals no member's address.
  EXPECT_FALSE(absl::StrContains(r.status().message(), "127.0.0.1")) << r.status();
  r = job_->Register(RegisterReq(-1, 99), [] { return false; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
}

// The job's numerics fingerprint: the first reported is kept across a
// coordinator restart, kernels text escaped; under RELAXED the other ones
// are recorded up to 100 and then only admitted; under STRICT another one
// fails the job.
TEST_F(JobTest, NumericsAreRecordedKeptAcrossARestartBoundedAndRefusedUnderStrict) {
  config_.mutable_runtime()->set_numerics(config::RELAXED);
  Restart("");
  FormWorld(1, 2);
  auto with = [&](int rank, uint64_t fingerprint, const std::string& kernels) {
    coordinator::WorkerReport r = Report(rank, 1, 1);
    r.mutable_numerics()->set_fingerprint(fingerprint);
    r.mutable_numerics()->set_kernels(kernels);
    return r;
  };
  ASSERT_TRUE(job_->Report(with(0, 7, "OpenBLAS Haswell kernels\nforged line")).ok());
  EXPECT_EQ(job_->Snapshot().numerics().numerics().fingerprint(), 7u);
  EXPECT_EQ(job_->Snapshot().numerics().numerics().kernels().find('\n'), std::string::npos) << "not escaped";
  for (uint64_t f = 100; f < 250; ++f) ASSERT_TRUE(job_->Report(with(1, f, "other")).ok());
  EXPECT_EQ(job_->Snapshot().numerics_changes_size(), 100) << "the history keeps the first 100";
  EXPECT_EQ(job_->Snapshot().numerics_changes(0).numerics().fingerprint(), 100u);
  EXPECT_EQ(job_->final_status().code(), absl::StatusCode::kOk);

  config_.mutable_runtime()->set_numerics(config::STRICT);
  Restart("");  // the same store: the job's fingerprint is kept
  EXPECT_EQ(job_->Snapshot().numerics().numerics().fingerprint(), 7u);
  FormWorld(3, 4, /*previous=*/1);
  const uint64_t gen = job_->Snapshot().generation();
  coordinator::WorkerReport same = with(0, 7, "x");
  same.set_generation(gen);
  ASSERT_TRUE(job_->Report(same).ok());
  EXPECT_TRUE(job_->final_status().ok());
  coordinator::WorkerReport other = with(1, 9, "OpenBLAS Sandybridge kernels");
  other.set_generation(gen);
  ASSERT_TRUE(job_->Report(other).ok());
  EXPECT_EQ(job_->final_status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(job_->final_status().message()).find("OpenBLAS Sandybridge kernels"), std::string::npos)
      << job_->final_status();
}

TEST_F(JobTest, GlobalStepIsTheSlowestWorkerAndMetricLinesAreKept) {
  FormWorld(1, 2);
  coordinator::WorkerReport r0 = Report(0, 1, 40);
  metrics::MetricRecord* m = r0.add_metrics();
  m->set_step(40);
  m->set_split(metrics::MetricRecord::train);
  m->set_loss(0.5f);
  ASSERT_TRUE(job_->Report(r0).ok());
  ASSERT_TRUE(job_->Report(Report(1, 1, 38)).ok());
  EXPECT_EQ(job_->Snapshot().global_step(), 38);
  ASSERT_EQ(lines_.lines.size(), 1u);
  EXPECT_EQ(lines_.lines[0], "{\"step\":40,\"split\":\"train\",\"loss\":0.5}");
  EXPECT_EQ(job_->Snapshot().last_train().loss(), 0.5f);
  EXPECT_FALSE(job_->Report(Report(0, 7, 1)).ok());  // a generation that is not running
}

TEST_F(JobTest, LostWorkerBreaksTheWorldAndSurvivorsFormTheNextGeneration) {
  FormWorld(1, 2);
  ASSERT_TRUE(job_->Report(Report(0, 1, 5)).ok());
  ASSERT_TRUE(job_->Report(Report(1, 1, 5)).ok());
  job_->StreamEnded(1, 1, /*broken=*/true);
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
  EXPECT_EQ(job_->Snapshot().worker_losses(), 1);
  // The survivor's stream is told the new generation, then ends.
  bool end = false;
  auto c = job_->NextCommand(0, 1, coordinator::CoordinatorCommand(), absl::Seconds(1), &end);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->new_generation(), 2u);
  EXPECT_TRUE(end);
  // The survivor and a restarted rank 1 form generation 2.
  const auto world = FormWorld(1, 3, /*previous=*/1);
  EXPECT_EQ(world[0].generation(), 2u);
  EXPECT_EQ(world[1].peers(1), "127.0.0.1:1003");
}

// The next world restores the newest step whose every shard a member holds
// in memory, each shard from its own rank when it holds it; a shard held by
// no one, or a step reported bad, is passed over for an older one or disk.
TEST_F(JobTest, TheNextWorldRestoresTheNewestFullyHeldSnapshotFromMemory) {
  FormWorld(1, 2);
  job_->StreamEnded(1, 1, /*broken=*/true);
  // The survivor (rank 0) holds shards 0 and 1 of steps 200 and 300; the
  // replacement nothing; a stray claim of step 400 covers only shard 0.
  auto world = FormWorld(1, 3, /*previous=*/1, {{{300, 0}, {300, 1}, {200, 0}, {200, 1}, {400, 0}}, {}});
  EXPECT_EQ(world[0].memory_step(), 300);
  EXPECT_EQ(world[1].start_step(), 300);
  EXPECT_TRUE(world[1].restore_dir().empty());
  EXPECT_EQ(std::vector<int>(world[1].memory_sources().begin(), world[1].memory_sources().end()),
            (std::vector<int>{0, 0}));  // shard 1 comes from rank 0
  EXPECT_EQ(job_->Snapshot().restored_from(), "memory");
  EXPECT_EQ(job_->Snapshot().memory_recoveries(), 1);

  // Rank 1 could not restore it: the step is never handed out again.
  coordinator::WorkerReport bad = Report(1, 2, 0);
  bad.set_bad_memory_step(300);
  ASSERT_TRUE(job_->Report(bad).ok());
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
  world = FormWorld(1, 3, /*previous=*/2, {{{300, 0}, {300, 1}, {200, 0}, {200, 1}}, {{300, 1}, {200, 1}}});
  EXPECT_EQ(world[0].memory_step(), 200);
  EXPECT_EQ(std::vector<int>(world[0].memory_sources().begin(), world[0].memory_sources().end()),
            (std::vector<int>{0, 1}));  // each holds its own
  job_->StreamEnded(0, 3, /*broken=*/true);
  // Nothing held: from scratch (no checkpoint on disk here).
  world = FormWorld(4, 3, /*previous=*/3);
  EXPECT_EQ(world[0].memory_step(), 0);
  EXPECT_EQ(world[0].start_step(), 0);
}

TEST_F(JobTest, SilentWorkerIsLostAfterTheHeartbeatTimeout) {
  // On the fake clock: no sleeping, and the deadline is exact.
  FormWorld(1, 2);
  env_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(job_->Report(Report(0, 1, 1)).ok());
  job_->CheckHeartbeats();
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::RUNNING);
  env_.Advance(absl::Milliseconds(100));  // rank 1 silent for exactly the 300 ms timeout
  job_->CheckHeartbeats();
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::RUNNING);
  env_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(job_->Report(Report(0, 1, 2)).ok());
  job_->CheckHeartbeats();  // rank 1 silent for 301 ms > 300 ms
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
  EXPECT_EQ(job_->Snapshot().worker_losses(), 1);
}

TEST_F(JobTest, NoWorkerIsLostWhileTheClockStandsStill) {
  FormWorld(1, 2);
  for (int i = 0; i < 100; ++i) job_->CheckHeartbeats();
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::RUNNING);
}

TEST_F(JobTest, SilenceWhileTheCoordinatorItselfDidNotRunLosesNoWorker) {
  FormWorld(1, 2);
  env_.Advance(absl::Seconds(8));  // paused: nothing read, nothing checked
  job_->RestartHeartbeatDeadlines(absl::Seconds(8));
  job_->CheckHeartbeats();
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::RUNNING);
  env_.Advance(absl::Milliseconds(301));  // silent past the deadline after the pause: lost
  job_->CheckHeartbeats();
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
}

TEST_F(JobTest, AFinishedWorkerHearsTheJobsEndOnlyWhenEveryWorkerFinished) {
  FormWorld(1, 2);
  coordinator::WorkerReport done0 = Report(0, 1, 100);
  done0.set_finished(true);
  ASSERT_TRUE(job_->Report(done0).ok());
  bool end = false;
  std::optional<coordinator::CoordinatorCommand> c =
      job_->NextCommand(0, 1, coordinator::CoordinatorCommand(), absl::Milliseconds(10), &end);
  EXPECT_FALSE(end) << "the job is not over while rank 1 trains";
  EXPECT_TRUE(job_->AwaitsJobEnd(0, 1));
  EXPECT_FALSE(job_->AwaitsJobEnd(1, 1));
  // A finished worker that gave up waiting registers again: that waits for
  // the job's end too, and breaks nothing.
  absl::StatusOr<coordinator::RegisterResponse> again;
  std::thread waiting([&] { again = job_->Register(RegisterReq(0, 1, /*previous=*/1), [] { return false; }); });
  coordinator::WorkerReport done1 = Report(1, 1, 100);
  done1.set_finished(true);
  ASSERT_TRUE(job_->Report(done1).ok());
  waiting.join();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->job_over());
  EXPECT_EQ(job_->Snapshot().worker_losses(), 0);
  c = job_->NextCommand(0, 1, coordinator::CoordinatorCommand(), absl::Seconds(1), &end);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->job_done());
  EXPECT_TRUE(end);
}

// Issue 62: a flood of connections made 7 commits fail with "Too many open
// files". A commit that runs out of descriptors is tried again (bounded),
// and one that keeps failing still counts as failed, never waits forever.
TEST_F(JobTest, ACommitOutOfDescriptorsIsTriedAgainABoundedNumberOfTimes) {
  const std::string root = dir_ + "_emfile";
  std::system(("rm -rf '" + root + "'").c_str());
  Restart(root);
  FormWorld(1, 2);
  auto save = [&](int64_t step) {
    for (int rank : {0, 1}) {
      coordinator::WorkerReport r = Report(rank, 1, step);
      *r.add_saved() = WrittenShard(root, step, rank);
      ASSERT_TRUE(job_->Report(r).ok());
    }
    job_->FlushDisk();
  };
  env_.RunOutOfDescriptors(3);
  save(10);
  EXPECT_TRUE(env_.FileExists(StepDir(root, 10) + "/COMMITTED")) << "committed on a later try";
  env_.RunOutOfDescriptors(1000);
  save(20);
  EXPECT_FALSE(env_.FileExists(StepDir(root, 20) + "/COMMITTED"));
  EXPECT_GT(job_->Snapshot().checkpoint_failures(), 0) << "counted as failed after its tries";
  env_.RunOutOfDescriptors(0);
}

TEST_F(JobTest, AFinishedReportResentWithARegistrationCommitsTheFinalCheckpoint) {
  const std::string root = dir_ + "_ckpt";
  std::system(("rm -rf '" + root + "'").c_str());
  Restart(root);
  FormWorld(1, 2);
  auto finished = [&](int rank) {
    coordinator::WorkerReport r = Report(rank, 1, 100);
    r.set_finished(true);
    *r.add_saved() = WrittenShard(root, 100, rank);
    return r;
  };
  // Both streams were lost with their last reports (the world broke first),
  // and both workers register again with them.
  job_->StreamEnded(0, 1, /*broken=*/true);
  ASSERT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
  std::vector<absl::StatusOr<coordinator::RegisterResponse>> worlds(2);
  std::thread t([&] {
    coordinator::RegisterRequest req = RegisterReq(1, 2, 1);
    *req.mutable_finished_report() = finished(1);
    worlds[1] = job_->Register(req, [] { return false; });
  });
  coordinator::RegisterRequest req = RegisterReq(0, 1, 1);
  *req.mutable_finished_report() = finished(0);
  worlds[0] = job_->Register(req, [] { return false; });
  t.join();
  EXPECT_TRUE(env_.FileExists(StepDir(root, 100) + "/COMMITTED"));
  ASSERT_TRUE(worlds[0].ok()) << worlds[0].status();
  EXPECT_EQ(worlds[0]->generation(), 2u);
  EXPECT_EQ(worlds[0]->start_step(), 100) << "the next world redoes steps it need not";

  // A resent report that is not the member's own changes nothing.
  coordinator::RegisterRequest forged = RegisterReq(1, 3, 2);
  *forged.mutable_finished_report() = Report(1, 2, 100);
  forged.mutable_finished_report()->set_finished(true);
  forged.mutable_finished_report()->set_member_secret("not the secret");
  (void)job_->Register(forged, [] { return true; });
  EXPECT_FALSE(job_->AwaitsJobEnd(1, 2)) << "a forged finished report was taken";
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::RUNNING);
}

TEST_F(JobTest, ACommitOnAStalledDiskHoldsUpNoHeartbeat) {
  const std::string root = dir_ + "_ckpt";
  std::system(("rm -rf '" + root + "'").c_str());
  Restart(root);
  FormWorld(1, 2);
  // Both shards of step 10 exist; rank 0's is reported first.
  auto shard = [&](int rank) { return WrittenShard(root, 10, rank); };
  coordinator::WorkerReport r0 = Report(0, 1, 10);
  *r0.add_saved() = shard(0);
  ASSERT_TRUE(job_->Report(r0).ok());

  // Rank 1's report completes the step; its commit stalls on the disk.
  env_.StallDisk();
  coordinator::WorkerReport r1 = Report(1, 1, 10);
  *r1.add_saved() = shard(1);
  std::thread committer([&] { EXPECT_TRUE(job_->Report(r1).ok()); });
  env_.stalled().WaitForNotification();

  // Meanwhile heartbeats, the deadline check and status are all served. (A
  // bound, not a timing: if the lock were held this would never finish.)
  Notification served;
  std::thread heartbeats([&] {
    for (int i = 0; i < 5; ++i) {
      env_.Advance(absl::Milliseconds(200));
      EXPECT_TRUE(job_->Report(Report(0, 1, 11 + i)).ok());
      EXPECT_TRUE(job_->Report(Report(1, 1, 11 + i)).ok());
      job_->CheckHeartbeats();
    }
    served.Notify();
  });
  const bool ok = served.WaitForNotificationWithTimeout(absl::Seconds(60));
  EXPECT_TRUE(ok) << "heartbeats blocked behind a commit stalled on disk";
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::RUNNING);
  EXPECT_EQ(job_->Snapshot().last_checkpoint_step(), 0);
  env_.ReleaseDisk();
  committer.join();
  heartbeats.join();
  EXPECT_EQ(job_->Snapshot().last_checkpoint_step(), 10);
  EXPECT_TRUE(env_.FileExists(StepDir(root, 10) + "/COMMITTED"));
}

// With the coordinator's disk thread, the thread that hands in the report
// completing a save (a gRPC polling thread, in the coordinator) does not
// wait for the commit at all: it is queued. The report returns, and the
// other rank's heartbeats are taken, while the disk is stalled.
TEST_F(JobTest, WithTheDiskThreadTheReportThatCompletesASaveDoesNotWaitForTheDisk) {
  const std::string root = dir_ + "_ckpt";
  std::system(("rm -rf '" + root + "'").c_str());
  Restart(root, /*stop_requested=*/false, /*disk_thread=*/true);
  FormWorld(1, 2);
  job_->FlushDisk();
  coordinator::WorkerReport r0 = Report(0, 1, 10);
  *r0.add_saved() = WrittenShard(root, 10, 0);
  ASSERT_TRUE(job_->Report(r0).ok());

  env_.StallDisk();
  coordinator::WorkerReport r1 = Report(1, 1, 10);
  *r1.add_saved() = WrittenShard(root, 10, 1);
  Notification returned;
  std::thread rpc([&] {
    EXPECT_TRUE(job_->Report(r1).ok());
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(job_->Report(Report(0, 1, 11 + i)).ok());
    returned.Notify();
  });
  env_.stalled().WaitForNotification();  // the commit reached the disk, on the disk thread
  // A bound, not a timing: were the commit on this path, it would never return.
  EXPECT_TRUE(returned.WaitForNotificationWithTimeout(absl::Seconds(60))) << "a report waited on the disk";
  EXPECT_EQ(job_->Snapshot().last_checkpoint_step(), 0);
  env_.ReleaseDisk();
  rpc.join();
  job_->FlushDisk();
  EXPECT_EQ(job_->Snapshot().last_checkpoint_step(), 10);
  EXPECT_TRUE(env_.FileExists(StepDir(root, 10) + "/COMMITTED"));
}

// The final checkpoint's commit is decided with the last finished report;
// a persist from another thread (the deadline check, a registration) used
// to record the job's end while that commit still waited on the disk - a
// coordinator killed then lost the final checkpoint (found by
// CoordinatorFaultTest at after_finished_record). The end now waits for
// every commit decided before it.
TEST_F(JobTest, TheJobsEndIsRecordedOnlyAfterTheFinalCommit) {
  const std::string root = dir_ + "_ckpt";
  std::system(("rm -rf '" + root + "'").c_str());
  Restart(root);
  FormWorld(1, 2);
  coordinator::WorkerReport r0 = Report(0, 1, 100);
  *r0.add_saved() = WrittenShard(root, 100, 0);
  r0.set_finished(true);
  ASSERT_TRUE(job_->Report(r0).ok());

  env_.StallDisk();
  coordinator::WorkerReport r1 = Report(1, 1, 100);
  *r1.add_saved() = WrittenShard(root, 100, 1);
  r1.set_finished(true);
  std::thread last([&] { EXPECT_TRUE(job_->Report(r1).ok()); });
  env_.stalled().WaitForNotification();  // the final commit waits on the disk
  job_->CheckHeartbeats();                // persists from another thread
  EXPECT_FALSE(store_->Get("finished")->has_value()) << "the end recorded before the final commit";
  EXPECT_FALSE(job_->AwaitEnd(absl::Milliseconds(1))) << "workers told the job is over before its final commit";
  env_.ReleaseDisk();
  last.join();
  EXPECT_TRUE(env_.FileExists(StepDir(root, 100) + "/COMMITTED"));
  EXPECT_TRUE(store_->Get("finished")->has_value());
  EXPECT_TRUE(job_->AwaitEnd(absl::Seconds(5)));
}

TEST_F(JobTest, StopIsAheadOfEveryWorkerAndTheJobEndsWhenAllFinish) {
  FormWorld(1, 2);
  ASSERT_TRUE(job_->Report(Report(0, 1, 30)).ok());
  ASSERT_TRUE(job_->Report(Report(1, 1, 31)).ok());
  job_->RequestStop("test");
  bool end = false;
  auto c = job_->NextCommand(0, 1, coordinator::CoordinatorCommand(), absl::Seconds(1), &end);
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(c->stop_at(), 31);
  EXPECT_FALSE(end);
  for (int r : {0, 1}) {
    coordinator::WorkerReport f = Report(r, 1, c->stop_at());
    f.set_finished(true);
    ASSERT_TRUE(job_->Report(f).ok());
  }
  EXPECT_TRUE(job_->AwaitEnd(absl::Seconds(1)));
  EXPECT_TRUE(job_->final_status().ok());
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::DONE);
  absl::StatusOr<coordinator::RegisterResponse> late = job_->Register(RegisterReq(0, 5), [] { return false; });
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(late->job_over());
  EXPECT_EQ(late->job_error(), "");
  // Stopped, not finished (step 33 of 100): the same job run again resumes.
  EXPECT_FALSE(store_->Get("finished")->has_value()) << "a graceful stop recorded as the job's end";
  Restart("");
  EXPECT_EQ(job_->FinishedAtStart(), 0);
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
}

// A coordinator restarted during a graceful stop (launch passes
// --stop_requested) used to form a world that ran to the end; and a world
// re-formed after a worker was lost in a stop had no stop step at all. Both
// now stop after their first step, and every member hears the step when
// the world forms.
TEST_F(JobTest, AWorldFormedDuringAGracefulStopStopsAfterItsFirstStep) {
  Restart("", /*stop_requested=*/true);
  std::vector<coordinator::RegisterResponse> formed = FormWorld(1, 2);
  EXPECT_EQ(formed[0].stop_at(), 1);
  EXPECT_EQ(formed[1].stop_at(), 1);
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::STOPPING);

  Restart("");
  std::vector<coordinator::RegisterResponse> running = FormWorld(3, 4, 2);
  EXPECT_EQ(running[0].stop_at(), 0);
  job_->RequestStop("test");
  // Rank 1 is lost during the stop; the survivors' next world stops too.
  ASSERT_TRUE(job_->Report(Report(0, running[0].generation(), 1)).ok());
  env_.Advance(absl::Seconds(1));
  job_->CheckHeartbeats();
  std::vector<coordinator::RegisterResponse> again = FormWorld(5, 6, running[0].generation());
  EXPECT_EQ(again[0].stop_at(), 1);
}

TEST_F(JobTest, FatalErrorFailsTheJob) {
  FormWorld(1, 2);
  coordinator::WorkerReport r = Report(0, 1, 3);
  r.set_fatal_error("loss became nan at step 3");
  ASSERT_TRUE(job_->Report(r).ok());
  EXPECT_TRUE(job_->AwaitEnd(absl::Seconds(1)));
  EXPECT_TRUE(absl::StrContains(job_->final_status().message(), "loss became nan")) << job_->final_status();
  // A worker registering afterwards learns the job is over, and why.
  absl::StatusOr<coordinator::RegisterResponse> late = job_->Register(RegisterReq(0, 5), [] { return false; });
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(late->job_over());
  EXPECT_TRUE(absl::StrContains(late->job_error(), "loss became nan"));
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FAILED);
}

TEST_F(JobTest, AReportThatNamesAnythingButItsOwnShardOrAHandedOutCheckpointChangesNothing) {
  const std::string root = dir_ + "_ckpt";
  std::system(("rm -rf '" + root + "'").c_str());
  Restart(root);
  FormWorld(1, 2);
  coordinator::WorkerReport planted = Report(1, 1, 10);
  coordinator::SavedShard* s = planted.add_saved();
  s->set_step(10);
  s->set_world_size(2);
  s->set_file("../../../../etc/passwd");
  s->set_size(4);
  EXPECT_EQ(job_->Report(planted).code(), absl::StatusCode::kInvalidArgument);

  coordinator::WorkerReport bad_mark = Report(0, 1, 10);
  bad_mark.set_bad_checkpoint_step(7);  // never committed, never handed out
  EXPECT_EQ(job_->Report(bad_mark).code(), absl::StatusCode::kInvalidArgument);

  // A report for rank 0 from anyone but the process that registered it.
  coordinator::WorkerReport impostor = Report(0, 1, 10);
  impostor.set_fatal_error("forged");
  impostor.set_member_secret(secrets_[1]);  // rank 1's secret does not speak for rank 0
  EXPECT_EQ(job_->Report(impostor).code(), absl::StatusCode::kPermissionDenied);
  impostor.clear_member_secret();
  EXPECT_EQ(job_->Report(impostor).code(), absl::StatusCode::kPermissionDenied);

  const coordinator::JobStatus st = job_->Snapshot();
  EXPECT_EQ(st.state(), coordinator::JobStatus::RUNNING);
  EXPECT_EQ(st.generation(), 1u);
  EXPECT_EQ(st.bad_checkpoints(), 0);
  EXPECT_FALSE(env_.FileExists(StepDir(root, 10) + "/COMMITTED"));
}

TEST_F(JobTest, NextGenerationNumberSurvivesARestartOfTheCoordinator) {
  FormWorld(1, 2);
  job_.reset();
  store_.reset();
  store_ = *JobStore::Open(Env::Default(), dir_);
  Restart("");
  EXPECT_EQ(FormWorld(4, 5)[0].generation(), 2u);
}

// Issue 34, finding 1: a coordinator restarted after every worker finished
// waited for them forever. "Finished" is now in the store before any worker
// hears it; a coordinator started again with the same config finds the job
// over (answering registrations with job_over), while another config (more
// steps) on the same store is a new run.
TEST_F(JobTest, AFinishedJobIsRecordedBeforeAnyWorkerHearsItAndStaysFinished) {
  FormWorld(1, 2);
  for (int rank : {0, 1}) {
    coordinator::WorkerReport done = Report(rank, 1, 100);
    done.set_finished(true);
    ASSERT_TRUE(job_->Report(done).ok());
  }
  EXPECT_TRUE(job_->AwaitEnd(absl::Seconds(5)));
  ASSERT_TRUE(store_->Get("finished")->has_value()) << "told the workers before recording it";
  EXPECT_EQ(job_->FinishedAtStart(), 0);

  Restart("");
  EXPECT_EQ(job_->FinishedAtStart(), 100);
  EXPECT_TRUE(job_->AwaitEnd(absl::Milliseconds(10)));
  EXPECT_TRUE(job_->final_status().ok());
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::DONE);
  absl::StatusOr<coordinator::RegisterResponse> late = job_->Register(RegisterReq(0, 9, 1), [] { return false; });
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(late->job_over());
  EXPECT_EQ(late->job_error(), "");

  config_ = *ParseConfigText("model { mlp { hidden_sizes: 8 } } train { total_steps: 200 }", "test");
  Restart("");
  EXPECT_EQ(job_->FinishedAtStart(), 0) << "a run with more steps is not the finished job";
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
  EXPECT_FALSE(store_->Get("finished")->has_value());
  EXPECT_EQ(FormWorld(4, 5)[0].generation(), 2u);
}

// Issue 34, finding 5: when rank 1 stopped, rank 0 (alive) left the broken
// generation first and the coordinator logged rank 0 as lost. A worker that
// leaves says why; the world breaks on its word, and its stream's end is
// not a loss.
TEST_F(JobTest, AWorkerThatLeavesABrokenWorldIsNotTheOneCountedLost) {
  FormWorld(1, 2);
  coordinator::WorkerReport leaving = Report(0, 1, 40);
  leaving.set_left_reason("peer rank 1 is gone: no frame for 30s (reported by rank 0)");
  ASSERT_TRUE(job_->Report(leaving).ok());
  job_->StreamEnded(0, 1, /*broken=*/true);
  const coordinator::JobStatus s = job_->Snapshot();
  EXPECT_EQ(s.state(), coordinator::JobStatus::FORMING);
  EXPECT_EQ(s.worker_losses(), 1);
  EXPECT_EQ(s.last_disruption(), "worker rank 0 left it: peer rank 1 is gone: no frame for 30s (reported by rank 0)");
  EXPECT_EQ(s.last_disruption().find("rank 0 (") , std::string::npos) << "rank 0 named as lost";
}

}  // namespace
}  // namespace shardline
