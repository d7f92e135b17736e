// Elastic worlds (runtime.min_workers): a world short of a worker for
// replace_timeout_seconds re-forms with the survivors, ranked by slot and
// resharded from their memory; a worker that returns waits for the next
// committed checkpoint, where the world re-forms larger; the history of
// sizes survives a restart of the coordinator.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "common/job/config.h"
#include "common/platform/env_wrapper.h"
#include "coordinator/job.h"
#include "tests/coordinator/register_request.h"
#include "tests/util/fault_env.h"
#include "tests/util/metric_lines.h"

namespace shardline {
namespace {

// A registration running on its own thread (it blocks until a world forms);
// it gives up after a minute, so a failing test cannot hang.
class PendingRegister {
 public:
  PendingRegister(Job* job, coordinator::RegisterRequest req) {
    thread_ = std::thread([this, job, req] {
      const absl::Time give_up = absl::Now() + absl::Seconds(60);
      result_ = job->Register(req, [give_up] { return absl::Now() > give_up; });
      done_ = true;
    });
  }
  ~PendingRegister() {
    if (thread_.joinable()) thread_.join();
  }
  bool done() const { return done_.load(); }
  absl::StatusOr<coordinator::RegisterResponse> Get() {
    thread_.join();
    return result_;
  }

 private:
  std::thread thread_;
  std::atomic<bool> done_{false};
  absl::StatusOr<coordinator::RegisterResponse> result_;
};

class ElasticJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.UseManualClock();
    dir_ = ::testing::TempDir() + "/job_elastic_test_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    root_ = dir_ + "_ckpt";
    std::system(("rm -rf '" + dir_ + "' '" + root_ + "'").c_str());
    store_ = *JobStore::Open(Env::Default(), dir_);
    config_ = *ParseConfigText(
        "model { mlp { hidden_sizes: 8 } } train { total_steps: 1000 } "
        "runtime { num_workers: 3 min_workers: 2 replace_timeout_seconds: 5 } "
        "checkpoint { every_steps: 50 memory_every_steps: 50 }",
        "test");
    Restart();
  }

  void Restart() {
    job_.reset();
    CoordinatorOptions o;
    o.world_size = 3;
    o.heartbeat_timeout = absl::Seconds(30);
    o.env = &env_;
    o.checkpoint_root = root_;
    job_ = std::make_unique<Job>(config_, store_.get(), &lines_, o);
    ASSERT_TRUE(job_->Init().ok());
  }

  // Registers every request at once; returns the responses in order.
  std::vector<coordinator::RegisterResponse> Form(const std::vector<coordinator::RegisterRequest>& reqs) {
    std::vector<std::unique_ptr<PendingRegister>> pending;
    for (const auto& r : reqs) pending.push_back(std::make_unique<PendingRegister>(job_.get(), r));
    std::vector<coordinator::RegisterResponse> out;
    for (auto& p : pending) {
      absl::StatusOr<coordinator::RegisterResponse> got = p->Get();
      EXPECT_TRUE(got.ok()) << got.status();
      out.push_back(got.ok() ? *got : coordinator::RegisterResponse());
    }
    return out;
  }

  // The report of rank `rank` of `world` saying it saved its shard of `step`.
  coordinator::WorkerReport Saved(const coordinator::RegisterResponse& world, int64_t step) {
    EXPECT_TRUE(env_.CreateDirs(StepDir(root_, step)).ok());
    coordinator::WorkerReport r = MemberReport(world);
    r.set_steps_done(step + 3);
    r.set_total_steps(1000);
    coordinator::SavedShard* s = r.add_saved();
    s->set_step(step);
    s->set_world_size(world.world_size());
    s->set_file(ShardFileName(world.rank(), world.world_size()));
    s->set_size(4);
    EXPECT_TRUE(WriteFileAtomically(&env_, StepDir(root_, step) + "/" + s->file(), "abcd").ok());
    return r;
  }

  FaultEnv env_;  // a clock that moves only by Advance (SetUp), a disk that can stall
  std::string dir_, root_;
  std::unique_ptr<JobStore> store_;
  config::JobConfig config_;
  MetricLines lines_;
  std::unique_ptr<Job> job_;
};

