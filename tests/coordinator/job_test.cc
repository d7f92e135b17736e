#include "coordinator/job.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "absl/strings/match.h"
#include "common/config.h"

namespace shardline {
namespace {

class Lines : public MetricsSink {
 public:
  absl::Status WriteLine(absl::string_view line) override {
    lines.emplace_back(line);
    return absl::OkStatus();
  }
  std::vector<std::string> lines;
};

class JobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // ctest runs test cases in parallel processes: one database each.
    dir_ = ::testing::TempDir() + "/job_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf '" + dir_ + "'").c_str());
    store_ = *JobStore::Open(dir_);
    config_ = *ParseConfigText("model { hidden_sizes: 8 } train { total_steps: 100 }", "test");
    CoordinatorOptions o;
    o.world_size = 2;
    o.heartbeat_timeout = absl::Milliseconds(300);
    job_ = std::make_unique<Job>(config_, store_.get(), &lines_, o);
    ASSERT_TRUE(job_->Init().ok());
  }

  static coordinator::RegisterRequest Req(int rank, uint64_t incarnation, uint64_t previous = 0) {
    coordinator::RegisterRequest r;
    r.set_transport_address("127.0.0.1:" + std::to_string(1000 + incarnation));
    r.set_requested_rank(rank);
    r.set_incarnation(incarnation);
    r.set_previous_generation(previous);
    return r;
  }

  // Registers both ranks concurrently; returns their responses.
  std::vector<coordinator::RegisterResponse> FormWorld(uint64_t inc0, uint64_t inc1, uint64_t previous = 0) {
    std::vector<coordinator::RegisterResponse> out(2);
    std::thread t([&] { out[1] = *job_->Register(Req(1, inc1, previous), [] { return false; }); });
    out[0] = *job_->Register(Req(0, inc0, previous), [] { return false; });
    t.join();
    return out;
  }

  static coordinator::WorkerReport Report(int rank, uint64_t gen, int64_t steps) {
    coordinator::WorkerReport r;
    r.set_rank(rank);
    r.set_generation(gen);
    r.set_steps_done(steps);
    r.set_total_steps(100);
    return r;
  }

  std::string dir_;
  std::unique_ptr<JobStore> store_;
  config::JobConfig config_;
  Lines lines_;
  std::unique_ptr<Job> job_;
};

TEST_F(JobTest, WorldFormsWhenAllRanksRegisterAndGetsTheConfig) {
  const auto world = FormWorld(1, 2);
  EXPECT_EQ(world[0].generation(), 1u);
  EXPECT_EQ(world[0].world_size(), 2);
  EXPECT_EQ(world[1].rank(), 1);
  ASSERT_EQ(world[0].peers_size(), 2);
  EXPECT_EQ(world[0].peers(1), "127.0.0.1:1002");
  EXPECT_TRUE(absl::StrContains(world[1].config_text(), "hidden_sizes: 8"));
  EXPECT_EQ(job_->Snapshot().state, JobState::kRunning);
  // The generation is durable.
  EXPECT_EQ(**store_->Get("generation"), "1");
}

TEST_F(JobTest, LiveRankCannotBeClaimedTwice) {
  FormWorld(1, 2);
  absl::StatusOr<coordinator::RegisterResponse> r = job_->Register(Req(1, 99), [] { return false; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "rank 1 is held by the live worker at 127.0.0.1:1002"))
      << r.status();
  r = job_->Register(Req(-1, 99), [] { return false; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(JobTest, GlobalStepIsTheSlowestWorkerAndMetricLinesAreKept) {
  FormWorld(1, 2);
  coordinator::WorkerReport r0 = Report(0, 1, 40);
  r0.add_metric_lines("{\"step\":40,\"split\":\"train\",\"loss\":0.5}");
  ASSERT_TRUE(job_->Report(r0).ok());
  ASSERT_TRUE(job_->Report(Report(1, 1, 38)).ok());
  EXPECT_EQ(job_->Snapshot().global_step, 38);
  ASSERT_EQ(lines_.lines.size(), 1u);
  EXPECT_TRUE(absl::StrContains(job_->Snapshot().last_train_line, "0.5"));
  EXPECT_FALSE(job_->Report(Report(0, 7, 1)).ok());  // a generation that is not running
}

TEST_F(JobTest, LostWorkerBreaksTheWorldAndSurvivorsFormTheNextGeneration) {
  FormWorld(1, 2);
  ASSERT_TRUE(job_->Report(Report(0, 1, 5)).ok());
  ASSERT_TRUE(job_->Report(Report(1, 1, 5)).ok());
  job_->StreamEnded(1, 1, /*broken=*/true);
  EXPECT_EQ(job_->Snapshot().state, JobState::kForming);
  EXPECT_EQ(job_->Snapshot().worker_losses, 1);
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

TEST_F(JobTest, SilentWorkerIsLostAfterTheHeartbeatTimeout) {
  FormWorld(1, 2);
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(job_->Report(Report(0, 1, 1)).ok());
  job_->CheckHeartbeats();
  EXPECT_EQ(job_->Snapshot().state, JobState::kRunning);
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(job_->Report(Report(0, 1, 2)).ok());
  job_->CheckHeartbeats();  // rank 1 silent for 400 ms > 300 ms
  EXPECT_EQ(job_->Snapshot().state, JobState::kForming);
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
  EXPECT_EQ(job_->Snapshot().state, JobState::kDone);
  EXPECT_EQ(job_->Register(Req(0, 5), [] { return false; }).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobTest, FatalErrorFailsTheJob) {
  FormWorld(1, 2);
  coordinator::WorkerReport r = Report(0, 1, 3);
  r.set_fatal_error("loss became nan at step 3");
  ASSERT_TRUE(job_->Report(r).ok());
  EXPECT_TRUE(job_->AwaitEnd(absl::Seconds(1)));
  EXPECT_TRUE(absl::StrContains(job_->final_status().message(), "loss became nan")) << job_->final_status();
}

TEST_F(JobTest, NextGenerationNumberSurvivesARestartOfTheCoordinator) {
  FormWorld(1, 2);
  job_.reset();
  store_.reset();
  store_ = *JobStore::Open(dir_);
  CoordinatorOptions o;
  o.world_size = 2;
  job_ = std::make_unique<Job>(config_, store_.get(), &lines_, o);
  ASSERT_TRUE(job_->Init().ok());
  EXPECT_EQ(FormWorld(4, 5)[0].generation(), 2u);
}

}  // namespace
}  // namespace shardline