TEST_F(ElasticJobTest, ALostWorkerNotBackInTimeLeavesASmallerWorldThatGrowsAgainAtTheNextCommit) {
  std::vector<coordinator::RegisterResponse> first = Form({RegisterReq(0, 1), RegisterReq(1, 2), RegisterReq(2, 3)});
  ASSERT_EQ(first[2].world_size(), 3);
  EXPECT_EQ(first[2].rank(), 2);
  EXPECT_EQ(first[2].slot(), 2);
  job_->StreamEnded(1, 1, /*broken=*/true);  // slot 1 is lost for good

  // The survivors hold, between them, every shard of the world of 3 at step
  // 100: each its own and its predecessor's.
  coordinator::RegisterRequest a = RegisterReq(0, 1, 1), b = RegisterReq(2, 3, 1);
  AddHeld(&a, 100, 3, 0);
  AddHeld(&a, 100, 3, 2);
  AddHeld(&b, 100, 3, 2);
  AddHeld(&b, 100, 3, 1);
  PendingRegister ra(job_.get(), a), rb(job_.get(), b);
  // Not before the timeout, on the coordinator's clock.
  env_.Advance(absl::Seconds(4));
  job_->CheckHeartbeats();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(ra.done());
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
  env_.Advance(absl::Seconds(2));
  job_->CheckHeartbeats();
  absl::StatusOr<coordinator::RegisterResponse> wa = ra.Get(), wb = rb.Get();
  ASSERT_TRUE(wa.ok()) << wa.status();
  ASSERT_TRUE(wb.ok()) << wb.status();
  EXPECT_EQ(wa->generation(), 2u);
  EXPECT_EQ(wa->world_size(), 2);
  EXPECT_EQ(wa->rank(), 0);
  EXPECT_EQ(wb->rank(), 1) << "the ranks close the gap of the lost slot";
  EXPECT_EQ(wb->slot(), 2);
  ASSERT_EQ(wb->peers_size(), 2);
  EXPECT_EQ(wb->peers(1), "127.0.0.1:1003");
  // Resharded from memory: shard s of the world of 3 comes from its holder.
  EXPECT_EQ(wa->memory_step(), 100);
  EXPECT_EQ(wa->memory_world_size(), 3);
  EXPECT_EQ(std::vector<int>(wa->memory_sources().begin(), wa->memory_sources().end()), (std::vector<int>{0, 1, 0}));
  coordinator::JobStatus status = job_->Snapshot();
  EXPECT_EQ(status.world_size(), 2);
  EXPECT_EQ(status.target_world_size(), 3);
  ASSERT_EQ(status.world_changes_size(), 2);
  EXPECT_EQ(status.world_changes(1).from_size(), 3);
  EXPECT_EQ(status.world_changes(1).to_size(), 2);
  EXPECT_EQ(status.world_changes(1).step(), 100);
  ASSERT_FALSE(lines_.lines.empty());
  EXPECT_EQ(lines_.lines.back(),
            "{\"step\":100,\"split\":\"world\",\"world_size\":2,\"previous_world_size\":3,\"generation\":2}");

  // A worker comes back: it waits while the smaller world trains on.
  PendingRegister back(job_.get(), RegisterReq(-1, 4));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(back.done());
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::RUNNING);
  // The checkpoint of step 150 commits: the world ends on purpose (no loss)...
  ASSERT_TRUE(job_->Report(Saved(*wa, 150)).ok());
  ASSERT_TRUE(job_->Report(Saved(*wb, 150)).ok());
  EXPECT_TRUE(env_.FileExists(StepDir(root_, 150) + "/COMMITTED"));
  status = job_->Snapshot();
  EXPECT_EQ(status.state(), coordinator::JobStatus::FORMING);
  EXPECT_EQ(status.worker_losses(), 1);
  // ... and re-forms with all three once the two members register again.
  std::vector<coordinator::RegisterResponse> grown = Form({RegisterReq(0, 1, 2), RegisterReq(2, 3, 2)});
  absl::StatusOr<coordinator::RegisterResponse> wc = back.Get();
  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->world_size(), 3);
  EXPECT_EQ(wc->slot(), 1) << "the returning worker takes the free slot";
  EXPECT_EQ(wc->rank(), 1);
  EXPECT_EQ(grown[1].rank(), 2);
  EXPECT_EQ(wc->start_step(), 150);
  EXPECT_EQ(wc->restore_dir(), StepDir(root_, 150));
  ASSERT_EQ(job_->Snapshot().world_changes_size(), 3);

  // A restarted coordinator knows the history.
  job_.reset();
  store_.reset();
  store_ = *JobStore::Open(Env::Default(), dir_);
  Restart();
  status = job_->Snapshot();
  ASSERT_EQ(status.world_changes_size(), 3);
  EXPECT_EQ(status.world_changes(2).from_size(), 2);
  EXPECT_EQ(status.world_changes(2).to_size(), 3);
  EXPECT_TRUE(absl::StrContains(status.world_changes(2).reason(), "returned")) << status.world_changes(2).reason();
}

TEST_F(ElasticJobTest, TooFewSurvivorsKeepWaitingInsteadOfFormingBelowMinWorkers) {
  Form({RegisterReq(0, 1), RegisterReq(1, 2), RegisterReq(2, 3)});
  job_->StreamEnded(1, 1, /*broken=*/true);
  PendingRegister alone(job_.get(), RegisterReq(0, 1, 1));  // slot 2 never comes back either
  env_.Advance(absl::Seconds(60));
  job_->CheckHeartbeats();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(alone.done());
  EXPECT_EQ(job_->Snapshot().state(), coordinator::JobStatus::FORMING);
  // Slot 2 returns, past the timeout: a world of two forms at once.
  PendingRegister two(job_.get(), RegisterReq(2, 3, 1));
  absl::StatusOr<coordinator::RegisterResponse> w0 = alone.Get();
  ASSERT_TRUE(w0.ok()) << w0.status();
  EXPECT_EQ(w0->world_size(), 2);
  EXPECT_TRUE(two.Get().ok());
}

TEST_F(ElasticJobTest, ARigidJobRefusesMinWorkersAboveItsWorldAndNeverShrinks) {
  config::JobConfig bad = config_;
  bad.mutable_runtime()->set_min_workers(4);
  const absl::Status s = ValidateConfig(bad);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "runtime.min_workers")) << s;

  config_.mutable_runtime()->set_min_workers(0);
  Restart();
  Form({RegisterReq(0, 1), RegisterReq(1, 2), RegisterReq(2, 3)});
  job_->StreamEnded(1, 1, /*broken=*/true);
  PendingRegister a(job_.get(), RegisterReq(0, 1, 1)), b(job_.get(), RegisterReq(2, 3, 1));
  env_.Advance(absl::Seconds(600));
  job_->CheckHeartbeats();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(a.done());
  // Its lost slot back: the world of three forms again.
  PendingRegister c(job_.get(), RegisterReq(1, 4));
  ASSERT_TRUE(c.Get().ok());
  EXPECT_EQ(a.Get()->world_size(), 3);
  EXPECT_TRUE(b.Get().ok());
}

}  // namespace
}  // namespace shardline
